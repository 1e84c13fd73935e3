"""Step 4d: a question naming a period lifts the notes told in it (amem.search.timeq)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.search.timeq import Period, lift_in_periods, periods

from .conftest import make_store


def _day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def _spans(question: str) -> list[tuple[str, str] | int]:
    out: list[tuple[str, str] | int] = []
    for p in periods(question):
        if p.month is not None:
            out.append(p.month)
        else:
            out.append(tuple(datetime.fromtimestamp(t, timezone.utc).date().isoformat()
                             for t in (p.start, p.end)))  # type: ignore[arg-type]
    return out


def test_periods_read_days_months_years_and_weeks_before_a_day() -> None:
    assert _spans("What did Maria plan on the evening of 7 July, 2023?") == [
        ("2023-07-07", "2023-07-08")]
    assert _spans("what happened on July 7th 2023") == [("2023-07-07", "2023-07-08")]
    assert _spans("and on 2023-07-07?") == [("2023-07-07", "2023-07-08")]
    assert _spans("What did she donate in December 2023?") == [("2023-12-01", "2024-01-01")]
    assert _spans("How many times has she gone to the beach in 2023?") == [
        ("2023-01-01", "2024-01-01")]
    assert _spans("When did Melanie go camping in June?") == [6]
    # the span up to the day, the day included
    assert _spans("What did John do the week before August 3, 2023?") == [
        ("2023-07-26", "2023-08-04")]
    assert _spans("the puppy she got two weeks before August 11, 2023") == [
        ("2023-07-27", "2023-08-12")]
    # no period: relative times, a verb that is also a month, no date at all
    assert periods("What did she do last year?") == []
    assert periods("What may she do yesterday?") == []
    assert periods("我什么时候去的北京？") == []


def test_lift_in_periods_raises_the_notes_inside_and_keeps_the_rest() -> None:
    fused = [("a", 0.7), ("b", 0.6), ("c", 0.5)]
    times = {"a": _day("2023-05-01"), "b": _day("2023-06-10"), "c": _day("2023-06-20")}
    june = [Period(_day("2023-06-01"), _day("2023-07-01"))]
    lifted = lift_in_periods(fused, times, june, 1.0)
    assert [pid for pid, _ in lifted] == ["b", "c", "a"]
    assert dict(lifted)["a"] == 0.7 and dict(lifted)["b"] > 0.6
    assert lift_in_periods(fused, times, [Period(month=6)], 0.0) == fused
    assert lift_in_periods(fused, {}, june, 1.0) == fused  # no times: nothing lifts
    with pytest.raises(ValueError):
        lift_in_periods(fused, times, june, -1.0)


def test_a_question_naming_a_month_finds_that_month_note_first(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    def order(**overrides: object) -> list[str]:
        with make_store("edge", embedder, clock, heat=False, **overrides) as store:
            # the same words on two days: only the time tells which the question means
            store.add("Ana went hiking in the hills with friends", id="may", enrich=False,
                      event_time="2023-05-14T10:00:00Z")
            store.add("Ana went hiking in the hills with friends!", id="june", enrich=False,
                      event_time="2023-06-14T10:00:00Z")
            for i in range(4):
                store.add(f"note {i} about tomatoes", id=f"o{i}", enrich=False,
                          event_time=f"2023-0{1 + i}-03T10:00:00Z")
            return [h.id for h in store.search("where did Ana go hiking in June 2023", limit=3,
                                                  expand_links=False)]
    assert order(time_lift=0.0)[0] == "may"
    assert order()[0] == "june"
