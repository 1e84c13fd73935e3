"""Notes an older amem writes into a store this version already upgraded are upgraded too.

Found by opening an upgraded store with the code of 2026-11-29 and back: its new note sat at
a point id of format 1 (search found it, ``get``/``update``/``delete`` said "no note"), the
notes it linked were written again at format-1 ids beside their current points, and none had
the subject keys the subject filter compares. The one-time upgrades never read the store
again; such a writer keeps no live key, which is how the next open tells its points.
"""

from __future__ import annotations

from pathlib import Path

import qdrant_edge as qe

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.backends.base import LIVE_KEY
from amem.embed.hashing import HashingEmbedder
from amem.notefields import SUBJECT_KEYS, TAG_KEYS
from amem.notes import legacy_point_id, point_id
from amem.upgrades import LIVE_KEYS_KEY

OLD_FIELDS = (LIVE_KEY, SUBJECT_KEYS, TAG_KEYS, "event_ts")  # what a writer of 2026-11-29 did not write


def write_as_an_older_version(path: Path, note_ids: list[str], edits: dict[str, str]) -> None:
    """Rewrite notes as that writer did: at their format-1 id, without the newer fields (the
    current points of ``edits`` stay, as it never knew them; the others are gone)."""
    backend = EdgeBackend(path, 64)
    try:
        hits = backend.retrieve([point_id("default", n) for n in note_ids], with_vectors=True)
        raw = []
        for hit in hits:
            payload = {k: v for k, v in hit.payload.items() if k not in OLD_FIELDS}
            payload["content"] = edits.get(payload["id"], payload["content"])
            assert hit.dense is not None
            raw.append(qe.Point(legacy_point_id("default", payload["id"]),
                                {"dense": [float(x) for x in hit.dense],
                                 "bm25": qe.SparseVector([1], [1.0])}, payload))
        backend.shard.update(qe.UpdateOperation.delete_points(
            [h.id for h in hits if h.payload["id"] not in edits]))
        backend.shard.update(qe.UpdateOperation.upsert_points(raw))
    finally:
        backend.close()


def test_an_older_writers_notes_are_found_by_id_and_subject_after_the_next_open(
        tmp_path: Path) -> None:
    path, config, embedder = tmp_path / "store", load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder) as store:
        store.add("Prefers green tea", subjects=["Alice"], id="a", enrich=False)
        store.add("Rides a blue bicycle to work", subjects=["Alice"], id="c", enrich=False,
                  tags=["Bikes"])
        store.add("Lunch is at noon", id="n", enrich=False)
        assert store.index.meta[LIVE_KEYS_KEY] == 1
    write_as_an_older_version(path, ["a", "c"], {"a": "Prefers green tea without sugar"})
    with MemoryStore(path, config=config, embedder=embedder) as store:
        assert store.get("c").content == "Rides a blue bicycle to work"
        assert store.get("a").content == "Prefers green tea without sugar"  # the later write
        assert store.index.backend.count(None) == 3  # no second copy of "a" left behind
        assert store.index.stats.docs == 3
        found = [r.id for r in store.search("bicycle", subject="alice", limit=5)]
        assert "c" in found
        assert [r.id for r in store.search("bicycle", tags=["bikes"], limit=5)] == ["c"]
        assert "c" in [r.id for r in store.search("bicycle", limit=5)]
        store.delete("c")
        assert "c" not in [r.id for r in store.search("bicycle", limit=5)]


def test_a_store_first_keyed_by_this_open_is_not_taken_for_older_writes(tmp_path: Path) -> None:
    path, config, embedder = tmp_path / "store", load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder) as store:
        store.add("Prefers green tea", subjects=["Alice"], id="a", enrich=False)
    backend = EdgeBackend(path, 64)
    try:  # a store of before the live key: no keys, and no record of having had them
        backend.shard.update(qe.UpdateOperation.delete_payload_by_filter(qe.Filter(), [LIVE_KEY]))
        meta = backend.read_meta()
        meta.pop(LIVE_KEYS_KEY)
        backend.write_meta(meta)
    finally:
        backend.close()
    with MemoryStore(path, config=config, embedder=embedder) as store:
        assert store.index.backend.keyed_at_open  # keyed now, ...
        assert not store.get("a").vector_stale  # ... but nothing else touched
        assert store.index.meta[LIVE_KEYS_KEY] == 1
