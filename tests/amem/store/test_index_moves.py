"""Points a payload or vector write moves out of the engine's index count toward the next
build, and the build indexes them again (amem.backends._edge_moved, amem.index_build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.backends._edge_moved import MovedPoints
from amem.backends.edge import INDEXING_KB, SHARD_DIR, EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.errors import ConfigError
from amem.kernel.clock import ManualClock

ITEMS = [{"text": f"note {i} about topic {i % 7} and place {i % 5}"} for i in range(30)]


def open_store(path: Path, embedder: HashingEmbedder, clock: ManualClock,
               optimize_after: int) -> MemoryStore:
    config = load_config(overrides={"optimize_after": optimize_after})
    return MemoryStore(path, config=config, embedder=embedder, clock=clock)


def built_store(path: Path, embedder: HashingEmbedder, clock: ManualClock) -> MemoryStore:
    """A store of ``ITEMS``, every point indexed (as the nightly job leaves it), builds off."""
    store = open_store(path, embedder, clock, optimize_after=0)
    store.add_many(ITEMS, enrich=False)
    store.optimize()
    return store


def point_ids(store: MemoryStore) -> list[str]:
    return [h.id for h in store.index.backend.scroll(None, limit=100)[0]]


def test_a_build_settles_the_marks_made_before_its_copy_only() -> None:
    moved = MovedPoints()
    moved.mark(["a", "b"])
    token = moved.checkpoint()  # the build copies the store here
    moved.mark(["b", "c"])  # b written again after the copy: moved again in the new store
    moved.forget(["c"])  # c upserted (counted as written) or deleted
    moved.settle(token)
    assert len(moved) == 1
    moved.settle(moved.checkpoint())
    assert len(moved) == 0


def test_payload_writes_count_each_moved_point_once_until_a_build(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    with built_store(tmp_path / "s", embedder, clock) as store:
        backend, build = store.index.backend, store.index.build
        ids = point_ids(store)
        assert build.unindexed == 0
        for round_ in range(2):  # a second write to a moved point moves nothing more
            for pid in ids[:6]:
                backend.set_payload(pid, {"probe": round_})
        assert build.points_moved == 6 and build.unindexed == 6
        # retrieval counts are held in memory, and mark their points when written
        backend.set_payload(ids[10], {"retrieval_count": 3, "last_accessed": "2026-12-04"})
        assert build.points_moved == 6
        backend.write_heat()
        assert build.points_moved == 7
        backend.delete([ids[0]])  # gone: brute-forced by nobody
        assert build.points_moved == 6
        store.optimize()
        assert build.points_moved == 0 and build.to_dict()["points_moved"] == 0


def test_moves_are_kept_in_the_metadata_across_a_reopen(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    path = tmp_path / "s"
    with built_store(path, embedder, clock) as store:
        for pid in point_ids(store)[:5]:
            store.index.backend.set_payload(pid, {"probe": 1})
    saved = json.loads((path / "meta.json").read_text())["index_build"]
    assert saved["points_moved"] == 5 and saved["points_since"] == 0
    with open_store(path, embedder, clock, optimize_after=0) as store:
        build = store.index.build
        store.index.backend.set_payload(point_ids(store)[20], {"probe": 2})
        assert build.points_moved == 6 and build.unindexed == 6
        store.optimize()
        assert build.points_moved == 0


def test_a_served_store_builds_once_searches_and_edits_moved_enough_points(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    # A server's writes that are not adds (retrieval counts, edits) move indexed notes out of
    # the index; once they reach the build trigger, a kept store builds in the background.
    with open_store(tmp_path / "s", embedder, clock, optimize_after=10) as store:
        store.add_many(ITEMS, enrich=False)
        build = store.index.build
        build.wait()
        assert build.runs == 1 and build.unindexed == 0, build.to_dict()
        store.keep_index_built()
        for item in ITEMS[:12]:
            store.search(item["text"], limit=3)
        assert build.runs == 1  # the counts are held in memory: nothing moved yet
        store.flush()  # the server writes them every few minutes; then they count
        assert build.points_moved >= 10, build.to_dict()
        store.search(ITEMS[0]["text"], limit=1)  # the next search finds a build due
        build.wait()
        assert build.runs == 2 and build.state == "done", build.to_dict()
        assert build.points_moved <= 1  # at most the last search's own count, after the copy
        # an edit moves its note too, and starts the build that its count makes due
        notes, _ = store.list(limit=30)
        for note in notes[:10]:
            store.update(note.id, content=note.content + " (edited)")
        build.wait()
        assert build.runs >= 3 and build.unindexed <= 1, build.to_dict()  # links move notes too
        edited = notes[0].content + " (edited)"
        assert store.search(edited, limit=1)[0].content == edited


def test_a_build_indexes_a_small_segment_of_moved_points(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    # At 2,048-d a point holds 8 KB of vectors: 400 notes are 3,200 KB and the 200 moved
    # 1,600 KB, both under the engine's default threshold (10,000 KB), which would leave them
    # plain, and over INDEXING_KB (any segment not empty).
    embedder = HashingEmbedder(dim=2048)
    assert 200 * 8 > INDEXING_KB and 400 * 8 < 10_000
    with open_store(tmp_path / "s", embedder, clock, optimize_after=0) as store:
        store.add_many([{"text": f"fact {i} about {i % 11}"} for i in range(400)], enrich=False)
        backend = store.index.backend
        assert backend.shard.info().indexed_vectors_count == 400  # the sparse vectors only
        store.optimize()
        assert backend.shard.info().indexed_vectors_count == 2 * 400  # dense and sparse
        for pid in [h.id for h in backend.scroll(None, limit=400)[0]][:200]:
            backend.set_payload(pid, {"probe": 1})
        # the moved points' old copies still count, beside the 200 new sparse vectors
        assert backend.shard.info().indexed_vectors_count == 2 * 400 + 200
        store.optimize()
        info = backend.shard.info()
        assert info.points_count == 400 and info.indexed_vectors_count == 2 * 400, info


def test_a_store_made_before_the_threshold_is_given_it_at_open(tmp_path: Path) -> None:
    path = tmp_path / "old"
    EdgeBackend(path, 8).close()
    config_file = path / SHARD_DIR / "edge_config.json"
    config = json.loads(config_file.read_text())
    config["optimizers"]["indexing_threshold"] = None  # as stores were written before
    config_file.write_text(json.dumps(config))
    EdgeBackend(path).close()
    optimizers = json.loads(config_file.read_text())["optimizers"]
    assert optimizers["indexing_threshold"] == INDEXING_KB
    assert optimizers["max_segment_size"] == config["optimizers"]["max_segment_size"]


def test_a_bad_indexing_threshold_is_refused_by_name(tmp_path: Path) -> None:
    for bad in (0, -5, True, "1000"):
        with pytest.raises(ConfigError, match="indexing_kb"):
            EdgeBackend(tmp_path / "s", 8, indexing_kb=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "s" / SHARD_DIR).exists()  # refused before anything was created


def test_counts_written_as_the_store_closes_are_saved_and_capped_by_the_store(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    # A one-shot command's search holds its retrieval counts until close, which writes them:
    # the notes they move are in the saved count. Across opens the marks are only a number,
    # so a note moved in two processes counts twice: never past the store's points.
    path = tmp_path / "s"
    built_store(path, embedder, clock).close()
    for _ in range(12):
        with open_store(path, embedder, clock, optimize_after=0) as store:
            assert store.search(ITEMS[0]["text"], limit=5)
    saved = json.loads((path / "meta.json").read_text())["index_build"]["points_moved"]
    assert 5 <= saved <= len(ITEMS)
    with open_store(path, embedder, clock, optimize_after=0) as store:
        assert store.index.build.points_moved == saved
        for pid in point_ids(store):
            store.index.backend.set_payload(pid, {"probe": 1})
        assert store.index.build.points_moved == len(ITEMS)  # not saved + 30
    # closed, it reports what its close saved (``amem import`` prints it after the close)
    assert store.index.build.to_dict()["points_moved"] == len(ITEMS)
