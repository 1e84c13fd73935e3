"""Whole numbers a client writes (query parameters, headers): the digits 0-9 and nothing else.

``str.isdigit`` also takes '²' (which ``int`` refuses with Python's own words: a 500) and
Arabic-Indic digits (which ``int`` reads: '٣' opened conversation 3), so every number a route
reads from text is checked here first.
"""

from __future__ import annotations

from .errors import ToolError

__all__ = ["ascii_digits", "whole_number"]


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the digits 0-9 and nothing else."""
    return text.isascii() and text.isdigit()


def whole_number(raw: str | int | None, field: str, *, maximum: int, minimum: int = 0,
                 default: int | None = None) -> int:
    """``raw`` as a whole number in ``[minimum, maximum]``, written in the digits 0-9 only
    (``ascii_digits``); a ``ToolError`` naming ``field`` otherwise, never a 500."""
    if (raw is None or raw == "") and default is not None:
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        text = str(raw)
    elif isinstance(raw, str):
        text = raw
    else:
        raise ToolError("invalid_argument", f"{field} must be a whole number", field=field)
    if not ascii_digits(text) or len(text) > len(str(maximum)) + 1:
        raise ToolError("invalid_argument", f"{field} must be a whole number from {minimum} to "
                        f"{maximum} in the digits 0-9, got {text[:40]!r}", field=field)
    value = int(text)
    if not minimum <= value <= maximum:
        raise ToolError("invalid_argument", f"{field} must be from {minimum} to {maximum}, got "
                        f"{text[:40]}", field=field)
    return value
