"""Reading a chat-completion reply: the envelope, ``choices[0].message.content``, its JSON.

Every level is checked for its type before it is used, so a reply of any shape ends as its
text or as an :class:`amem.errors.LLMResponseError` carrying the raw reply, never as a
``TypeError`` or ``KeyError`` from deep inside (``{"choices":[{"message":{"content":[{"text":5}]}}]}``
once lost a note that way).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..errors import LLMResponseError
from .jsonreply import check_shape, parse_json_object

log = logging.getLogger(__name__)

#: how much of a reply an error message quotes
SNIPPET = 300


def _envelope(raw: str) -> dict[str, Any]:
    """The decoded chat-completion envelope of a 2xx reply."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the decoder goes
        raise LLMResponseError(f"the LLM endpoint answered with a non-JSON body: {snippet(raw)!r}", raw=raw) from None
    if not isinstance(body, dict):
        raise LLMResponseError(f"the LLM endpoint answered with JSON that is not an object "
                               f"(got {type(body).__name__})", raw=raw)
    return body


def reply_text(raw: str) -> str:
    """``choices[0].message.content`` of a reply as text, every level checked for its type.

    Any other shape (a missing level, a list where an object belongs, a number for text, no
    text at all) is an :class:`LLMResponseError` carrying ``raw``; nothing else escapes.
    """
    body = _envelope(raw)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LLMResponseError(f"the LLM reply has no choices (got {_kind(choices)})", raw=raw)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise LLMResponseError(f"the LLM reply has no choices[0].message object (got {_kind(message)})", raw=raw)
    content = message.get("content")
    if isinstance(content, list):  # some servers send content parts: [{"type": "text", "text": "..."}]
        texts: list[str] = []
        for part in content:
            text = part.get("text", "") if isinstance(part, dict) else part  # a part without text adds none
            if not isinstance(text, str):
                raise LLMResponseError(f"the LLM reply has a content part whose text is {_kind(text)}, "
                                       "not a string", raw=raw)
            texts.append(text)
        content = "".join(texts)
    if content is not None and not isinstance(content, str):
        raise LLMResponseError(f"the LLM reply's message content is {_kind(content)}, not text", raw=raw)
    if not content or not content.strip():
        refusal = message.get("refusal")
        detail = f" (refusal: {snippet(str(refusal))})" if refusal else ""
        raise LLMResponseError(f"the LLM reply is empty{detail}", raw=raw)
    if choice.get("finish_reason") == "length":
        log.warning("LLM reply was cut off at the token limit; it may not parse")
    return content


def reply_json(raw: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The reply's content parsed (and repaired) into a JSON object of ``schema``'s shape."""
    text = reply_text(raw)
    value = parse_json_object(text)
    check_shape(value, schema, raw=text)
    return value


def _kind(value: object) -> str:
    """A JSON-ish name for ``value``'s type, for error messages."""
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


def snippet(text: str) -> str:
    """``text`` on one line, cut to :data:`SNIPPET` characters, for an error message."""
    flat = " ".join(text.split())
    return flat[:SNIPPET] + ("..." if len(flat) > SNIPPET else "")
