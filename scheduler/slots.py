"""Whether a nightly slot is already served, and whether a refused slot excuses it.

One place for the rule that ``served`` (a scheduled run skips), ``missed_slot`` (a start
catches up) and ``amem status`` (``overdue``) all apply: they compared the local *date*
written when the last slot ran with the date of the latest slot in the zone configured now.
That date was written in the zone of its day, so after the zone changed (a laptop flown
from Tokyo to Honolulu, ``schedule_timezone`` edited) the two dates belonged to different
calendars: Tokyo's 2 December began 19 hours before Honolulu's, and Honolulu's night of
2 December counted as served, so no run came for 43 hours. The slot's instant is recorded
beside its date; reading it in the zone of today's schedule puts both on one calendar.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any


def instant(value: Any) -> datetime | None:
    """``value`` as an aware datetime (an ISO text with an offset), else None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def is_served(record: dict[str, Any], slot: datetime, zone: tzinfo, now: datetime) -> bool:
    """True when the record's last served slot covers ``slot`` (the latest fire time at ``now``).

    Covered means: a run of that slot finished (ok or failed; a ``running`` one was killed)
    and its instant falls on ``slot``'s local date in ``zone``, or later than ``slot``. A slot
    recorded after ``now`` covers nothing: the clock was set back (a wrong clock corrected),
    and trusting the record would skip every night until the clock caught up with it.
    """
    done = record.get("last_slot") or {}
    if done.get("status") == "running" or not done.get("date"):
        return False
    recorded = instant(done.get("slot"))
    if recorded is None:  # a record without the slot's instant: only its date is known
        return bool(done.get("date") == slot.astimezone(zone).date().isoformat())
    if recorded > now:
        return False
    return recorded >= slot or recorded.astimezone(zone).date() == slot.astimezone(zone).date()


def is_refused(refused: dict[str, Any] | None, slot: datetime) -> bool:
    """True when ``slot`` was refused because a run was still under way at its time.

    Such a slot is not owed: the run under way was doing the night's work (a huge store, a
    slow LLM), and a second run straight after it would redo what it just did. When that run
    dies instead of finishing, ``last_slot`` stays ``running`` and the next start catches up
    (``is_served`` is False and the refusal does not excuse it: see ``missed_slot``).
    ``refused`` is ``nightly_refused.json`` (``scheduler.record.read_refused``).
    """
    when = instant(refused.get("slot")) if refused else None
    return when is not None and when == slot
