"""Whether two alike notes may become one: the fields a fold or merge cannot keep twice.

A fold keeps its target's expiry, event time and metadata; a merge its survivor's. So two
notes become one only when that loses nothing the caller gave:

* **expiry**: both expire at the same moment, or neither does (a fold into an expiring note
  deleted the fact told again without a ttl; one told with a ttl outlived it in the target);
* **event day**: the same day, or neither was told as an event of its own day (an event
  time on another day than the note was written): "the art show next month" told in two
  sessions is two shows. A repeat written on another day with no event time of its own is
  the same fact told again, which the nightly merge exists for;
* **metadata**: the note absorbed carries no label the kept one lacks or holds otherwise
  (a merge keeps the larger of two label sets when one holds the other);
* **a person's say**: two notes a person separated (``amem separate``, ``amem.separate``)
  stay apart for good (:func:`kept_apart`), as do two texts taken out of one note, and the
  note with a text told again that a separation took out of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


def same_expiry(mine: str, theirs: object) -> bool:
    """Whether two notes expire together (or neither does)."""
    return (mine or "") == (theirs if isinstance(theirs, str) else "")


def _day(value: object) -> str:
    return value[:10] if isinstance(value, str) else ""  # stored UTC ISO: "2025-05-08T..."


def told_on_other_days(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two notes (payloads) tell events of different days, either by an event time
    of its own (not its write day)."""
    days = (_day(a.get("event_time")), _day(b.get("event_time")))
    if not all(days) or days[0] == days[1]:
        return False
    return any(_day(n.get("event_time")) != _day(n.get("timestamp")) for n in (a, b))


def labels_kept(given: object, kept: object) -> bool:
    """Whether every label of ``given`` is in ``kept`` with the same value."""
    g = given if isinstance(given, Mapping) else {}
    k = kept if isinstance(kept, Mapping) else {}
    return all(key in k and k[key] == value for key, value in g.items())


def labels_nested(a: object, b: object) -> bool:
    """Whether one note's labels hold the other's (a merge keeps the larger set)."""
    return labels_kept(a, b) or labels_kept(b, a)


@dataclass(frozen=True)
class Apart:
    """What :func:`kept_apart` reads of a note: its id, its text's hash, the notes a person
    separated from it and the hashes of the texts taken out of it."""

    id: str
    hash: str
    ids: frozenset[str] = frozenset()
    hashes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> "Apart":
        """From a stored note's payload (its ``kept_apart`` and its ``separated`` entries)."""
        return cls(str(payload.get("id", "")), str(payload.get("hash", "")),
                   frozenset(str(i) for i in payload.get("kept_apart") or ()),
                   taken_out(payload.get("evolution_history") or ()))


def taken_out(history: Sequence[Any]) -> frozenset[str]:
    """The hashes of the texts separations took out of a note (its ``separated`` entries)."""
    return frozenset(str(e["hash"]) for e in history
                     if isinstance(e, Mapping) and e.get("action") == "separated" and e.get("hash"))


def kept_apart(a: Apart, b: Apart) -> bool:
    """Whether a person separated the two notes: either names the other, or both were taken
    out of one note (a person who takes two texts out of a note has told three facts apart),
    or either's text is one a separation took out of the other (told again after its own note
    was deleted, it is still the text the person took out)."""
    return (b.id in a.ids or a.id in b.ids or bool(a.ids & b.ids)
            or b.hash in a.hashes or a.hash in b.hashes)


__all__ = ["Apart", "kept_apart", "taken_out", "labels_kept", "labels_nested", "same_expiry",
           "told_on_other_days"]
