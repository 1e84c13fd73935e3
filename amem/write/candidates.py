"""Which stored notes a note is offered to link to: the notes sharing its terms, other days first.

The offline rule (``amem.write.linking``) used to see the ``link_candidates`` (6) nearest notes
by embedding. Nearest by embedding is what a search finds anyway, so following a link gave what
the next matches would: on LoCoMo dev (offline enrichment) the tool's list found +0.013
multi-hop evidence over as many plain matches. A multi-hop question needs turns about one
person and one theme told in other sessions, days apart, often in other words; what they share
is names and a few informative words. So, offline, the candidates are the ``link_pool`` (30)
notes that share the most of the note's BM25 terms (the search's sparse leg over its content,
keywords, tags and subjects), those told on another (UTC) day first; the rule keeps the first
``link_keep`` (4) that pass it. The same day's notes still come, after the others (the search's
neighbour step, ``amem.search.adjacent``, already brings a note's own session), so notes all told
on one day still link. Measured: multi-hop R@list at limit 10 +0.013 -> +0.045, for about 1.6 ms
more an add (docs/retrieval-next.md, "Links, rework").

With an LLM the verifier is offered the ``link_candidates`` nearest notes as before: one call
judges them all, and the term pool was measured with the offline rule only.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import bm25
from ..backends.base import Hit
from ..config import AmemConfig
from ..index import NoteIndex, note_terms_of
from ..notes import Note, point_id


def told_day(payload: Mapping[str, Any]) -> str:
    """The UTC day a stored note tells of (``YYYY-MM-DD``; its write day without an event time)."""
    return str(payload.get("event_time") or payload.get("timestamp") or "")[:10]


def other_days_first(hits: Sequence[Hit], day: str) -> list[Hit]:
    """``hits`` in their order, those told on another day than ``day`` first (a stable sort);
    without a ``day`` the order is kept."""
    if not day:
        return list(hits)
    return sorted(hits, key=lambda h: told_day(h.payload) == day)


#: what the offline rule and the day order read of a candidate (``linking.view_of``)
FIELDS = ("id", "content", "subjects", "timestamp", "event_time")


def term_neighbours(index: NoteIndex, note: Note, vector: np.ndarray, pool: int) -> list[Hit]:
    """Up to ``pool`` live notes of the note's agent sharing the most of its BM25 terms,
    other days first; each hit's ``score`` is its cosine to ``vector``, its payload only the
    :data:`FIELDS` (a caller wanting a whole note reads it: :func:`whole`).

    Two engine reads: the sparse ranking, then the candidates' vectors alone (whole payloads
    with vectors for all of them made an add of LoCoMo's turns twice as slow).
    """
    terms = note_terms_of(note)
    if pool <= 0 or not terms:
        return []
    engine = index.backend
    asked = bm25.query_vector(terms)
    ranked = index.read_tenant(note.agent_id, lambda where: engine.sparse_search(
        asked, where, pool + 1, fields=FIELDS))
    own = point_id(note.agent_id, note.id)
    ranked = [h for h in ranked if h.id != own][:pool]
    if not ranked:
        return []
    vectors = {h.id: h.dense for h in engine.retrieve([h.id for h in ranked], with_vectors=True,
                                                       with_payload=False)
               if h.dense is not None}
    hits = [Hit(h.id, float(np.dot(vector, vectors[h.id])), h.payload)
            for h in ranked if h.id in vectors]
    return other_days_first(hits, told_day({"event_time": note.event_time,
                                            "timestamp": note.timestamp}))


def whole(index: NoteIndex, agent_id: str, note_ids: Sequence[str],
          known: Mapping[str, Hit]) -> dict[str, Hit]:
    """``known`` (note id -> a hit with its whole payload) plus the notes of ``note_ids`` it
    lacks, read whole in one call (the linked notes a back-link or an evolution rewrites)."""
    out = dict(known)
    missing = [point_id(agent_id, n) for n in note_ids if n not in out]
    for hit in index.backend.retrieve(missing) if missing else []:
        out[str(hit.payload["id"])] = hit
    return out


def offered(index: NoteIndex, config: AmemConfig, note: Note, vector: np.ndarray,
            nearest: Sequence[Hit], *, llm: bool) -> tuple[list[Hit], int | None]:
    """The hits offered to the verifier, and how many of them the offline rule may link.

    ``nearest``: the engine's nearest notes by embedding, best first (an LLM judges the first
    ``link_candidates``; so does the offline rule with ``link_pool`` 0, the former behaviour).
    """
    if llm or config.link_pool <= 0:
        return list(nearest[:config.link_candidates]), None
    return term_neighbours(index, note, vector, config.link_pool), config.link_keep


__all__ = ["FIELDS", "offered", "other_days_first", "term_neighbours", "told_day", "whole"]
