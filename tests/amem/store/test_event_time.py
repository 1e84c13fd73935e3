"""Event time: given or defaulted on add, normalised to UTC, filtered by search in the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from amem import MemoryStore, bm25, load_config
from amem.backends import EdgeBackend
from amem.backends.base import Point
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.notefields import INDEX_FIELDS
from amem.notes import point_id
from amem.upgrades import INDEXED_KEY

from .conftest import make_store


def test_event_time_is_normalised_to_utc_and_defaults_to_the_write_time(
        store: MemoryStore) -> None:
    given = store.add("Met Bob at the lake", event_time="2025-06-01T10:00:00+02:00", enrich=False)
    naive = store.add("Paid the rent", event_time="2025-07-01T09:30:00", enrich=False)
    plain = store.add("Bought new boots", enrich=False)
    assert store.get(given.id).event_time == "2025-06-01T08:00:00+00:00"
    assert store.get(naive.id).event_time == "2025-07-01T09:30:00+00:00"  # naive is UTC
    assert store.get(plain.id).event_time == "2026-01-10T12:00:00+00:00"  # the store's clock
    assert store.get(given.id).timestamp == "2026-01-10T12:00:00+00:00"  # the write time stays


def test_a_bad_event_time_is_refused_naming_the_field(edge_store: MemoryStore) -> None:
    for bad in ("yesterday", "", 12, "2025-13-01"):
        with pytest.raises(ValidationError) as err:
            edge_store.add("Met Bob at the lake", event_time=bad, enrich=False)
        assert err.value.field == "event_time", bad
    assert edge_store.count() == 0


def _events(store: MemoryStore) -> None:
    for nid, day in (("may", "2025-05-15"), ("june", "2025-06-15"), ("july", "2025-07-15")):
        store.add(f"Sailing trip on the lake with Bob ({nid})", id=nid,
                  event_time=f"{day}T12:00:00Z", enrich=False)


def test_since_is_inclusive_and_before_exclusive(store: MemoryStore) -> None:
    _events(store)

    def found(since: str | None = None, before: str | None = None) -> set[str]:
        return {r.id for r in store.search("sailing lake Bob", limit=10, expand_links=False,
                                           since=since, before=before)}

    assert found() == {"may", "june", "july"}
    assert found(since="2025-06-15T12:00:00Z") == {"june", "july"}
    assert found(before="2025-06-15T12:00:00Z") == {"may"}
    assert found(since="2025-06-01", before="2025-07-01") == {"june"}
    assert found(since="2025-06-15T14:00:00+02:00", before="2025-06-15T12:00:01Z") == {"june"}
    assert found(since="2026-01-01") == set()


def test_the_window_is_applied_in_the_engine_not_after_the_top_k(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    # One candidate per leg: a filter applied after the engine's top 1 would drop the best
    # note (out of the window) and return nothing; the engine's filter returns the old one.
    with make_store("edge", embedder, clock, candidates=1) as store:
        store.add("Sailing trip on the lake with Bob", id="new", event_time="2025-08-01",
                  enrich=False)
        store.add("A lake", id="old", event_time="2025-01-01", enrich=False)
        assert [r.id for r in store.search("Sailing trip lake Bob", limit=1)] == ["new"]
        assert [r.id for r in store.search("Sailing trip lake Bob", limit=1,
                                           before="2025-06-01")] == ["old"]


def test_a_linked_note_outside_the_window_is_not_expanded(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock, link_min_cosine=-1.0) as store:
        _events(store)
        store.index.update_payload("june", store.agent_id, {"links": ["may"]})
        wide = store.search("sailing june", limit=1)
        assert [(r.id, r.via) for r in wide] == [("june", "match"), ("may", "link")]
        narrow = store.search("sailing june", limit=1, since="2025-06-01")
        assert [(r.id, r.via) for r in narrow] == [("june", "match")]


def test_bad_windows_are_refused(edge_store: MemoryStore) -> None:
    cases: list[tuple[Any, Any, str]] = [("2025-07-01", "2025-06-01", "since"),
                                         ("2025-07-01", "2025-07-01", "since"),
                                         (None, "soon", "before"), (5, None, "since")]
    for since, before, field in cases:
        with pytest.raises(ValidationError) as err:
            edge_store.search("lake", since=since, before=before)
        assert err.value.field == field, (since, before)


def test_a_store_written_before_event_times_is_found_by_its_write_time(tmp_path: Path) -> None:
    path, clock = tmp_path / "store", ManualClock("2025-03-01T08:00:00+00:00")
    config = load_config(overrides={})
    with MemoryStore(path, config=config, embedder=HashingEmbedder(dim=64), clock=clock) as old:
        old.add("Boat engine serviced at the marina", id="boat", enrich=False)
    # What an older version wrote: no event time, no index fields, no record of the backfill.
    with EdgeBackend(path, 64) as engine:
        hit = engine.retrieve([point_id("default", "boat")], with_vectors=True)[0]
        assert hit.dense is not None
        payload = {k: v for k, v in hit.payload.items()
                   if k not in ("event_time", "expires_at", "metadata", *INDEX_FIELDS)}
        terms = bm25.note_terms(str(payload["content"]), [], [])
        engine.upsert([Point(hit.id, hit.dense, bm25.doc_vector(terms, 10.0, bm25.Bm25Params()),
                             payload)])
        meta = engine.read_meta()
        meta.pop(INDEXED_KEY)
        engine.write_meta(meta)
    with MemoryStore(path, config=config, embedder=HashingEmbedder(dim=64), clock=clock) as new:
        assert new.get("boat").event_time == "2025-03-01T08:00:00+00:00"
        assert [r.id for r in new.search("boat engine", since="2025-02-01")] == ["boat"]
        assert new.search("boat engine", before="2025-02-01") == []
        assert new.index.backend.read_meta()[INDEXED_KEY] == 1


# -- with the default embedder: the dense leg honours the window too ------------------------

NOTES = [
    ("tea-2024", "Alice drank green tea at breakfast", "2024-03-01"),
    ("tea-2025", "Alice switched from tea to black coffee", "2025-03-01"),
    ("db", "The staging database runs PostgreSQL 16", "2025-03-02"),
]


@pytest.fixture(scope="module")
def e5_store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=make_embedder("e5-small"),
                     config=load_config(overrides={}),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        for nid, text, when in NOTES:
            store.add(text, id=nid, event_time=when, enrich=False)
        yield store


def test_a_question_by_meaning_is_answered_from_its_window(e5_store: MemoryStore) -> None:
    # No query word is in the notes: only the dense leg can find them.
    query = "what beverage did she have in the morning?"
    assert e5_store.search(query, limit=1, heat=False)[0].id in {"tea-2024", "tea-2025"}
    old = e5_store.search(query, limit=3, heat=False, before="2025-01-01")
    assert [r.id for r in old] == ["tea-2024"] and old[0].found_by == "dense"
    new = e5_store.search(query, limit=3, heat=False, since="2025-01-01", expand_links=False)
    assert {r.id for r in new} == {"tea-2025", "db"}
