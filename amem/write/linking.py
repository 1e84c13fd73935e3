"""Which of a new note's candidates it links to: the LLM's yes/no, or an offline rule.

With an LLM configured the write path offers the ``link_candidates`` (6) nearest notes, whatever
their cosine: a cosine floor before verification dropped most related notes with e5 (8 notes
about one project got 2 links from an LLM answering yes to all, 0 offline), and it answers yes
or no per candidate. Offline the candidates are the notes sharing the most of the note's terms,
other days first (``amem.write.candidates``), and the first ``link_keep`` (4) that pass the rule
are linked. A candidate passes when

* the two notes are close on the note scale (``strong``, calibrated similarity 0.75), or
* they are not by or about different people (speakers opening a line, the notes' subjects,
  capitalised names inside a sentence; a capitalised word anywhere may be the shared name)
  and share an informative word besides the names (not a stop word or common English word),
* or they share a name and were written within ``days`` of each other (one conversation:
  the turns of a session about a person belong together),

where two notes told by different speakers (the names opening their lines; a chat's roles
such as ``User:`` are no speakers) share only a name that is neither speaker's: people talking
name each other in passing ("Hey Gina!"), and that name does not make one person's turn part
of the other's story. A third name both mention (a place, a friend, a project) still counts,
so "Meeting: Alice ..." and "Standup: Alice ..." link as before. No link is ever below
``link_floor`` on the note scale (0 by default: no closer than unrelated notes).

Why this rule: on the LoCoMo dev conversations it accepts 0.625 of the turn pairs one
question needs and 0.078 of random turn pairs of the same conversation, eight times as
often (``tests/amem/store/test_linking.py`` measures it on the data's evidence structure;
``benchmarks.retrieval --links`` measures what it does to search). Before speakers were read
apart from the names they mention it accepted 0.695 and 0.143 (4.9 times): the pairs of
evidence are nearly all one person's turns (conv-26 0.97, conv-41 0.93; conv-30, whose
questions ask what both did, 0.59), the links of that rule were 0.58-0.65 one speaker's, and
step 4b2 of a search (``amem.search.linked``) votes with the links.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Mapping, Sequence

from ..enrich.base import OFFLINE_FALLBACK, Enricher
from ..enrich.keywords import TextAnalysis, analyse, word_key

log = logging.getLogger(__name__)

#: an informative word weighs at least this in ``amem.enrich`` (common English words weigh less)
MIN_WEIGHT = 0.5

#: a chat's roles, not people: an assistant's turn is about the user's story, so a role opening
#: a line says nothing of whose story a note is (its names still do, as for any note)
ROLES = frozenset({"user", "assistant", "system", "human", "ai", "bot", "model", "agent"})


@dataclass(frozen=True)
class LinkView:
    """What the rule reads of one note."""

    id: str
    content: str
    subjects: tuple[str, ...] = ()
    timestamp: str = ""
    #: note similarity to the new note (candidates only)
    similarity: float = 0.0


@dataclass(frozen=True)
class _Read:
    #: who told it: the parts of the speakers' names opening its lines, chat roles left out
    #: (keys; none for a note in no one's voice)
    speakers: frozenset[str]
    #: who or what the note is surely by or about: speakers, subjects, names inside a sentence
    people: frozenset[str]
    #: ``people`` plus capitalised words at a sentence start ("Falcon's budget"): maybe names
    names: frozenset[str]
    #: the other informative words
    terms: frozenset[str]


@lru_cache(maxsize=4096)
def _read(content: str, subjects: tuple[str, ...]) -> _Read:
    """People, names and informative words of a note (words weighed as ``amem.enrich`` does)."""
    a: TextAnalysis = analyse(content)
    speakers = {word_key(part) for name in a.speakers for part in name.split()}
    people = set(speakers)
    people.update(word_key(part) for s in subjects for part in s.split())
    capitalised = [t for t in a.tokens if t.surface[:1].isupper() and t.weight >= MIN_WEIGHT]
    names = people | {t.key for t in capitalised}
    people.update(t.key for t in capitalised if not t.sentence_start)
    terms = {t.key for t in a.tokens if t.weight >= MIN_WEIGHT} | set(a.cjk_terms)
    return _Read(frozenset(speakers - ROLES), frozenset(people), frozenset(names),
                 frozenset(terms - names))


def _days_apart(a: str, b: str) -> float | None:
    try:
        first, second = datetime.fromisoformat(a), datetime.fromisoformat(b)
    except ValueError:
        return None
    if (first.tzinfo is None) != (second.tzinfo is None):
        first, second = first.replace(tzinfo=None), second.replace(tzinfo=None)
    return abs((first - second).total_seconds()) / 86400.0


def related(note: LinkView, other: LinkView, *, strong: float = 0.75, days: float = 1.0) -> bool:
    """The offline rule (see the module docstring): should ``note`` link to ``other``?"""
    if other.similarity >= strong:
        return True
    mine, theirs = _read(note.content, note.subjects), _read(other.content, other.subjects)
    shared = mine.names & theirs.names
    if mine.speakers and theirs.speakers and not mine.speakers & theirs.speakers:
        # told by different people: the name each says of the other is no shared subject
        shared -= mine.speakers | theirs.speakers
    same_name = bool(shared)
    if mine.people and theirs.people and not same_name:
        return False  # by or about different people: shared words are a coincidence
    if mine.terms & theirs.terms:
        return True
    if same_name and note.timestamp and other.timestamp:
        gap = _days_apart(note.timestamp, other.timestamp)
        return gap is not None and gap <= days
    return False


def view_of(payload: Mapping[str, Any], similarity: float = 0.0) -> LinkView:
    """The rule's view of a stored note (its payload) at ``similarity`` to the new note."""
    return LinkView(str(payload["id"]), str(payload.get("content", "")),
                    tuple(payload.get("subjects", ())), str(payload.get("timestamp", "")),
                    float(similarity))


def offline_links(note: LinkView, candidates: Sequence[LinkView], *, floor: float = 0.0,
                  strong: float = 0.75, days: float = 1.0, keep: int | None = None) -> list[str]:
    """The ids of ``candidates`` the offline rule links ``note`` to, in candidate order: the
    first ``keep`` that pass (all of them when None)."""
    linked: list[str] = []
    for c in candidates:
        if keep is not None and len(linked) >= keep:
            break
        if c.id != note.id and c.similarity >= floor and related(note, c, strong=strong,
                                                                 days=days):
            linked.append(c.id)
    return linked


def choose_links(note: LinkView, candidates: Sequence[LinkView], enricher: Enricher, *,
                 llm: bool, floor: float = 0.0,
                 keep: int | None = None) -> tuple[list[str], list[str]]:
    """(linked ids, warnings): the LLM's verdicts when one is configured, else the offline rule
    (the first ``keep`` candidates that pass it, all when None).

    When the LLM fails, the enricher falls back to its own offline answer and says so in its
    warnings; the offline rule above then decides instead (it reads names and time, which the
    enricher's fallback does not), and the warning is kept so the degraded path stays visible.
    """
    if not candidates:
        return [], []
    if not llm:
        return offline_links(note, candidates, floor=floor, keep=keep), []
    decision = enricher.verify_links(note.content, [(c.id, c.content, c.similarity)
                                                    for c in candidates])
    warnings = list(getattr(decision, "warnings", []))
    known = {c.id for c in candidates}
    if getattr(decision, "decided_by", None) == OFFLINE_FALLBACK:
        return offline_links(note, candidates, floor=floor, keep=keep), warnings
    return [nid for nid in decision if nid in known], warnings  # never an invented id
