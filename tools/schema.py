"""A small JSON Schema validator for the subset our tool schemas use.

Why our own: the facade must validate without the optional ``mcp`` extra (which brings
``jsonschema``), and its errors must name the offending field for the structured error.
Supported keywords: ``type`` (a name or a list of names), ``properties``, ``required``,
``additionalProperties: false``, ``enum``, ``minLength``/``maxLength``, ``minimum``/``maximum``,
``items``, ``minItems``/``maxItems``. Annotation keywords (``description``, ``default``) are
ignored. ``check_supported`` rejects a schema that uses anything else, so a tool author cannot
write a rule this validator would silently skip. A test checks that it agrees with
``jsonschema`` on the real tool schemas under random input.
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import ToolError

_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "minLength", "maxLength",
    "minimum", "maximum", "items", "minItems", "maxItems", "description", "default",
})
_TYPE_NAMES = frozenset({"object", "string", "integer", "number", "boolean", "array", "null"})


def check_supported(schema: Mapping[str, Any], where: str = "schema") -> None:
    """Raise ``ValueError`` if ``schema`` uses a keyword or type this validator does not know."""
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise ValueError(f"{where} uses unsupported keywords {sorted(unknown)}")
    types = schema.get("type")
    names = [types] if isinstance(types, str) else list(types or [])
    if not names or set(names) - _TYPE_NAMES:
        raise ValueError(f"{where} needs a known type, got {types!r}")
    if schema.get("additionalProperties", False) is not False:
        raise ValueError(f"{where}: only additionalProperties: false is supported")
    for name, sub in schema.get("properties", {}).items():
        check_supported(sub, f"{where}.{name}")
    for name in schema.get("required", []):
        if name not in schema.get("properties", {}):
            raise ValueError(f"{where} requires {name!r} but does not define it")
    if "items" in schema:
        check_supported(schema["items"], f"{where}[]")


def _type_ok(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):  # bool is an int in Python, never in JSON
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, (int, float))  # number


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def validate(value: Any, schema: Mapping[str, Any], field: str = "") -> None:
    """Raise ``ToolError("invalid_argument", ..., field=...)`` at the first violation."""
    label = field or "arguments"
    types = schema["type"]
    names = [types] if isinstance(types, str) else list(types)
    if not any(_type_ok(value, n) for n in names):
        raise ToolError("invalid_argument",
                        f"{label} must be {' or '.join(names)}, got {_describe(value)}",
                        field=field or None)
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError("invalid_argument",
                        f"{label} must be one of {', '.join(map(repr, schema['enum']))}",
                        field=field or None)
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise ToolError("invalid_argument",
                            f"{label} must have at least {schema['minLength']} characters",
                            field=field or None)
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ToolError("invalid_argument",
                            f"{label} is {len(value)} characters; the limit is {schema['maxLength']}",
                            field=field or None)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolError("invalid_argument", f"{label} must be >= {schema['minimum']}, got {value}",
                            field=field or None)
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolError("invalid_argument", f"{label} must be <= {schema['maximum']}, got {value}",
                            field=field or None)
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise ToolError("invalid_argument", f"{label} needs at least {schema['minItems']} items",
                            field=field or None)
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ToolError("invalid_argument",
                            f"{label} has {len(value)} items; the limit is {schema['maxItems']}",
                            field=field or None)
        if "items" in schema:
            for i, item in enumerate(value):
                validate(item, schema["items"], f"{field}[{i}]" if field else f"[{i}]")
    elif isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                raise ToolError("invalid_argument", f"missing required field {name!r}", field=name)
        if schema.get("additionalProperties", True) is False:
            extra = sorted(str(k) for k in value if k not in props)
            if extra:
                camel = _camel(extra[0])
                if camel != extra[0] and camel in props:  # every tool's arguments are camelCase
                    raise ToolError("invalid_argument", f"unknown field {extra[0]!r}: arguments are "
                                    f"camelCase, use {camel!r}", field=extra[0])
                raise ToolError("invalid_argument",
                                f"unknown field {extra[0]!r}; expected one of: {', '.join(props) or 'none'}",
                                field=extra[0])
        for name, sub in props.items():
            if name in value:
                validate(value[name], sub, f"{field}.{name}" if field else name)


def _camel(name: str) -> str:
    """``max_results`` -> ``maxResults`` (the spelling a snake_case caller probably meant)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
