"""Note times keep their fraction of a second: an expiry never takes effect before its time, an
event time inside a ``since``/``before`` window with sub-second bounds is found, ``ttl`` is at
least one second, and notes stored with whole seconds (before the fraction was kept) read as
they did."""

from __future__ import annotations

from typing import Iterator

import pytest

from amem import MemoryStore
from amem.errors import NotFoundError, ValidationError
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock

from .conftest import make_store

#: a tenth of a second into a second: a time rounded down to its second lands 0.1 s early
START = "2026-01-10T12:00:00.100000+00:00"


@pytest.fixture
def subsecond_clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture(params=["edge", "qdrant-local"])
def timed_store(request: pytest.FixtureRequest, embedder: HashingEmbedder,
                subsecond_clock: ManualClock) -> Iterator[MemoryStore]:
    with make_store(request.param, embedder, subsecond_clock) as s:
        yield s


def test_a_ttl_gives_its_whole_life_even_late_in_a_second(
        timed_store: MemoryStore, subsecond_clock: ManualClock) -> None:
    note = timed_store.add("Parking spot B7 today", ttl=1, enrich=False)
    assert timed_store.get(note.id).expires_at == "2026-01-10T12:00:01.100000+00:00"
    subsecond_clock.advance(0.95)  # past the whole second the expiry used to be rounded to
    assert timed_store.get(note.id).content == "Parking spot B7 today"
    assert [r.id for r in timed_store.search("parking spot", limit=3)] == [note.id]
    subsecond_clock.advance(0.05)  # exactly its time: gone
    with pytest.raises(NotFoundError, match="expired"):
        timed_store.get(note.id)
    assert timed_store.search("parking spot", limit=3) == []


def test_an_expires_at_less_than_a_second_ahead_is_not_stored_already_expired(
        timed_store: MemoryStore, subsecond_clock: ManualClock) -> None:
    note = timed_store.add("Hotel wifi code 1234", expires_at="2026-01-10T12:00:00.800Z",
                           enrich=False)
    assert note.status == "created"
    assert timed_store.get(note.id).expires_at == "2026-01-10T12:00:00.800000+00:00"
    assert timed_store.count() == 1
    subsecond_clock.advance(0.69)
    assert timed_store.get(note.id).id == note.id
    subsecond_clock.advance(0.01)
    with pytest.raises(NotFoundError, match="expired"):
        timed_store.get(note.id)
    assert timed_store.count() == 0


@pytest.mark.parametrize("ttl", [0.5, 0.999, 1e-6])
def test_a_ttl_under_one_second_is_refused_as_documented(
        timed_store: MemoryStore, ttl: float) -> None:
    with pytest.raises(ValidationError, match="between 1 and") as err:
        timed_store.add("Parking spot B7 today", ttl=ttl)
    assert err.value.field == "ttl"
    assert timed_store.count() == 0 and list(timed_store.iter_notes(include_inactive=True)) == []
    assert timed_store.add("Parking spot B7 today", ttl=1.0, enrich=False).status == "created"


def test_sub_second_event_times_and_bounds_are_compared_exactly(timed_store: MemoryStore) -> None:
    note = timed_store.add("Met Bob at the lake", event_time="2025-05-01T10:00:00.900Z",
                           enrich=False)
    assert timed_store.get(note.id).event_time == "2025-05-01T10:00:00.900000+00:00"

    def found(since: str | None = None, before: str | None = None) -> list[str]:
        return [r.id for r in timed_store.search("Bob lake", limit=3, since=since, before=before)]

    assert found(since="2025-05-01T10:00:00.500Z") == [note.id]  # was left out (rounded down)
    assert found(since="2025-05-01T10:00:00.900Z") == [note.id]  # since is inclusive
    assert found(since="2025-05-01T10:00:00.901Z") == []
    assert found(before="2025-05-01T10:00:00.900Z") == []  # before is exclusive
    assert found(before="2025-05-01T10:00:00.901Z") == [note.id]
    assert found(since="2025-05-01T10:00:00.899Z", before="2025-05-01T10:00:00.901Z") == [note.id]
    # whole-second times are stored as before
    plain = timed_store.add("Paid the rent", event_time="2025-07-01T09:30:00Z", enrich=False)
    assert timed_store.get(plain.id).event_time == "2025-07-01T09:30:00+00:00"


def test_notes_stored_with_whole_seconds_read_as_before(
        embedder: HashingEmbedder, subsecond_clock: ManualClock) -> None:
    """A store written before the fraction was kept holds whole-second texts and integral
    epoch numbers; nothing is rebuilt, and they are read and filtered exactly as written."""
    with make_store("edge", embedder, subsecond_clock) as store:
        note = store.add("Parking spot B7 at the airport", enrich=False)
        store.index.update_payload(note.id, store.agent_id, {
            "event_time": "2025-05-01T10:00:00+00:00", "event_ts": 1746093600,
            "expires_at": "2026-01-10T12:00:02+00:00", "expires_ts": 1768046402})
        old = store.get(note.id)
        assert (old.event_time, old.expires_at) == ("2025-05-01T10:00:00+00:00",
                                                     "2026-01-10T12:00:02+00:00")
        hits = store.search("parking airport", limit=3, since="2025-05-01T09:59:59.500Z",
                            before="2025-05-01T10:00:00.001Z")
        assert [r.id for r in hits] == [note.id]
        assert store.search("parking airport", limit=3, since="2025-05-01T10:00:00.001Z") == []
        subsecond_clock.set("2026-01-10T12:00:01.999999+00:00")
        assert store.get(note.id).id == note.id
        subsecond_clock.advance(1e-6)
        with pytest.raises(NotFoundError, match="expired"):
            store.get(note.id)
