"""The search filter (tenant, live, current, subject, topics) and the checked score floor."""

from __future__ import annotations

from typing import Any, Sequence

from ..backends.base import NOTHING_KNOWN, Condition, IsEmpty, Match, MatchAny, StoreFacts, Where
from ..errors import ValidationError
from ..index import NoteIndex
from ..notefields import SUBJECT_KEYS, subject_key
from .visibility import LapsedCache

#: at most this many expired or deleted successors release their older facts at once (each)
LAPSED_MAX = 1000


def build_filter(index: NoteIndex, agent_id: str, subject: str | None,
                 topics: Sequence[str], *, lapsed: LapsedCache,
                 include_superseded: bool = False, facts: StoreFacts = NOTHING_KNOWN) -> Where:
    """Tenant + active (+ current: not superseded, unless history is asked for), then the
    optional subject and topics rules as nested clauses; ``lapsed`` answers which
    successors no longer hide what they replaced. ``facts`` leave out the conditions they
    make vacuous (``NoteIndex.tenant_filter``; no point has a successor: nothing to hide)."""
    # amem.supersede: a replaced fact is history, not an answer ...
    # ... unless what replaced it has expired (until the sweep deletes the successor and
    # clears the mark; the successors read are those whose ``supersedes`` names notes, as
    # the sweep reads) or was deleted while still listing what it replaced (a delete or
    # merge interrupted before its release: amem.supersede): the older fact is current.
    released = () if include_superseded or facts.none_superseded else lapsed.ids(agent_id)
    current = not include_superseded and not released
    must: list[Condition] = list(index.tenant_filter(agent_id, current=current, facts=facts))
    if released:
        must.append(Where(should=(IsEmpty("superseded_by"),
                                  MatchAny("superseded_by", tuple(released)))))
    if subject is not None:
        # Notes naming the subject (by its key: "alice" finds "Alice"), plus notes naming nobody.
        must.append(Where(should=(Match(SUBJECT_KEYS, subject_key(subject)),
                                  IsEmpty("subjects"))))
    if topics:
        # Knowledge notes must carry every topic; memory notes pass through.
        knowledge = Where(must=(Match("note_type", "knowledge"),
                                *(Match("topics", t) for t in topics)))
        must.append(Where(should=(Match("note_type", "memory"), knowledge)))
    return Where(must=tuple(must))


def check_min_similarity(value: Any) -> float | None:
    """None, or a number in [-1, 1] (the query-to-note scale)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
        raise ValidationError(f"min_similarity must be a number in [-1, 1], got {value!r}",
                              field="min_similarity")
    return float(value)


__all__ = ["LAPSED_MAX", "build_filter", "check_min_similarity"]
