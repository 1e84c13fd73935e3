"""A bulk write embeds several chunks' new contents in one call, before the write lock.

``Writer.embed_ahead`` (called by ``amem.write.bulk`` every ``AHEAD_CHUNKS`` chunks): the
encoder pads less over more texts, and other writers do not wait while a chunk embeds.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from amem import MemoryStore, load_config
from amem.embed.base import Kind
from amem.embed.hashing import HashingEmbedder
from amem.importer import import_file
from amem.kernel.clock import ManualClock
from amem.notes import Note, content_hash
from amem.write.bulk import AHEAD_CHUNKS
from amem.write.nearduplicate import ContentVectors

CHUNK = 5


def texts(n: int) -> list[str]:
    """``n`` notes that share no word (so none folds into another)."""
    return [" ".join(f"w{i}k{j}" for j in range(6)) for i in range(n)]


class LockWatchingEmbedder(HashingEmbedder):
    """The hashing embedder, recording each passage call and whether the store's write lock
    was held by anyone at the time (another thread tries to take it)."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.calls: list[tuple[list[str], bool]] = []
        self.lock: threading.RLock | None = None

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        if kind == "passage" and self.lock is not None:
            held: list[bool] = []

            def probe() -> None:
                assert self.lock is not None
                got = self.lock.acquire(blocking=False)
                held.append(not got)
                if got:
                    self.lock.release()

            t = threading.Thread(target=probe)
            t.start()
            t.join()
            self.calls.append((list(texts), held[0]))
        return super().embed(texts, kind=kind)


def write_jsonl(path: Path, notes: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in notes), encoding="utf-8")
    return path


def test_an_import_embeds_each_window_of_new_contents_in_one_call_without_the_lock(
        tmp_path: Path) -> None:
    embedder = LockWatchingEmbedder()
    notes = texts(CHUNK * AHEAD_CHUNKS * 2 + 3)
    config = load_config(overrides={"embed_batch": CHUNK})
    with MemoryStore(":memory:", config=config, embedder=embedder,
                     clock=ManualClock()) as store:
        embedder.lock = store.index.lock
        report = import_file(store, write_jsonl(tmp_path / "n.jsonl", notes), enrich=True)
        assert report.created == len(notes)
    window = CHUNK * AHEAD_CHUNKS
    contents = [(call, held) for call, held in embedder.calls if set(call) <= set(notes)]
    assert [len(call) for call, _ in contents] == [window, window, 3]
    assert [held for _, held in contents] == [False, False, False]
    assert sorted(t for call, _ in contents for t in call) == sorted(notes)  # each once


def test_a_second_import_of_the_same_file_embeds_no_content(tmp_path: Path) -> None:
    embedder = LockWatchingEmbedder()
    path = write_jsonl(tmp_path / "n.jsonl", texts(CHUNK * AHEAD_CHUNKS + 2))
    config = load_config(overrides={"embed_batch": CHUNK})
    with MemoryStore(":memory:", config=config, embedder=embedder,
                     clock=ManualClock()) as store:
        embedder.lock = store.index.lock
        import_file(store, path, enrich=True)
        embedder.calls.clear()
        again = import_file(store, path, enrich=True)
    assert again.created == 0 and again.deduplicated == CHUNK * AHEAD_CHUNKS + 2
    assert embedder.calls == []


def test_contents_embedded_ahead_are_not_embedded_again() -> None:
    calls: list[list[str]] = []
    hashing = HashingEmbedder(dim=32)

    def embed(batch: Sequence[str]) -> np.ndarray:
        calls.append(list(batch))
        return np.asarray(hashing.embed(list(batch), kind="passage"))

    vectors = ContentVectors(embed)
    a, b, c = (Note(id=x, content=t, agent_id="a", hash=content_hash(t))
               for x, t in (("a", "alpha note"), ("b", "beta note"), ("c", "gamma note")))
    assert vectors.ahead([a, b]) == 2
    assert vectors.ahead([a]) == 0  # kept: nothing to embed
    got = vectors.embed([b, c, a])
    assert calls == [["alpha note", "beta note"], ["gamma note"]]
    for note, vector in zip((b, c, a), got):
        expected = np.asarray(hashing.embed([note.content], kind="passage")[0])
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
