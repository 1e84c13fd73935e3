"""The note: the openclaw-amem schema, its payload form and validation at the boundary."""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from .errors import ValidationError
from .kernel.safejson import first_surrogate
from .notefields import (ASKS, SUBJECT_KEYS, TAG_KEYS, index_fields, parse_time, subject_key,
                         subject_keys, tag_key, tag_keys)
from .text import question_share

CATEGORIES = ("Technical", "Business", "Personal", "Project", "Research", "System", "General")
NOTE_TYPES = ("memory", "knowledge")
MAX_ID_CHARS = 200
MAX_LIST_ITEMS = 64
MAX_ITEM_CHARS = 200

#: namespace of the engine's point ids
_POINT_NS = uuid.UUID("6f0b7d3e-5a57-4c1e-9f3a-2b7f2a0e4a11")
#: the point-id derivation a store was written with (recorded in its metadata, ``point_ids``)
POINT_ID_FORMAT = 2


def point_id(agent_id: str, note_id: str) -> str:
    """The engine's UUID for one agent's note (note ids are only unique per agent).

    The pair is JSON-encoded, which is injective: ``("a/b", "c")`` and ``("a", "b/c")`` get
    different points. (Format 1 hashed ``agent + "/" + id``, so those two shared one point and
    one agent could overwrite another's note; ``amem.pointids`` moves such stores at open.)
    """
    return str(uuid.uuid5(_POINT_NS, json.dumps([agent_id, note_id], ensure_ascii=True)))


def legacy_point_id(agent_id: str, note_id: str) -> str:
    """Format 1 point id (not injective): only to read and move stores written with it."""
    return str(uuid.uuid5(_POINT_NS, f"{agent_id}/{note_id}"))


def content_hash(text: str) -> str:
    """Hash for exact dedup: NFC-normalised, whitespace-collapsed, case kept."""
    norm = " ".join(unicodedata.normalize("NFC", text).split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def now_iso(moment: datetime | None = None) -> str:
    """UTC timestamp in ISO 8601 with seconds."""
    return (moment or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="seconds")


@dataclass
class Note:
    """One memory note. ``links`` are note ids of the same agent."""

    id: str
    content: str
    agent_id: str
    keywords: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    context: str = ""
    category: str = "General"
    links: list[str] = field(default_factory=list)
    timestamp: str = ""
    last_accessed: str = ""
    retrieval_count: int = 0
    evolution_history: list[dict[str, Any]] = field(default_factory=list)
    hash: str = ""
    is_active: bool = True
    note_type: str = "memory"
    topics: list[str] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    pending_merge: bool = False
    enriched_by: str = "none"
    merged_into: str | None = None
    #: hashes of texts folded into this note (exact dedup matches them too)
    folded_hashes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the stored vector embeds an earlier text of this note (see ``amem.refresh``)
    vector_stale: bool = False
    #: the newer note that replaced this one's fact (``amem.supersede``); None while current
    superseded_by: str | None = None
    #: the older notes whose fact this one replaced
    supersedes: list[str] = field(default_factory=list)
    #: a newer note that changed part of this one's facts and left the rest standing
    #: (``amem.supersede.rule.partly``): this note stays shown, listed after that one
    partly_superseded_by: str | None = None
    #: newer notes a person said do not replace this one (``amem unsupersede``): the judge
    #: never marks this note superseded by them again
    kept_against: list[str] = field(default_factory=list)
    #: notes a person separated from this one (``amem separate``): no fold and no merge joins
    #: the two again (``amem.write.together.kept_apart``)
    kept_apart: list[str] = field(default_factory=list)
    #: when what the note tells happened, UTC ISO (``amem.notefields``); the write time if not given
    event_time: str = ""
    #: the caller's key/value labels, filterable in search (``amem.notefields``)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: UTC ISO time from which the note is invisible and swept; "" never expires
    expires_at: str = ""

    def to_payload(self) -> dict[str, Any]:
        """The engine payload: every field (lists stay lists), plus the derived index fields
        the engine filters on (``amem.notefields.INDEX_FIELDS``) and the content's question
        share that search ranks by (``amem.notefields.ASKS``)."""
        payload = asdict(self)
        payload.update(index_fields(self.event_time or self.timestamp, self.expires_at,
                                    self.metadata))
        payload[ASKS] = question_share(self.content)
        payload[SUBJECT_KEYS] = subject_keys(self.subjects)
        payload[TAG_KEYS] = tag_keys(self.tags)
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> "Note":
        """Rebuild a note from an engine payload, tolerating fields added later."""
        known = {k: payload[k] for k in cls.__dataclass_fields__ if k in payload}
        if not known.get("event_time"):  # a note written before event times: its write time
            known["event_time"] = known.get("timestamp", "")
        return cls(**known)

    def embed_text(self) -> str:
        """What the dense vector embeds: the content, plus the subjects and the enrichment an
        LLM or the caller gave (words the content lacks, see ``compose_embed_text``).

        Offline enrichment (``offline``, ``offline-fallback``) is drawn from the content by
        rule, so it tells the encoder nothing new: such a note embeds its content and its
        subjects alone. A note whose subjects the content already names embeds its content
        alone, which is also the vector a fold compares (``amem.write.nearduplicate``), so
        such a note is embedded once, not once for its content and again for its text.
        """
        if not (self.enriched_by.startswith("llm:") or self.enriched_by == "given"):
            return compose_embed_text(self.content, (), (), "", self.subjects)
        return compose_embed_text(self.content, self.keywords, self.tags, self.context,
                                  self.subjects)

    def copy(self, **changes: Any) -> "Note":
        return replace(self, **changes)


def compose_embed_text(content: str, keywords: Sequence[str], tags: Sequence[str], context: str,
                       subjects: Sequence[str] = ()) -> str:
    """Content, then only the subjects and enrichment that add words the content lacks.

    Offline enrichment draws keywords, tags and context from the content itself; embedding
    them again would make the text the encoder reads twice as long (and embedding is the cost
    of every write) without telling it anything new. An LLM's abstractions ("career change",
    a context that paraphrases) are not substrings, so they are still embedded. Subjects say
    what the note is about where its text may not (a document's title on each of its
    chunks): a CMRC sentence given its article's title reads hit@1 0.82 against 0.705
    (benchmarks/RESULTS.md, "Subjects reach ranking").
    """
    low = content.lower()

    def novel(term: str) -> bool:  # tags are slugs: "support-group" is in "support group"
        return term.lower().replace("-", " ").replace("_", " ") not in low and term.lower() not in low

    new_subjects = unique([s for s in subjects if novel(s)])
    new_keywords = [k for k in keywords if novel(k) and k not in new_subjects]
    new_tags = [t for t in tags if novel(t) and t not in new_keywords and t not in new_subjects]
    parts = [content]
    if new_subjects:
        parts.append("Subjects: " + ", ".join(new_subjects))
    if new_keywords:
        parts.append("Keywords: " + ", ".join(new_keywords))
    if new_tags:
        parts.append("Tags: " + ", ".join(new_tags))
    if context and not _quoted(context, low):
        parts.append("Context: " + context)
    return "\n".join(parts)


def _quoted(context: str, low_content: str) -> bool:
    """Is ``context`` a sentence of the content (a leading "Speaker: " allowed)?"""
    text = context.strip().lower().rstrip(".…")
    head, sep, rest = text.partition(": ")
    return text in low_content or bool(sep and len(head) <= 40 and rest and rest in low_content)


def new_note_id() -> str:
    return str(uuid.uuid4())


# ---------------------------------------------------------------- validation at the boundary


def check_text(value: Any, *, field: str, max_chars: int) -> str:
    """A non-empty string of at most ``max_chars`` characters, returned unchanged."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}", field=field)
    if not value.strip():
        raise ValidationError(f"{field} must not be empty or whitespace", field=field)
    if len(value) > max_chars:
        raise ValidationError(
            f"{field} is {len(value)} characters; the limit is {max_chars}", field=field)
    if "\x00" in value:
        raise ValidationError(f"{field} must not contain NUL characters", field=field)
    at = first_surrogate(value)
    if at is not None:  # a lone one (a pair is one character in a str): no encoder takes it
        raise ValidationError(f"{field} holds a lone surrogate (U+{ord(value[at]):04X} at "
                              f"character {at}), which is not valid Unicode text", field=field)
    return value


def check_id(value: Any, *, field: str = "id") -> str:
    """A note id: a non-empty string without control characters, at most 200 characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string, got {type(value).__name__}", field=field)
    if not value or len(value) > MAX_ID_CHARS or value != value.strip():
        raise ValidationError(
            f"{field} must be 1 to {MAX_ID_CHARS} characters without surrounding spaces", field=field)
    if any(unicodedata.category(ch).startswith("C") for ch in value):
        raise ValidationError(f"{field} must not contain control characters", field=field)
    return value


def check_agent(value: Any, *, field: str = "agent_id") -> str:
    return check_id(value, field=field)


def check_str_list(value: Any, *, field: str) -> list[str]:
    """A list of short non-empty strings; duplicates dropped, order kept."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValidationError(f"{field} must be a list of strings", field=field)
    if len(value) > MAX_LIST_ITEMS:
        raise ValidationError(f"{field} has {len(value)} items; the limit is {MAX_LIST_ITEMS}",
                              field=field)
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ValidationError(f"{field} items must be non-empty strings", field=field)
        if len(item) > MAX_ITEM_CHARS:
            raise ValidationError(f"{field} items must be at most {MAX_ITEM_CHARS} characters",
                                  field=field)
        if item not in out:
            out.append(item)
    return out


def check_limit(value: Any, *, field: str = "limit", maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer", field=field)
    if not 1 <= value <= maximum:
        raise ValidationError(f"{field} must be between 1 and {maximum}, got {value}", field=field)
    return value


def check_timestamp(value: Any, *, field: str = "timestamp") -> str:
    """An ISO 8601 date or datetime (naive ones are taken as UTC), returned normalised."""
    return now_iso(parse_time(value, field=field))  # one parser for every note time


def check_category(value: Any) -> str:
    if value not in CATEGORIES:
        raise ValidationError(f"category must be one of {', '.join(CATEGORIES)}", field="category")
    return str(value)


def age_days(last_accessed: str, now: datetime) -> float:
    """Days since ``last_accessed`` (0 when unknown or in the future)."""
    then = _access_time(last_accessed) if last_accessed else None
    if then is None:
        return 0.0
    return max(0.0, (now - then).total_seconds() / 86400.0)


@functools.lru_cache(maxsize=4096)
def _access_time(text: str) -> datetime | None:
    """``text`` as an aware time (naive = UTC), None if it is not one. Kept: a search ranks
    ~100 candidates whose access stamps repeat (every match of a search gets the same one),
    and parsing each was a tenth of the Python a search runs."""
    try:
        then = datetime.fromisoformat(text)
    except ValueError:
        return None
    return then if then.tzinfo is not None else then.replace(tzinfo=timezone.utc)


def unique(items: Iterable[str]) -> list[str]:
    """Items in first-seen order without repeats."""
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def unique_subjects(items: Iterable[str]) -> list[str]:
    """Subjects without repeats by ``subject_key``, each in the spelling first seen (a fold of
    a note about "alice" into one about "Alice" keeps "Alice" once)."""
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(subject_key(item), item)
    return list(seen.values())


def check_tags(value: Any, *, field: str = "tags") -> list[str]:
    """A caller's tags (``check_str_list``), each naming a tag, kept once by ``tag_key``.

    A tag of only '#' and spaces has an empty key: stored, no filter could ask for it (the
    filter refuses it as naming nothing, ``check_tag_filter``) and it stood in for any other
    such spelling as a repeat, so it is refused here, where it is written, not kept mute."""
    tags = check_str_list(value, field=field)
    for tag in tags:
        if not tag_key(tag):
            raise ValidationError(f"{field}: {tag!r} names no tag (only '#' and spaces)",
                                  field=field)
    return unique_tags(tags)


def unique_tags(items: Iterable[str]) -> list[str]:
    """Tags without repeats by ``tag_key``, each in the spelling first seen: a note holding
    "morning" that meets "Morning" (a duplicate's tags, a fold, a merge) keeps "morning" once."""
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(tag_key(item), item)
    return list(seen.values())


def new_tags(given: Iterable[str], held: Iterable[str]) -> list[str]:
    """The tags of ``given`` that ``held`` lacks, compared by ``tag_key``, each once."""
    kept = set(tag_keys(held))
    return [t for t in unique_tags(given) if tag_key(t) not in kept]


def about_the_same(*subject_lists: Iterable[str]) -> bool:
    """Whether notes with these subjects may be one note (a fold, a merge): every two that
    name subjects share one. Notes about different people are never one note, however alike
    their words ("Alice stopped coffee" and "Carol stopped coffee"); a note that names nobody
    goes with any. Subjects are compared by ``subject_key``: "Alice" and "alice" are one."""
    named = [set(subject_keys(s)) for s in subject_lists]
    named = [s for s in named if s]
    return all(a & b for i, a in enumerate(named) for b in named[i + 1:])


__all__ = ["Note", "CATEGORIES", "NOTE_TYPES", "POINT_ID_FORMAT", "about_the_same", "point_id",
           "check_tags", "content_hash", "new_tags", "unique_subjects", "unique_tags"]
