"""Structured tool errors: what every failed tool call returns instead of a traceback.

A failure is always ``{"error": {"code": ..., "message": ..., "field": ...}}``. Codes:

    unknown_tool        no tool of that name
    invalid_argument    wrong type, missing or unknown field, out-of-range value
    payload_too_large   the arguments exceed ``MAX_PAYLOAD_BYTES`` once serialised as JSON
    not_found           an id that is not in the store (for this agent)
    unavailable         the tool's store is not configured (for example no lcm database)
    internal            an unexpected failure; the traceback is logged, never returned
    <error.code>        any other amem or lcm error keeps its own ``code``
"""

from __future__ import annotations

from typing import Any


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


def is_error(result: Any) -> bool:
    """True when ``result`` is a structured error returned by ``ToolFacade.call``."""
    return isinstance(result, dict) and set(result) == {"error"} and isinstance(result["error"], dict)
