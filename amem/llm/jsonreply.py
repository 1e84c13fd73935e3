"""Turning an LLM's reply into a JSON object: parse, repair the usual damage, check the shape.

Repairs, in order, each tried only when the previous text does not parse:

1. drop ``<think>...</think>`` blocks (reasoning models put them before the answer);
2. take the body of the first Markdown code fence (```` ```json ... ``` ````);
3. take the outermost ``{...}`` object, found by bracket matching that respects strings;
4. remove trailing commas before ``}`` or ``]``.

Every repair is one linear pass (no regex that can rescan the text from each position, no
bracket matching restarted at each ``{``): a hostile reply of 100,000 ``{`` or ``<think>`` costs
milliseconds, not minutes. Nesting too deep for the JSON decoder is "not JSON", not a crash.

Shape checking covers the JSON-Schema subset our prompts use: ``type`` (object, array, string,
integer, number, boolean, null, or a list of them), ``properties``, ``required``, ``items``,
``enum``, ``minItems``/``maxItems``, ``minLength``. Anything else in a schema is ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..errors import LLMResponseError

_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_RAW_PREVIEW = 200


def parse_json_object(raw: str) -> dict[str, Any]:
    """Parse ``raw`` into a JSON object, repairing fences, chatter and trailing commas.

    Raises:
        LLMResponseError: the reply is empty, or no JSON object can be recovered from it.
    """
    if not raw or not raw.strip():
        raise LLMResponseError("the LLM reply is empty", raw=raw)
    for candidate in _candidates(raw):
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than the decoder goes
            continue
        if isinstance(value, dict):
            return value
        raise LLMResponseError(f"the LLM reply is JSON but not an object (got {type(value).__name__})", raw=raw)
    raise LLMResponseError(f"the LLM reply is not JSON: {_preview(raw)}", raw=raw)


def _candidates(raw: str) -> list[str]:
    """Texts to try, least repaired first."""
    text = raw.strip()
    out = [text]
    text = drop_think_blocks(text).strip()
    out.append(text)
    fence = _FENCE.search(text)
    if fence:
        text = fence.group(1).strip()
        out.append(text)
    obj = outermost_object(text)
    if obj is not None:
        out.append(obj)
        text = obj
    out.append(_TRAILING_COMMA.sub(r"\1", text))
    return list(dict.fromkeys(out))


def drop_think_blocks(text: str) -> str:
    """``text`` without its ``<think>...</think>`` blocks (an unclosed one is kept).

    One pass over the tags: a lazy ``<think>.*?</think>`` regex rescans to the end from every
    unclosed ``<think>``, which is quadratic in a reply of many of them.
    """
    kept: list[str] = []
    pos = 0
    open_at: int | None = None
    for tag in _THINK_TAG.finditer(text):
        if open_at is None and not tag.group(1):
            open_at = tag.start()
        elif open_at is not None and tag.group(1):
            kept.append(text[pos:open_at])
            pos = tag.end()
            open_at = None
    kept.append(text[pos:])
    return "".join(kept)


def outermost_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (braces inside strings do not count), or None.

    One pass from the first ``{``, keeping the open braces on a stack: the first time the stack
    empties, that object is the answer. When the text ends with braces still open (an object
    cut off by the length limit), the answer is the earliest-starting object that did close
    inside it, or None. Restarting the scan at every ``{`` instead is quadratic.
    """
    start = text.find("{")
    if start == -1:
        return None
    opened: list[int] = []
    best: tuple[int, int] | None = None
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            opened.append(i)
        elif ch == "}" and opened:
            begin = opened.pop()
            if not opened:
                return text[begin:i + 1]
            if best is None or begin < best[0]:
                best = (begin, i + 1)
    return text[best[0]:best[1]] if best is not None else None


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def check_shape(value: Any, schema: Mapping[str, Any], *, raw: str | None = None, path: str = "$") -> None:
    """Check ``value`` against the JSON-Schema subset described in the module docstring.

    Raises:
        LLMResponseError: naming the first offending path (e.g. ``$.keywords[2]``) and the rule.
    """
    problem = _first_problem(value, schema, path)
    if problem is not None:
        raise LLMResponseError(f"the LLM reply has the wrong shape: {problem}", raw=raw)


def _first_problem(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    expected = schema.get("type")
    if expected is not None:
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, name) for name in names):
            return f"{path} should be {' or '.join(names)}, got {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} should be one of {list(schema['enum'])}, got {value!r}"
    if isinstance(value, str) and len(value.strip()) < schema.get("minLength", 0):
        return f"{path} should have at least {schema['minLength']} character(s)"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return f"{path} is missing the required key {key!r}"
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problem = _first_problem(value[key], sub, f"{path}.{key}")
                if problem:
                    return problem
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path} should have at least {schema['minItems']} item(s), got {len(value)}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path} should have at most {schema['maxItems']} item(s), got {len(value)}"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                problem = _first_problem(item, items, f"{path}[{i}]")
                if problem:
                    return problem
    return None


def _is_type(value: Any, name: str) -> bool:
    if name not in _TYPES:
        return True  # a type we do not check is not held against the reply
    if isinstance(value, bool) and name in ("integer", "number"):
        return False  # JSON true is not 1
    return isinstance(value, _TYPES[name])


def _json_type(value: Any) -> str:
    for name in ("object", "array", "string", "boolean", "null", "integer", "number"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def _preview(raw: str) -> str:
    flat = " ".join(raw.split())
    return repr(flat[:_RAW_PREVIEW] + ("..." if len(flat) > _RAW_PREVIEW else ""))
