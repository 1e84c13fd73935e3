"""Normalize: what a host sent, checked and turned into the rows ingest stores.

Every message becomes a :class:`NormalizedMessage`: its role (the host's spelling kept apart),
its text (content parts joined; an image, a sound or a file named, not stored), its time (the
host's or the ingest's), its identity hash (role and content) and the key a host gave it (an
id or a position, :mod:`lcm.resend` rules 1 and 2). A bad message is refused naming its index
and field before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from amem.kernel.safejson import first_surrogate
from lcm.errors import LcmValidationError
from lcm.timeutil import iso, parse_time

__all__ = ["NormalizedMessage", "media_placeholder", "normalize_messages"]

_ROLES = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant",
    "tool": "tool", "toolResult": "tool", "tool_result": "tool", "function": "tool",
}  # fmt: skip


class NormalizedMessage(NamedTuple):
    """One message as ingest stores it (immutable; a named tuple because every ingested
    message builds one, and a frozen dataclass's ``__init__`` cost ~1 us more a message)."""

    role: str
    content: str
    created_at: str
    explicit_time: bool
    identity_hash: str
    stable_event_key: str | None
    #: the host's name for the speaker (a multi-party chat) or the tool, kept as given
    name: str | None
    #: the role as the host spelled it, when it is not ``role`` ("developer": system)
    source_role: str | None = None


#: content part types that carry an image, a sound or a file rather than text
_MEDIA = {"image_url": "image", "image": "image", "input_image": "image", "input_audio": "audio",
          "audio": "audio", "file": "file", "input_file": "file", "document": "document"}


def media_placeholder(part: Mapping[str, Any]) -> str | None:
    """A short text standing for an image, audio or file content part (OpenAI's chat and
    responses parts, Anthropic's blocks), or None for another part.

    The part's JSON was stored as the message's text: a pasted screenshot's base64 made the
    user's question a "large file" of ~50k tokens of "AAAA...", out of search and context.
    An inline payload is named by its type and size, a link by its address.
    """
    kind = _MEDIA.get(str(part.get("type")))
    if kind is None:
        return None
    said: list[str] = []
    for holder in (part, *(v for v in part.values() if isinstance(v, Mapping))):
        for key in ("media_type", "mime_type", "format", "filename", "file_id"):
            if isinstance(holder.get(key), str) and holder[key] not in said:
                said.append(holder[key][:100])
        for key in ("url", "image_url", "file_url", "data", "file_data"):
            value = holder.get(key)
            if not isinstance(value, str) or not value:
                continue
            if value.startswith("data:"):
                head, _, body = value.partition(",")
                said.append(head.removeprefix("data:").removesuffix(";base64")[:100])
                said.append(f"{len(body) * 3 // 4 // 1024 or 1} KB inline, not stored")
            elif key in ("data", "file_data"):  # bare base64
                said.append(f"{len(value) * 3 // 4 // 1024 or 1} KB inline, not stored")
            else:
                said.append(value[:300])
    return f"[{kind}" + (": " + ", ".join(dict.fromkeys(said)) if said else "") + "]"


def _content_text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, Mapping) and (media := media_placeholder(part)) is not None:
                parts.append(media)
            elif isinstance(part, Mapping):
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True, default=str))
            else:
                raise LcmValidationError(f"{field}: unsupported content part {type(part).__name__}", field=field)
        return "\n".join(parts)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    raise LcmValidationError(f"{field}: content must be text, parts or an object", field=field)


def _stable_key(msg: Mapping[str, Any], role: str, index: int, session_id: str | None) -> str | None:
    """Stable identity for events the host names (an event or message id, a response id, a tool
    call id) or places (a position in its session); None for an anonymous message."""
    for key in ("event_id", "eventId", "message_id", "messageId"):
        if msg.get(key):
            return f"event:{msg[key]}"
    if role == "assistant":
        rid = msg.get("response_id") or msg.get("responseId")
        if rid:
            return f"assistant-response:{rid}"
    if role == "tool":
        tid = msg.get("tool_call_id") or msg.get("toolCallId")
        if tid:
            return f"tool-result:{tid}"
    position = msg.get("position")
    if position is None:
        return None
    if type(position) is not int or position < 0:  # bool is an int subclass: refused as well
        where = f"messages[{index}].position"
        raise LcmValidationError(f"{where}: expected an integer >= 0 (the message's index in its session), "
                                 f"got {position!r}", field=where)  # fmt: skip
    # The session id is part of the key: a host's new session numbers its messages from 0 again.
    return f"position:{session_id or ''}:{position}"


def normalize_messages(messages: Sequence[Mapping[str, Any]], now_iso: str, *,
                       session_id: str | None = None) -> list[NormalizedMessage]:
    """Validate and normalize a batch; raises before anything is written.

    ``session_id`` is the host's id of this run of the session: a message's ``position``
    counts within it.

    Every ingested message passes here, so the common case (a ``dict`` with text content) takes
    the short path: no ABC ``isinstance``, each key read once, the field name built only for an
    error.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise LcmValidationError("messages must be a list of message objects", field="messages")
    out = []
    sha256 = hashlib.sha256
    for i, msg in enumerate(messages):
        if type(msg) is not dict and not isinstance(msg, Mapping):
            where = f"messages[{i}]"
            raise LcmValidationError(f"{where}: expected an object with role and content", field=where)
        get = msg.get
        raw_role = get("role")
        role = _ROLES.get(raw_role if type(raw_role) is str else str(raw_role))
        if role is None:
            raise LcmValidationError(f"messages[{i}].role: {raw_role!r} is not one of system, user, assistant, tool",
                                     field=f"messages[{i}].role")  # fmt: skip
        raw = get("content")
        content = raw if type(raw) is str else _content_text(raw, f"messages[{i}].content")
        calls = get("tool_calls")
        if calls:
            # Tool calls are part of what happened; keep them searchable.
            text = json.dumps(calls, ensure_ascii=False, sort_keys=True, default=str)
            content = f"{content}\n[tool_calls] {text}" if content else f"[tool_calls] {text}"
        raw_time = get("created_at", _ABSENT)
        if raw_time is _ABSENT:
            raw_time = get("timestamp")
        explicit = raw_time is not None
        created = iso(parse_time(raw_time, f"messages[{i}].created_at")) if explicit else now_iso
        name = get("name")
        name = name if isinstance(name, str) else None
        key = _stable_key(msg, role, i, session_id)
        if _surrogate_in(content, name, key):
            _refuse_surrogate(i, content, name, key)
        ident = sha256(f"{role}\0{content}".encode()).hexdigest()
        out.append(NormalizedMessage(role, content, created, explicit, ident, key, name,
                                     None if raw_role == role else str(raw_role)))
    return out


def _surrogate_in(*texts: str | None) -> bool:
    """Whether a text holds a lone surrogate: valid JSON, but no encoder (SQLite's included)
    takes it (``amem.kernel.safejson``)."""
    return any(text and first_surrogate(text) is not None for text in texts)


def _refuse_surrogate(i: int, content: str, name: str | None, stable: str | None) -> None:
    for field, value in (("content", content), ("name", name), ("event_id", stable)):
        at = None if not value else first_surrogate(value)
        if value and at is not None:
            where = f"messages[{i}].{field}"
            raise LcmValidationError(f"{where} holds a lone surrogate (U+{ord(value[at]):04X} at character "
                                     f"{at}), which is not valid Unicode text", field=where)  # fmt: skip


#: a key's absence, told apart from a key present with ``None``
_ABSENT = object()
