"""Step 4d of a search: a question naming a date lifts the notes whose event time falls in it.

"What did Maria donate to a homeless shelter in December 2023?" names a period; a note told in
it is likelier to be the answer than a note on the same subject told in another month. The
period is a soft lift, never a filter (``since`` / ``before`` are the filter): a question's date
may be when something was told, not when it happened, and a turn told two days later about
"last Friday" must stay findable. Each candidate whose ``event_ts`` falls in a named period gets
``time_lift`` added to its fused standing (the logit of the fused score, the z scale of
``ranking.zscore_fusion``), and the list is ordered again.

Only what a question says outright is read (English): a day ("on 7 July, 2023", "July 7,
2023", "2023-07-07"), a month of a year ("in June 2023"), a month of any year ("in June"), a
year ("in 2023"), and a span ending on a day ("the week before August 3, 2023", "two weeks
before ..."). Relative times ("last year", "yesterday") name no period without the time the
question is about, which a search does not know: they lift nothing. Times are UTC, as stored.

LoCoMo dev (benchmarks/RESULTS.md, issue 29, third round): 35 of 383 questions name a period;
MRR of categories 1-4 +0.005 with the date in the note's text (BM25 reads it there too).
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Mapping, Sequence

from .. import ranking
from ..backends.base import Hit
from ..config import AmemConfig

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DATES = [re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
          re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
          re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>\d\d)-(?P<day>\d\d)\b")]
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I)
# a month without a year only after "in" / "during": "may" alone is a verb as often as a month
_MONTH_ALONE = re.compile(rf"\b(?:in|during)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}(?!\w)", re.I)
_YEAR_ALONE = re.compile(rf"\b(?:in|during)\s+{_YEAR}\b", re.I)
_WEEKS_BEFORE = re.compile(r"\b(?:(?P<n>\d|two|three|four|a couple of)\s+weeks?|(?:the\s+)?"
                           r"(?:week|weekend))\s+before\s*$", re.I)
_COUNTS = {"two": 2, "three": 3, "four": 4, "a couple of": 2}
_DAY_S = 86400.0


@dataclass(frozen=True)
class Period:
    """A span of event time a question names: ``[start, end)`` in epoch seconds, or (a month
    named without a year) ``month`` of any year."""

    start: float = -math.inf
    end: float = math.inf
    month: int | None = None

    def holds(self, ts: float) -> bool:
        """True when the epoch second ``ts`` (UTC) lies in this period."""
        if self.month is not None:
            return datetime.fromtimestamp(ts, timezone.utc).month == self.month
        return self.start <= ts < self.end


def _epoch(year: int, month: int, day: int) -> float | None:
    try:
        return datetime(year, month, day, tzinfo=timezone.utc).timestamp()
    except ValueError:  # "31 June 2023": no such day (its month of the year is still read)
        return None


def periods(question: str) -> list[Period]:
    """The periods ``question`` names outright (the module docstring says which forms)."""
    found: list[Period] = []
    taken: list[tuple[int, int]] = []
    for pattern in _DATES:
        for m in pattern.finditer(question):
            month = int(m["mnum"]) if "mnum" in m.groupdict() and m["mnum"] \
                else _MONTHS[m["month"].lower()]
            day = _epoch(int(m["year"]), month, int(m["day"]))
            if day is None:
                continue
            taken.append(m.span())
            before = _WEEKS_BEFORE.search(question[:m.start()].rstrip(" ,"))
            if before:  # the span up to that day, the day itself included
                weeks = _COUNTS.get((before["n"] or "").lower(), int(before["n"])
                                    if before["n"] and before["n"].isdigit() else 1)
                found.append(Period(day - (7 * weeks + 1) * _DAY_S, day + _DAY_S))
            else:
                found.append(Period(day, day + _DAY_S))

    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= lo or span[0] >= hi for lo, hi in taken)

    for m in _MONTH_YEAR.finditer(question):
        if free(m.span()):
            year, month = int(m["year"]), _MONTHS[m["month"].lower()]
            start = _epoch(year, month, 1)
            end = _epoch(year + (month == 12), month % 12 + 1, 1)
            if start is not None and end is not None:
                taken.append(m.span())
                found.append(Period(start, end))
    for m in _MONTH_ALONE.finditer(question):
        if free(m.span()):
            found.append(Period(month=_MONTHS[m["month"].lower()]))
    for m in _YEAR_ALONE.finditer(question):
        if free(m.span()):
            start, end = _epoch(int(m["year"]), 1, 1), _epoch(int(m["year"]) + 1, 1, 1)
            if start is not None and end is not None:
                found.append(Period(start, end))
    return found


def lift_in_periods(fused: Sequence[tuple[str, float]], times: Mapping[str, float],
                    named: Sequence[Period], weight: float) -> list[tuple[str, float]]:
    """``fused`` (best first, scores in (0, 1)) with ``weight`` added to the logit of every
    note whose time lies in one of ``named``, ordered again (ties keep their order)."""
    if not math.isfinite(weight) or weight < 0:
        raise ValueError("weight must be finite and >= 0")
    if not named or weight == 0:
        return list(fused)
    out = []
    for i, (pid, score) in enumerate(fused):
        ts = times.get(pid)
        if ts is not None and any(p.holds(ts) for p in named):
            score = ranking.logistic(ranking.logit(score) + weight)
        out.append((i, pid, score))
    out.sort(key=lambda t: (-t[2], t[0]))
    return [(pid, score) for _, pid, score in out]


def lift(config: AmemConfig, question: str, fused: list[tuple[str, float]],
         hits: Iterable[Hit]) -> list[tuple[str, float]]:
    """Step 4d: ``fused`` lifted where the question names a period (``time_lift`` 0 = off).
    ``hits`` are the candidates with their ``event_ts`` (the legs' and the neighbours')."""
    if config.time_lift <= 0 or config.fusion != "zscore" or not fused:
        return fused
    named = periods(question)
    if not named:
        return fused
    times = {h.id: float(t) for h in hits
             if isinstance(t := h.payload.get("event_ts"), (int, float))}
    return lift_in_periods(fused, times, named, config.time_lift)


__all__ = ["Period", "lift", "lift_in_periods", "periods"]
