"""The one rule for untrusted JSON and text: bounded nesting, no lone surrogates.

Every door that takes JSON or text from outside (the host routes' bodies, ``amem import``,
``amem lcm ingest``, MCP tool arguments, ``memory_add`` text) goes through here, so hostile
bytes become :class:`InvalidArgumentError` naming the field, never a ``RecursionError`` or a
``UnicodeEncodeError`` deep in a store (an ``internal`` error, a traceback in the log).

* **Depth.** The standard ``json`` module recurses once per level and raises
  ``RecursionError`` near Python's recursion limit (about 1,000); a 10 KB body can nest 5,000
  deep. :func:`loads` measures the nesting before parsing (brackets outside strings, one
  regular-expression pass, only when the text holds more brackets than the limit at all) and
  refuses anything deeper than ``MAX_DEPTH``.
* **Lone surrogates.** ``"\\udc80"`` is valid JSON but no Unicode text: SQLite, the tokenizers
  and UTF-8 encoders fail on it later. A valid pair (``"\\ud83d\\ude00"``) is decoded into one
  character by ``json``, so any surrogate left in a decoded string is a lone one.
  :func:`check_text` finds the first and names its field (``messages[3].content``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import InvalidArgumentError

__all__ = ["MAX_DEPTH", "loads", "check_depth", "check_text", "first_surrogate"]

#: what a message calls the whole value by default (the host routes' request body)
ROOT = "body"
#: deepest nesting accepted (objects and arrays); real payloads stay under 20
MAX_DEPTH = 64

# a string token (skipped whole, escapes included) or one bracket
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
# a \\uXXXX escape of a surrogate in raw JSON text: only then can a decoded string hold one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def check_depth(text: str, *, root: str = ROOT, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidArgumentError` when the JSON ``text`` nests deeper than ``limit``.

    The field named is the top-level key under which the limit was passed, else ``root``.
    """
    if text.count("[") + text.count("{") <= limit:  # cannot be deeper: no scan at all
        return
    depth = 0
    key: str | None = None
    last_string: str | None = None
    for token in _TOKENS.finditer(text):
        ch = token.group()
        if ch[0] == '"':
            if depth == 1:
                last_string = ch
            continue
        if ch in "[{":
            if depth == 1:  # entering a top-level member: its key was the last string
                key = last_string
            depth += 1
            if depth > limit:
                named = _unquote(key) if key is not None else root
                raise InvalidArgumentError(
                    f"{named} nests deeper than {limit} levels of objects and arrays", field=named)
        else:
            depth -= 1


def _unquote(token: str) -> str:
    try:
        value = str(json.loads(token))
    except ValueError:
        value = token[1:-1]
    return value[:60] if first_surrogate(value) is None else "?"


def first_surrogate(text: str) -> int | None:
    """The index of the first surrogate code point in ``text``, or None."""
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def check_text(value: Any, *, root: str = ROOT, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`InvalidArgumentError` for a parsed ``value`` nested deeper than ``limit``
    or holding a lone surrogate in a string (keys too), naming the path in it
    (``messages[2].content``; ``root`` when the value itself is at fault).

    Walks iteratively: the value may be whatever a parser (or a Python caller) built.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            at = first_surrogate(item)
            if at is not None:
                raise InvalidArgumentError(
                    f"{where or root} holds a lone surrogate (U+{ord(item[at]):04X} at character "
                    f"{at}), which is not valid Unicode text; send UTF-8 text or a valid "
                    "surrogate pair", field=where or root)
            continue
        if not isinstance(item, (dict, list, tuple)):
            continue
        if depth >= limit:
            named = _first_step(where) or root
            raise InvalidArgumentError(
                f"{named} nests deeper than {limit} levels of objects and arrays", field=named)
        if isinstance(item, dict):
            for key, member in reversed(list(item.items())):
                if isinstance(key, str) and first_surrogate(key) is not None:
                    raise InvalidArgumentError(
                        f"a key of {where or root} holds a lone surrogate, which is not valid "
                        "Unicode text", field=where or root)
                stack.append((member, f"{where}.{key}" if where else str(key), depth + 1))
        else:
            stack.extend((member, f"{where}[{i}]", depth + 1)
                         for i, member in reversed(list(enumerate(item))))


def _first_step(where: str) -> str:
    """The first step of a path (``metadata`` of ``metadata.a.b[0]``), not a 64-step path."""
    found = re.match(r"[^.\[]+|\[\d+\]", where)
    return found.group() if found else ""


def loads(text: str | bytes, *, root: str = ROOT, limit: int = MAX_DEPTH) -> Any:
    """``json.loads(text)`` for untrusted input: bad UTF-8, bad JSON, nesting deeper than
    ``limit`` and lone surrogates are each an :class:`InvalidArgumentError` naming the field
    (the path inside the value, or ``root``: what the caller calls the whole text)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"{root} is not UTF-8 (byte {exc.start})", field=root) from None
    check_depth(text, root=root, limit=limit)
    try:
        value = json.loads(text)
    except RecursionError:  # check_depth makes this unreachable; kept so it can never leak
        raise InvalidArgumentError(f"{root} nests too deep", field=root) from None
    except json.JSONDecodeError as exc:
        # A one-line text (an import's line) has only a column: its caller names the line.
        at = (f"column {exc.colno}" if "\n" not in text.rstrip("\n")
              else f"line {exc.lineno} column {exc.colno}")
        # json's own message may end with "at" ("Unterminated string starting at")
        said = exc.msg if exc.msg.endswith(" at") else f"{exc.msg} at"
        raise InvalidArgumentError(f"{root} is not valid JSON: {said} {at}", field=root) from None
    if _SURROGATE_ESCAPE.search(text) or first_surrogate(text) is not None:
        check_text(value, root=root, limit=limit)
    return value
