"""``tools.chats.load`` on a real in-memory conversation store: progress, streaming, the library path."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lcm import IngestResult, LcmStore
from lcm.errors import StoreUnavailableError
from tools.chats.load import MAX_SAID, ExportRejected, PartlyStored, load_export, session_key

from .chat_exports import chatgpt_chain, chatgpt_lisbon


def test_progress_counts_the_check_then_the_store(tmp_path: Path) -> None:
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_lisbon(), chatgpt_chain("c-2", 4), chatgpt_chain("c-3", 2)]),
                   encoding="utf-8")
    seen: list[tuple[str, int, int | None]] = []
    with LcmStore(":memory:") as lcm:
        report = load_export(lcm, src, "chatgpt", "alice", progress=lambda *a: seen.append(a))
        assert report.stored == 18 and report.conversations_stored == 3
        title = lcm.conversation(session_key("alice", "chatgpt", "c-2"))
        assert title is not None and title.title == "A long chat"
    assert seen == [("check", 1, None), ("check", 2, None), ("check", 3, None),
                    ("store", 1, 3), ("store", 2, 3), ("store", 3, 3)]


def test_a_file_of_many_bad_conversations_names_the_first_hundred_and_counts_all(tmp_path: Path) -> None:
    bad = [{"title": f"broken {i}", "id": f"c-{i}", "mapping": {"a": {"parent": "gone"}}} for i in range(130)]
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([*bad, chatgpt_chain("c-ok", 2)]), encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(ExportRejected) as refused:
            load_export(lcm, src, "chatgpt", "alice")
        assert "130 of 131 conversations cannot be read; nothing was stored" in str(refused.value)
        assert str(refused.value).endswith("... and 110 more")
        report = load_export(lcm, src, "chatgpt", "alice", skip_invalid=True)
    assert (report.invalid, len(report.errors), report.stored) == (130, MAX_SAID, 2)
    assert report.errors[0].endswith("conversation 1 ('broken 0', id c-0): node 'a' names the parent 'gone', which "
                                     "is not in the conversation (a broken tree)")


class GoesAway:
    """A conversation store whose server goes away after ``calls`` ingests (the IngestTarget seam)."""

    def __init__(self, store: LcmStore, calls: int) -> None:
        self.store, self.calls = store, calls

    def ingest(self, session_key: str | None, messages: Sequence[Mapping[str, Any]], *,
               session_id: str | None = None, title: str | None = None) -> IngestResult:
        if self.calls == 0:
            raise StoreUnavailableError("the server closed the connection")
        self.calls -= 1
        return self.store.ingest(session_key, messages, session_id=session_id, title=title)


def test_a_store_that_goes_away_stops_the_load_saying_what_is_kept(tmp_path: Path) -> None:
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_chain(f"c-{i}", 4) for i in range(3)]), encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(PartlyStored) as stopped:
            load_export(GoesAway(lcm, 2), src, "chatgpt", "alice")
        said = str(stopped.value)
        assert said.startswith(f"{src}:") and "the server closed the connection" in said
        assert "The 2 conversations stored before it are kept (8 messages); importing the file again" in said
        assert isinstance(stopped.value.cause, StoreUnavailableError)
        again = load_export(lcm, src, "chatgpt", "alice")  # the server is back: the rest, nothing twice
        assert (again.stored, again.skipped_duplicates) == (4, 8)


@pytest.mark.slow  # ~5 s: a 10 MB file, read under tracemalloc
def test_a_large_export_is_never_held_whole(tmp_path: Path) -> None:
    # 300 conversations of 40 turns, ~10 MB: the reader holds one conversation and a chunk of
    # 1 Mi characters (with its copies while it is cut and joined), ~5 MB whatever the file's size
    src = tmp_path / "conversations.json"
    with src.open("w", encoding="utf-8") as out:
        out.write("[")
        for i in range(300):
            conv = chatgpt_chain(f"c-{i}", 40)
            for node in conv["mapping"].values():
                if node["message"]:
                    node["message"]["content"]["parts"][0] += " and the ledger says so" * 12
            out.write(("," if i else "") + json.dumps(conv, indent=1))
        out.write("]")
    size = src.stat().st_size
    assert size > 9_000_000
    with LcmStore(":memory:") as lcm:
        tracemalloc.start()
        try:
            report = load_export(lcm, src, "chatgpt", "alice")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert report.stored == 12_000
    # json.load alone would hold the text and its parsed tree: several times the file
    assert peak < size * 0.75, (peak, size)
