"""Turning an LLM's reply into a JSON object: parse, repair the usual damage, check the shape.

Repairs, in order, each tried only when the previous text does not parse:

1. drop ``<think>...</think>`` blocks (reasoning models put them before the answer);
2. take the body of the first Markdown code fence (```` ```json ... ``` ````);
3. take the outermost ``{...}`` object, found by bracket matching that respects strings;
4. remove trailing commas before ``}`` or ``]``.

Shape checking covers the JSON-Schema subset our prompts use: ``type`` (object, array, string,
integer, number, boolean, null, or a list of them), ``properties``, ``required``, ``items``,
``enum``, ``minItems``/``maxItems``, ``minLength``. Anything else in a schema is ignored.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..errors import LLMResponseError

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
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
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise LLMResponseError(f"the LLM reply is JSON but not an object (got {type(value).__name__})", raw=raw)
    raise LLMResponseError(f"the LLM reply is not JSON: {_preview(raw)}", raw=raw)


def _candidates(raw: str) -> list[str]:
    """Texts to try, least repaired first."""
    text = raw.strip()
    out = [text]
    text = _THINK.sub("", text).strip()
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


def outermost_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (braces inside strings do not count), or None.

    An object cut off by the length limit has no closing brace: then None.
    """
    start = text.find("{")
    while start != -1:
        depth = 0
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
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i + 1]
        start = text.find("{", start + 1)
    return None


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
