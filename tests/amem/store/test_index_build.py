"""The engine's index is built after bulk writes, not only by the nightly job (amem.index_build)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from amem import MemoryStore, load_config
from amem.backends.edge import SHARD_DIR, EdgeBackend
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from tools.cli import main

ITEMS = [{"text": f"note {i} about topic {i % 7} and place {i % 5}"} for i in range(30)]


def open_store(path: Path, embedder: HashingEmbedder, clock: ManualClock,
               optimize_after: int) -> MemoryStore:
    config = load_config(overrides={"optimize_after": optimize_after})
    return MemoryStore(path, config=config, embedder=embedder, clock=clock)


def test_bulk_write_builds_the_index_in_the_background(tmp_path: Path, embedder: HashingEmbedder,
                                                       clock: ManualClock) -> None:
    with open_store(tmp_path / "s", embedder, clock, optimize_after=20) as store:
        store.add_many(ITEMS, enrich=False)
        # Started by add_many, which returned without waiting; the store keeps answering.
        assert store.index.build.state in ("running", "done")
        assert store.search("topic 3", limit=3)
        store.index.build.wait()
        info = store.info().index_build
        assert info is not None
        assert info["state"] == "done" and info["points_since"] == 0
        assert info["last_run"] is not None and info["threshold"] == 20
        assert store.count() == len(ITEMS)
        assert store.search("note 12 about topic 5", limit=1)[0].content == ITEMS[12]["text"]
    assert not (tmp_path / "s" / "shard.build").exists()
    with open_store(tmp_path / "s", embedder, clock, optimize_after=20) as store:
        assert store.count() == len(ITEMS)
        assert store.index.build.state == "done" and store.index.build.points_since == 0


def test_changes_made_during_the_build_are_kept(tmp_path: Path, embedder: HashingEmbedder,
                                                clock: ManualClock) -> None:
    with open_store(tmp_path / "s", embedder, clock, optimize_after=20) as store:
        first = store.add_many(ITEMS, enrich=False)
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend)
        deadline = time.monotonic() + 30
        while backend.build_child is None and store.index.build.state == "running":
            assert time.monotonic() < deadline, "the build's child never started"
            time.sleep(0.005)
        added = store.add("written while the index was being built", enrich=False)
        store.delete(first[0].id)
        store.index.build.wait()
        assert store.index.build.state == "done"
        # The add and the delete reached the swapped-in shard (replayed onto the copy).
        assert store.get(added.id).content == "written while the index was being built"
        assert store.count() == len(ITEMS)
        assert first[0].id not in {r.id for r in store.search(ITEMS[0]["text"], limit=5)}
        assert store.index.build.points_since >= 1  # replayed points are not in the index yet
    with open_store(tmp_path / "s", embedder, clock, optimize_after=20) as store:
        assert store.get(added.id).content == "written while the index was being built"
        assert store.count() == len(ITEMS)


def test_points_are_counted_until_the_threshold_and_kept(tmp_path: Path, embedder: HashingEmbedder,
                                                          clock: ManualClock) -> None:
    with open_store(tmp_path / "s", embedder, clock, optimize_after=100) as store:
        store.add_many(ITEMS, enrich=False)
        store.add("one more single note", enrich=False)
        assert store.index.build.state == "idle"
        assert store.index.build.points_since >= len(ITEMS) + 1
        written = store.index.build.points_since
    with open_store(tmp_path / "s", embedder, clock, optimize_after=100) as store:
        assert store.index.build.points_since == written  # kept in meta.json
        store.optimize()  # the nightly job's in-place build resets the count
        assert store.index.build.to_dict()["state"] == "done"
        assert store.index.build.points_since == 0


def test_single_adds_build_in_the_background_in_a_long_running_owner(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    # A one-shot owner (the CLI's `amem add`) only counts single adds: its close would stop
    # a build it started. A server calls keep_index_built: the add that makes the build due
    # starts it in the background, so a day of single adds is not searched by brute force.
    with open_store(tmp_path / "once", embedder, clock, optimize_after=20) as store:
        for item in ITEMS[:25]:
            store.add(item["text"], enrich=False)
        assert store.index.build.state == "idle" and store.index.build.points_since >= 25
    with open_store(tmp_path / "served", embedder, clock, optimize_after=20) as store:
        store.keep_index_built()
        states = []
        for item in ITEMS[:25]:
            store.add(item["text"], enrich=False)
            states.append(store.index.build.state)
        assert states[:19] == ["idle"] * 19  # counted until the threshold
        assert "running" in states[19:] or store.index.build.runs >= 1, states
        store.index.build.wait()
        build = store.index.build
        assert build.state == "done" and build.runs == 1, build.to_dict()
        assert build.points_since < 20  # what was added during the build still counts
        assert store.count() == 25
        assert store.search(ITEMS[3]["text"], limit=1)[0].content == ITEMS[3]["text"]


def test_the_unfiltered_count_is_the_exact_one_through_deletes_moves_and_builds(
        tmp_path: Path, embedder: HashingEmbedder, clock: ManualClock) -> None:
    # EdgeBackend.count(None) reads the engine's tally instead of counting every id (the
    # growth trigger asks it on each served add): it must stay the exact count.
    import qdrant_edge as qe

    with open_store(tmp_path / "s", embedder, clock, optimize_after=50) as store:
        backend = store.index.backend
        assert isinstance(backend, EdgeBackend)

        def agrees() -> int:
            exact = int(backend.shard.count(qe.CountRequest(exact=True)))
            assert backend.count(None) == exact
            return exact

        store.add_many([{"text": f"note {i} on {i % 11} and {i % 13}"} for i in range(120)],
                       enrich=False)
        store.index.build.wait()
        assert agrees() == 120
        ids = [h.id for h in backend.scroll(None, limit=200)[0]]
        backend.delete(ids[:10])
        assert agrees() == 110
        for pid in ids[10:40]:  # a payload write moves a built point into another segment
            backend.set_payload(pid, {"probe": 1})
        assert agrees() == 110
        store.add_many([{"text": f"note {i} on {i % 11} and {i % 13}"} for i in range(100, 160)],
                       enrich=False)  # 20 of them again, 40 new
        store.index.build.wait()
        backend.delete(ids[20:25])  # moved points, deleted
        total = agrees()
        store.optimize()
        assert agrees() == total


def test_zero_threshold_leaves_it_to_the_nightly_job(tmp_path: Path, embedder: HashingEmbedder,
                                                      clock: ManualClock) -> None:
    with open_store(tmp_path / "s", embedder, clock, optimize_after=0) as store:
        store.add_many(ITEMS, enrich=False)
        assert store.index.build.state == "idle"
        assert not store.index.build.due()


def test_a_swap_cut_short_restores_the_shard(tmp_path: Path, embedder: HashingEmbedder,
                                             clock: ManualClock) -> None:
    """A crash between the swap's two renames leaves ``shard.old`` and no ``shard``."""
    where = tmp_path / "s"
    with open_store(where, embedder, clock, optimize_after=0) as store:
        store.add_many(ITEMS, enrich=False)
    os.rename(where / SHARD_DIR, where / "shard.old")
    (where / "shard.build").mkdir()
    with open_store(where, embedder, clock, optimize_after=0) as store:
        assert store.count() == len(ITEMS)
    assert not (where / "shard.old").exists() and not (where / "shard.build").exists()


def test_amem_import_builds_the_index_before_it_exits(tmp_path: Path, capsys: object) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps(item) + "\n" for item in ITEMS), encoding="utf-8")
    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing",
           "AMEM_OPTIMIZE_AFTER": "10"}
    # batches of 10: the import builds as it goes (amem.index_build), and the CLI waits for
    # the build still running when the last batch is written
    assert main(["import", str(notes), "--no-enrich", "--json", "--batch", "10"], env=env) == 0
    out = capsys.readouterr()  # type: ignore[attr-defined]
    report = json.loads(out.out)
    assert report["created"] == len(ITEMS)
    assert report["index_build"]["state"] == "done"
    assert report["index_build"]["points_since"] == 0
    assert "building the search index" in out.err
    # -q silences it (and only the line: the build still runs)
    again = tmp_path / "more.jsonl"
    again.write_text("".join(json.dumps({"text": f"{item['text']} once more"}) + "\n"
                             for item in ITEMS), encoding="utf-8")
    assert main(["-q", "import", str(again), "--no-enrich", "--json", "--batch", "10"],
                env=env) == 0
    quiet = capsys.readouterr()  # type: ignore[attr-defined]
    assert json.loads(quiet.out)["index_build"]["state"] == "done"
    assert "building the search index" not in quiet.err
    assert main(["status", "--json"], env=env) == 0
    status = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert status["memory"]["index_build"]["state"] == "done"


def test_a_build_cut_short_is_reported_by_doctor(tmp_path: Path, capsys: object) -> None:
    """A process killed mid-build leaves ``running`` in meta.json: read back as failed."""
    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"}
    assert main(["add", "a note", "--json"], env=env) == 0
    meta_file = tmp_path / "home" / "store" / "meta.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["index_build"] = {"state": "running", "points_since": 7}
    meta_file.write_text(json.dumps(meta), encoding="utf-8")
    capsys.readouterr()  # type: ignore[attr-defined]
    assert main(["doctor", "--json"], env=env) == 0
    report = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert any("index build failed (interrupted)" in w for w in report["warnings"])
