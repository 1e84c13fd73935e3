"""The ranking table (``amem.backends._edge_table``): every point's ranking fields read into
RAM in the background, never shown stale, read again after an index build."""

from __future__ import annotations

import threading
import time

import pytest

from amem.backends import EdgeBackend
from amem.backends._edge_table import PAGE, Filler
from amem.backends.base import Match, VectorBackend, Where

from .conftest import Factory
from ._data import DIM, pid, random_points

WHERE = Where(must=(Match("agent_id", "agent-1"), Match("is_active", True)))
FIELDS = ("n", "tag", "is_active")


def filled_backend(count: int = 600, fields: tuple[str, ...] = FIELDS) -> EdgeBackend:
    """A temporary edge store of ``count`` points of one agent, its table filled (more points
    than one page of the fill, so the pass pages)."""
    backend = EdgeBackend.temporary(DIM)
    points = random_points(count, seed=11)
    for p in points:
        p.payload["agent_id"] = "agent-1"
        p.payload["is_active"] = True
    backend.upsert(points)
    assert backend.keep_fields(fields, 10_000)
    return backend


def test_the_fill_keeps_every_point_and_searches_then_read_no_payload() -> None:
    with filled_backend() as backend:
        table = backend.field_table(wait=30)
        assert table is not None
        assert table["state"] == "filled" and table["points"] == 600 and table["passes"] == 1
        assert len(backend.field_cache) == 600
        misses = backend.field_cache.misses
        points = random_points(600, seed=11)
        for n in (3, 77, 431):
            legs = backend.search_legs(points[n].dense, points[n].sparse, WHERE, 40, fields=FIELDS)
            assert legs.dense and legs.sparse
            # the payloads are the engine's: each hit's n is its own point's
            assert all(h.payload["n"] == int(h.id.replace("-", ""), 16) - 1
                       for h in [*legs.dense, *legs.sparse])
        assert backend.field_cache.misses == misses  # nothing was read from the payload


def test_the_table_never_shows_a_written_point_stale() -> None:
    with filled_backend() as backend:
        backend.field_table(wait=30)
        query = random_points(600, seed=11)[5]

        def shown(n: int) -> dict[str, object]:
            legs = backend.search_legs(query.dense, query.sparse, WHERE, 600, fields=FIELDS)
            return {h.id: h.payload for h in legs.dense}.get(pid(n), {"gone": True})

        assert shown(5) == {"n": 5, "is_active": True}
        backend.set_payload(pid(5), {"tag": "kept"})
        assert shown(5) == {"n": 5, "is_active": True, "tag": "kept"}
        assert backend.update_point(pid(5), {"is_active": False})
        assert shown(5) == {"gone": True}  # the filter now excludes it: not served from RAM
        backend.delete([pid(6)])
        assert shown(6) == {"gone": True}


def test_an_index_build_clears_the_table_and_a_new_pass_fills_it() -> None:
    with filled_backend() as backend:
        backend.field_table(wait=30)
        backend.optimize()
        table = backend.field_table(wait=30)
        assert table is not None and table["state"] == "filled" and table["passes"] == 2
        assert len(backend.field_cache) == 600


def test_the_table_stops_at_its_limit_and_close_stops_the_thread() -> None:
    with EdgeBackend.temporary(DIM) as backend:
        backend.upsert(random_points(600, seed=12))
        assert not backend.keep_fields(FIELDS, 0)  # 0: nothing kept, no thread
        assert backend.field_table() is None
        assert backend.keep_fields(FIELDS, 300)
        table = backend.field_table(wait=30)
        assert table is not None and table["points"] == 300
        assert len(backend.field_cache) == 300
        assert backend.keep_fields(FIELDS, 300)  # a second call starts nothing new
    assert not [t for t in threading.enumerate() if t.name == "amem-rank-table"]


@pytest.mark.parametrize("kind", ["qdrant-local"], indirect=True)
def test_a_qdrant_backend_keeps_no_table(make_backend: Factory, kind: str) -> None:
    backend: VectorBackend = make_backend()
    assert backend.keep_fields(FIELDS, 100) is False
    assert backend.field_table() is None


def test_a_failing_page_stops_the_fill_and_says_why() -> None:
    """A fill that fails costs speed, never a search: its state names the failure (``amem
    doctor`` reports it) and the thread ends its pass."""
    pages: list[str | None] = []

    def read(offset: str | None, n: int) -> tuple[int, str | None]:
        pages.append(offset)
        if offset is not None:
            raise OSError("the disk went away")
        return n, "next"

    filler = Filler(read, 10_000)
    filler.start()
    try:
        assert filler.wait(10)
        assert filler.state.state == "failed: the disk went away"
        assert filler.state.points == PAGE and pages == [None, "next"]
        # amem doctor turns that state into a warning naming the cause
        from dataclasses import asdict

        from tools.reports import rank_table_problem

        warning = rank_table_problem(asdict(filler.state))
        assert warning is not None and f"after {PAGE} notes (the disk went away)" in warning
        assert rank_table_problem({"state": "filled", "points": 9}) is None
        assert rank_table_problem(None) is None
    finally:
        filler.stop()


def test_a_restart_during_a_pass_begins_again_from_the_first_point() -> None:
    started = threading.Event()
    release = threading.Event()
    offsets: list[str | None] = []

    def read(offset: str | None, n: int) -> tuple[int, str | None]:
        offsets.append(offset)
        if len(offsets) == 1:
            started.set()
            release.wait(10)
            return n, "second"
        return 1, None

    filler = Filler(read, 10_000)
    filler.start()
    try:
        assert started.wait(10)
        filler.restart()  # the cache was cleared while the first page was read
        release.set()
        assert filler.wait(10)
        # the first pass stopped after its page; the second began again at the first point
        assert offsets == [None, None]
        assert filler.state.state == "filled" and filler.state.passes == 1
    finally:
        filler.stop()


def test_limit_zero_stops_a_kept_table_and_drops_it() -> None:
    with filled_backend() as backend:
        backend.field_table(wait=30)
        assert not backend.keep_fields(FIELDS, 0)
        assert backend.field_table() is None and len(backend.field_cache) == 0
        assert not [t for t in threading.enumerate() if t.name == "amem-rank-table"]
        assert backend.keep_fields(FIELDS, 10_000)  # and it can be kept again
        table = backend.field_table(wait=30)
        assert table is not None and table["points"] == 600


def test_written_retrieval_counts_are_merged_into_the_table_not_dropped() -> None:
    """A server writes every search's retrieval counts; the table keeps those points, with
    the written values, so it does not thin out through the day."""
    keys = FIELDS + ("retrieval_count", "last_accessed")
    with filled_backend(fields=keys) as backend:
        backend.field_table(wait=30)
        backend.set_payload(pid(9), {"retrieval_count": 3, "last_accessed": "2026-03-01"})
        backend.flush()  # writes the held counts to the engine
        kept, missing = backend.field_cache.get(keys, [pid(9)])
        assert not missing and kept[pid(9)] == {"n": 9, "is_active": True, "retrieval_count": 3,
                                                "last_accessed": "2026-03-01"}
        engine = backend.retrieve([pid(9)])[0].payload
        assert {k: engine[k] for k in kept[pid(9)]} == kept[pid(9)]
        # any other payload write forgets the point: the next read asks the engine
        backend.set_payload(pid(9), {"tag": "x"})
        assert backend.field_cache.get(keys, [pid(9)])[1] == [pid(9)]


def test_a_build_on_a_copy_refills_the_table() -> None:
    """The server's index build (``optimize_on_copy``) swaps the shard: the table is cleared
    and read again from the new one."""
    with filled_backend() as backend:
        backend.field_table(wait=30)
        backend.optimize_on_copy()
        table = backend.field_table(wait=30)
        assert table is not None and table["passes"] == 2 and table["points"] == 600


def test_writes_during_the_fill_leave_no_row_stale() -> None:
    """Edits and deletes land while the fill pages through the store: afterwards every kept
    row is what the engine holds (a write lands before or after a page, never inside it)."""
    with EdgeBackend.temporary(DIM) as backend:
        points = random_points(3000, seed=13)
        backend.upsert(points)
        assert backend.keep_fields(FIELDS, 10_000)
        for n in range(0, 3000, 7):  # while the thread fills
            if n % 21 == 0:
                backend.delete([pid(n)])
            else:
                backend.set_payload(pid(n), {"tag": f"t{n}"})
        table = backend.field_table(wait=60)
        assert table is not None and table["state"] == "filled"
        ids = [pid(n) for n in range(3000)]
        kept, _ = backend.field_cache.get(FIELDS, ids)
        engine = {h.id: h.payload for h in backend.retrieve(ids)}
        assert kept, "the fill kept nothing"
        for point_id, row in kept.items():
            assert point_id in engine, f"{point_id} was deleted but is still kept"
            assert row == {k: engine[point_id][k] for k in FIELDS if k in engine[point_id]}


def test_the_fill_rests_between_pages_so_waiting_searches_get_the_gate() -> None:
    """After each page the thread rests as long as the page took: a search waiting for the
    engine gate gets it then (without the rest the thread took the gate back at once, and
    searches during a 100k fill ran 6x slower: RESULTS, "Searches while the table fills")."""
    spans: list[tuple[float, float]] = []

    def read(offset: str | None, n: int) -> tuple[int, str | None]:
        began = time.perf_counter()
        time.sleep(0.02)  # a page that takes 20 ms
        spans.append((began, time.perf_counter()))
        return n, None if len(spans) == 4 else f"p{len(spans)}"

    filler = Filler(read, 10_000)
    filler.start()
    try:
        assert filler.wait(10) and filler.state.state == "filled"
        rests = [nxt[0] - prev[1] for prev, nxt in zip(spans, spans[1:])]
        assert len(rests) == 3 and all(rest >= 0.015 for rest in rests), rests
    finally:
        filler.stop()


def test_the_read_back_runs_once_before_the_first_pass_and_a_failure_of_it_is_no_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    """The server reads the store's files back before its first fill (the engine evicted them
    at the last close); a read-back that fails is logged, and the table still fills."""
    calls: list[str] = []

    def read(offset: str | None, n: int) -> tuple[int, str | None]:
        calls.append("page")
        return 1, None

    def warm(cancelled: object) -> int:
        calls.append("warm")
        raise PermissionError("segments unreadable")

    filler = Filler(read, 10_000, warm=warm)
    with caplog.at_level("WARNING", logger="amem.backends._edge_table"):
        filler.start()
        try:
            assert filler.wait(10)
            filler.restart()  # after an index build: that build read its segments back itself
            assert filler.wait(10)
            assert filler.state.state == "filled" and filler.state.passes == 2
            assert filler.state.read_back_mb == 0
        finally:
            filler.stop()
    assert calls == ["warm", "page", "page"]
    assert "segments unreadable" in caplog.text and "read them from disk" in caplog.text


def test_stop_ends_a_read_back_in_progress() -> None:
    started = threading.Event()
    seen: list[bool] = []

    def warm(cancelled: object) -> int:
        assert callable(cancelled)
        started.set()
        deadline = time.monotonic() + 10
        while not cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(bool(cancelled()))
        return 3 << 20

    filler = Filler(lambda offset, n: (1, None), 10_000, warm=warm)
    filler.start()
    assert started.wait(10)
    assert filler.state.state == "reading back"
    filler.stop()
    assert seen == [True]
    assert filler.state.state != "filled"  # it ended without filling
