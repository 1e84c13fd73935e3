"""One add's input checked into a note before anything is written (the first bad field raises)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping

from ..errors import ValidationError
from ..notefields import check_event_time, check_expiry, check_metadata
from ..notes import (Note, check_category, check_id, check_str_list, check_tags, check_text,
                    check_timestamp, content_hash, new_note_id, now_iso)

#: the optional fields of a bulk item besides ``text`` and ``subjects``
ITEM_FIELDS = frozenset({"id", "timestamp", "agent_id", "keywords", "tags", "category",
                         "context", "note_type", "topics", "enrich", "event_time", "metadata",
                         "expires_at", "ttl"})


@dataclass
class Draft:
    """A validated note waiting for its vector."""

    note: Note
    enrich: bool
    given_enrichment: bool
    #: the caller named the note type: enrichment never changes it (it turned a given
    #: "memory" into "knowledge", which changes its heat and the topics filter, unsaid)
    given_type: bool = False
    #: the caller named the note's id (an import's text keeps its id from run to run): a
    #: join records where such a text first gave its tags (``amem.write.takenback``)
    given_id: bool = False


def make_draft(text: Any, subjects: Any, *, max_chars: int, agent_of: Callable[[Any], str],
               now: datetime, id: Any = None, timestamp: Any = None, agent_id: Any = None,
               enrich: Any = True, keywords: Any = None, tags: Any = None, category: Any = None,
               context: Any = None, note_type: Any = None, topics: Any = None,
               event_time: Any = None, metadata: Any = None, expires_at: Any = None,
               ttl: Any = None) -> Draft:
    """The note of one add; ``agent_of`` resolves (and checks) the tenant."""
    text = check_text(text, field="text", max_chars=max_chars)
    agent = agent_of(agent_id)
    if not isinstance(enrich, bool):
        raise ValidationError("enrich must be true or false", field="enrich")
    given_type = note_type is not None
    note_type = "memory" if note_type is None else note_type
    if note_type not in ("memory", "knowledge"):
        raise ValidationError("note_type must be 'memory' or 'knowledge'", field="note_type")
    if context is not None and not isinstance(context, str):
        raise ValidationError("context must be a string", field="context")
    note = Note(
        id=check_id(id) if id is not None else new_note_id(),
        content=text, agent_id=agent,
        keywords=check_str_list(keywords, field="keywords"),
        tags=check_tags(tags),
        context=(context or "").strip()[:500],
        category=check_category(category) if category is not None else "General",
        timestamp=check_timestamp(timestamp) if timestamp is not None else now_iso(now),
        last_accessed=now_iso(now), hash=content_hash(text), note_type=note_type,
        topics=check_str_list(topics, field="topics"),
        subjects=check_str_list(subjects, field="subjects"),
        metadata=check_metadata(metadata), expires_at=check_expiry(expires_at, ttl, now))
    # the event time defaults to the write time (the given timestamp of an import included)
    note.event_time = check_event_time(event_time) if event_time is not None else note.timestamp
    # any given enrichment field (tags too: an Obsidian vault's) is the note's enrichment: it
    # is embedded with the content (``Note.embed_text``), where offline enrichment, drawn from
    # the content, is not: drawing keywords as well would leave the given tags out of the vector
    return Draft(note, enrich, bool(keywords or tags or context or category), given_type,
                 given_id=id is not None)


def split_item(item: dict[str, Any], *, enrich: bool, agent_id: str | None
               ) -> tuple[Any, Any, dict[str, Any]]:
    """A bulk item as ``(text, subjects, fields)`` for ``make_draft``; unknown keys raise."""
    if not isinstance(item, Mapping):  # dict("x") failed deep inside with a bare ValueError
        raise ValidationError(f"an item must be an object with 'text', not {type(item).__name__}",
                              field="item")
    item = dict(item)
    if "text" not in item:
        raise ValidationError("missing field 'text'", field="text")
    text = item.pop("text")
    subjects = item.pop("subjects", ())
    unknown = set(item) - ITEM_FIELDS
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(sorted(unknown))}",
                              field=sorted(unknown)[0])
    item.setdefault("enrich", enrich)
    if agent_id is not None:
        item.setdefault("agent_id", agent_id)
    return text, subjects, item


__all__ = ["Draft", "ITEM_FIELDS", "make_draft", "split_item"]
