"""A note's event time, metadata and expiry: their checks, their indexed forms, their filters.

Three fields a caller may give on ``add``:

- ``event_time``: when what the note tells happened (ISO 8601, stored in UTC, to the
  microsecond when given so). It defaults to the write time. Search filters it with ``since``
  (inclusive) and ``before`` (exclusive).
- ``metadata``: the caller's own labels, ``{key: str | int | float | bool}``. Search filters
  them by equality (``{"project": "apollo"}``; a list value means any of).
- ``expires_at`` (ISO 8601, in the future) or ``ttl`` (``MIN_TTL`` seconds or more from now, by
  the store's clock): from then on, and not a microsecond earlier, the note is invisible
  (search, get, list, links) and the nightly sweep deletes it.

The engine filters on numbers and keywords, so a note's payload also carries derived index
fields (``INDEX_FIELDS``): ``event_ts`` and ``expires_ts`` (epoch seconds, with the fraction,
float-indexed) and ``meta_kv`` (one ``"key=value"`` keyword per metadata entry,
keyword-indexed). One keyword index thus serves every metadata key, and a value is compared by
its text form: ``1``, ``1.5``, ``true`` and ``"apollo"`` are ``1``, ``1.5``, ``true`` and
``apollo``.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping

from .backends.base import Condition, MatchAny, Range, Where
from .errors import ValidationError

#: at most this many metadata keys on one note
MAX_META_KEYS = 32
#: keys: a letter or underscore, then letters, digits, ``_ . : -`` (no ``=``, which splits meta_kv)
META_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
#: longest string value (characters)
MAX_META_VALUE_CHARS = 256
#: values one search filter may list for a key
MAX_FILTER_VALUES = 64
#: the shortest ``ttl`` accepted, in seconds (as the tool schema says): a shorter one could end
#: before the add that writes the note has read it back
MIN_TTL = 1
#: the longest ``ttl`` accepted: 100 years, in seconds
MAX_TTL = 100 * 365 * 86400
#: payload fields derived from the three above, for the engine's filters (never shown)
INDEX_FIELDS = ("event_ts", "expires_ts", "meta_kv")
#: payload field derived from the content for ranking (``amem.text.question_share``): search
#: reads it with the candidates' other ranking fields instead of their texts (never shown)
ASKS = "asks"
#: payload field derived from the subjects (``subject_key`` of each): a search's ``subject``
#: filter and every "same subject" decision compare these, so "Alice" and "alice" are one
#: subject while the note keeps the spelling it was given (never shown)
SUBJECT_KEYS = "subject_keys"
#: payload field derived from the tags (``tag_key`` of each): a search's ``tags`` filter reads
#: it, so ``--tag morning`` finds a note tagged "Morning" or "#Morning" as Obsidian, Logseq and
#: Bear would, while the note keeps and shows its tags as written (never shown)
TAG_KEYS = "tag_keys"
#: every derived payload field: stored for the engine and the ranking, never shown
DERIVED_FIELDS = (*INDEX_FIELDS, ASKS, SUBJECT_KEYS, TAG_KEYS)


def subject_key(name: str) -> str:
    """What a subject is compared by: its Unicode compatibility form, case-folded, its spaces
    collapsed ("Alice", "alice", " ALICE " and the full-width "Ａｌｉｃｅ" are one subject)."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def subject_keys(names: Iterable[str]) -> list[str]:
    """The distinct keys of ``names``, in first-seen order."""
    return list(dict.fromkeys(subject_key(name) for name in names))


def tag_key(tag: str) -> str:
    """What a tag is compared by: as a subject (``subject_key``: case, width and spacing
    aside), without the ``#`` a note app writes before it ("Morning", "#morning" and
    "MORNING" are one tag)."""
    return subject_key(unicodedata.normalize("NFKC", tag).strip().lstrip("#"))


def tag_keys(tags: Iterable[str]) -> list[str]:
    """The distinct keys of ``tags``, in first-seen order."""
    return list(dict.fromkeys(tag_key(tag) for tag in tags))


def parse_time(value: Any, *, field: str) -> datetime:
    """An ISO 8601 date/time (naive ones are UTC) or a ``datetime``, in UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(
                f"{field} must be an ISO 8601 date/time such as 2026-03-01T12:00:00Z, got "
                f"{value!r}", field=field) from None
    else:
        raise ValidationError(f"{field} must be an ISO 8601 date/time string", field=field)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with seconds, and microseconds when the time has any (the form every note
    time is stored in). The fraction is kept, not dropped: the index fields are read from this
    text, and a time rounded down to its second would let an expiry take effect before its
    time and put an event time outside a ``since`` it is inside. Times stored before the
    fraction was kept are whole seconds, and read as they are."""
    utc = moment.astimezone(timezone.utc)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds")


def epoch(stamp: str) -> float | None:
    """Epoch seconds of a stored ISO time; None when empty or unreadable."""
    if not stamp:
        return None
    try:
        return parse_time(stamp, field="time").timestamp()
    except ValidationError:
        return None


def check_event_time(value: Any) -> str:
    return iso(parse_time(value, field="event_time"))


def check_metadata(value: Any) -> dict[str, Any]:
    """A dict of at most ``MAX_META_KEYS`` keys to scalar values, returned as a new dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"metadata must be an object of key/value pairs, got "
                              f"{type(value).__name__}", field="metadata")
    if len(value) > MAX_META_KEYS:
        raise ValidationError(f"metadata has {len(value)} keys; the limit is {MAX_META_KEYS}",
                              field="metadata")
    out: dict[str, Any] = {}
    for key, item in value.items():
        _check_key(key)
        out[key] = _check_value(key, item)
    return out


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not META_KEY_RE.match(key):
        raise ValidationError(
            f"metadata key {key!r} must be 1 to 64 characters: a letter or '_', then letters, "
            f"digits or '_.:-'", field=f"metadata.{key}")
    return key


def _check_value(key: str, value: Any) -> Any:
    name = f"metadata.{key}"
    if isinstance(value, str):
        if len(value) > MAX_META_VALUE_CHARS:
            raise ValidationError(f"{name} is {len(value)} characters; the limit is "
                                  f"{MAX_META_VALUE_CHARS}", field=name)
        if "\x00" in value:
            raise ValidationError(f"{name} must not contain NUL characters", field=name)
        return value
    if isinstance(value, bool) or (isinstance(value, int) and abs(value) < 2**53):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise ValidationError(f"{name} must be a string, a finite number or a boolean, got "
                          f"{type(value).__name__} {value!r}", field=name)


def check_expiry(expires_at: Any, ttl: Any, now: datetime) -> str:
    """The note's ``expires_at`` ("" for never) from an ISO time or a ttl in seconds."""
    if expires_at is not None and ttl is not None:
        raise ValidationError("give expires_at or ttl, not both", field="ttl")
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) \
                or not MIN_TTL <= ttl <= MAX_TTL:
            raise ValidationError(f"ttl must be a number of seconds between {MIN_TTL} and "
                                  f"{MAX_TTL}, got {ttl!r}", field="ttl")
        return iso(now + timedelta(seconds=float(ttl)))
    if expires_at is None:
        return ""
    moment = parse_time(expires_at, field="expires_at")
    if moment <= now:
        raise ValidationError(f"expires_at {iso(moment)} is not in the future (now {iso(now)})",
                              field="expires_at")
    return iso(moment)


def meta_text(value: Any) -> str:
    """A metadata value's text form, the one ``meta_kv`` stores and filters compare."""
    return value if isinstance(value, str) else json.dumps(value)


def index_fields(event_time: str, expires_at: str, metadata: Mapping[str, Any]
                 ) -> dict[str, Any]:
    """The derived payload fields of a note (``INDEX_FIELDS``); a missing time stays absent."""
    out: dict[str, Any] = {"meta_kv": [f"{k}={meta_text(v)}" for k, v in metadata.items()]}
    when = epoch(event_time)
    if when is not None:
        out["event_ts"] = when
    until = epoch(expires_at)
    if until is not None:
        out["expires_ts"] = until
    return out


def unsaved_fields(note: Any) -> list[str]:
    """The fields a new note was given that a dedup or fold into another note leaves out."""
    given = [("event_time", note.event_time != note.timestamp), ("metadata", bool(note.metadata)),
             ("expires_at", bool(note.expires_at))]
    return [name for name, present in given if present]


def not_expired(now: datetime) -> Where:
    """The notes still visible at ``now``: no expiry, or one after ``now``."""
    return Where(must_not=(Range("expires_ts", lte=now.timestamp()),))


def is_expired(expires_at: str, now: datetime) -> bool:
    until = epoch(expires_at)
    return until is not None and until <= now.timestamp()


def search_conditions(since: Any = None, before: Any = None,
                      metadata: Any = None, tags: Any = None) -> list[Condition]:
    """The engine conditions of a search's ``since``/``before``/``metadata``/``tags`` filters.

    ``tags`` keeps notes holding any of them, compared by ``tag_key`` (case and a leading
    ``#`` aside: "morning" finds "Morning"); served by the keyword index on the derived
    ``tag_keys`` (``amem.backends.base.KEYWORD_INDEXES``), like every condition of the read
    path (docs/readpath.md). None or [] filters nothing.
    """
    out: list[Condition] = []
    wanted = check_tag_filter(tags)
    if wanted:
        out.append(MatchAny(TAG_KEYS, wanted))
    lower = parse_time(since, field="since") if since is not None else None
    upper = parse_time(before, field="before") if before is not None else None
    if lower is not None and upper is not None and lower >= upper:
        raise ValidationError(f"since ({iso(lower)}) must be earlier than before "
                              f"({iso(upper)})", field="since")
    if lower is not None or upper is not None:
        out.append(Range("event_ts", gte=lower.timestamp() if lower else None,
                         lt=upper.timestamp() if upper else None))
    if metadata is None:
        return out
    if not isinstance(metadata, Mapping):
        raise ValidationError("metadata filter must be an object of key: value (or [values])",
                              field="metadata")
    for key, wanted in metadata.items():
        _check_key(key)
        values = list(wanted) if isinstance(wanted, (list, tuple)) else [wanted]
        if not values or len(values) > MAX_FILTER_VALUES:
            raise ValidationError(f"metadata filter {key!r} needs 1 to {MAX_FILTER_VALUES} values",
                                  field=f"metadata.{key}")
        out.append(MatchAny("meta_kv", tuple(
            f"{key}={meta_text(_check_value(key, v))}" for v in values)))
    return out


def check_tag_filter(tags: Any) -> tuple[str, ...]:
    """A search's ``tags`` filter, up to ``MAX_FILTER_VALUES`` non-empty strings (any of), as
    the distinct keys the filter compares (``tag_key``), each with its spellings of spaces
    as hyphens and hyphens as spaces (``_spellings``)."""
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise ValidationError("tags filter must be a list of tags (a note holding any of them "
                              "is kept)", field="tags")
    if len(tags) > MAX_FILTER_VALUES:
        raise ValidationError(f"tags filter lists {len(tags)} tags; at most "
                              f"{MAX_FILTER_VALUES}", field="tags")
    for tag in tags:
        if not isinstance(tag, str) or not tag.strip() or len(tag) > 200:
            raise ValidationError(f"each tag of the tags filter must be a non-empty string of "
                                  f"at most 200 characters, not {tag!r}", field="tags")
        if not tag_key(tag):  # "#" alone: no tag is stored under an empty key
            raise ValidationError(f"the tags filter's {tag!r} names no tag (only '#' and "
                                  f"spaces)", field="tags")
    return tuple(dict.fromkeys(key for tag in tags for key in _spellings(tag_key(tag))))


def _spellings(key: str) -> tuple[str, ...]:
    """``key`` and its forms with spaces and hyphens exchanged: an import stores a tag of
    words as the store's tag form does ("road-trip", ``amem.enrich.normalise_tag``), while
    ``add`` and ``update`` keep "Road Trip" as given; a filter of either finds both, from the
    keys stored (the keys themselves keep the two apart, so nothing stored is re-keyed)."""
    return (key, key.replace(" ", "-"), key.replace("-", " "))


def parse_meta_args(pairs: list[str] | None) -> dict[str, Any] | None:
    """CLI ``--meta key=value`` options as a metadata filter (a repeated key: any of)."""
    if not pairs:
        return None
    out: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValidationError(f"--meta takes key=value, got {pair!r}", field="meta")
        out.setdefault(key.strip(), []).append(value)
    return {k: v for k, v in out.items()}


__all__ = ["ASKS", "DERIVED_FIELDS", "INDEX_FIELDS", "SUBJECT_KEYS", "TAG_KEYS", "subject_key",
           "subject_keys", "tag_key", "tag_keys", "check_event_time", "check_expiry",
           "check_metadata", "index_fields", "is_expired", "not_expired", "search_conditions",
           "check_tag_filter"]
