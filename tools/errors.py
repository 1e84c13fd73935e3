"""Structured tool errors: what every failed tool call returns instead of a traceback.

A failure is always ``{"error": {"code": ..., "message": ..., "field": ...}}``. Codes:

    unknown_tool        no tool of that name
    invalid_argument    wrong type, missing or unknown field, out-of-range value, a malformed
                        identity header (``field`` names the header)
    forbidden           a session key of another agent (``field``: ``session_key`` or the header)
    payload_too_large   the arguments exceed ``MAX_PAYLOAD_BYTES`` once serialised as JSON
    not_found           an id that is not in the store (for this agent)
    unavailable         the tool's store is not configured (for example no lcm database)
    timeout             the server stopped waiting for the call (its deadline passed)
    internal            an unexpected failure; the traceback is logged, never returned
    <error.code>        any other amem or lcm error keeps its own ``code``

The HTTP server's guard (``tools.http_guard``) refuses a request before any route runs, with
the same shape and these codes: ``unauthenticated`` (401, no or an unknown key),
``misdirected`` (421, a Host not of this machine), ``forbidden`` (403, a foreign Origin, a key
naming another agent, a read-only key writing), ``unsupported_media_type`` (415, a POST that
is not JSON), ``method_not_allowed`` (405), ``payload_too_large`` (413) and
``too_many_sessions`` (429, a key at its cap of MCP sessions) and ``rate_limited`` (429, a key
over its request budget: the error also carries ``retry_after_s`` and ``limit``).

Messages never show server paths: every message that leaves as a tool result goes through
``redact`` (the stores' own directories by name, then anything shaped like an absolute path),
so a caller learns what went wrong without learning where the data lives. The CLI and the
log keep the full text.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

#: codes that describe the caller's input; every other code is the server's trouble (logged)
CALLER_CODES = frozenset({"unknown_tool", "invalid_argument", "payload_too_large", "not_found",
                          "forbidden", "regex_refused", "replay_flood"})
#: what stands in for a server path in a message
REDACTED = "<path>"
# An absolute POSIX path, one under ``~``, or a Windows path with its drive letter, that does
# not continue a word, a URL or a relative path, up to the next space, quote or bracket. A
# lone backslash is not a path: regex patterns and escaped input are full of them. One
# character class repeated: linear on any message.
_TAIL = r"[^\s'\"`<>|,;()\[\]{}]*"
_PATH_RE = re.compile(r"(?<![\w/\\.:~%\-)\]}>*+?|$^])(?:~?/|[A-Za-z]:[/\\])(?=[^\s/\\])" + _TAIL)


class ToolError(Exception):
    """An error a tool handler raises on purpose; becomes a structured error result."""

    def __init__(self, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


def error_result(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """The structured error dict of one failed call."""
    return {"error": {"code": code, "message": message, "field": field}}


def redact(message: str, roots: Iterable[str] = ()) -> str:
    """``message`` without server paths: each of ``roots`` (a store's directory, which may
    hold spaces) first, then any other absolute path."""
    for root in sorted({r for r in roots if len(r) > 1}, key=len, reverse=True):
        message = re.sub(re.escape(root) + _TAIL, REDACTED, message)
    return _PATH_RE.sub(REDACTED, message)


def is_error(result: Any) -> bool:
    """True when ``result`` is a structured error returned by ``ToolFacade.call``."""
    return isinstance(result, dict) and set(result) == {"error"} and isinstance(result["error"], dict)
