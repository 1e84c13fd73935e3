"""The tool list in each host's format, and its size in tokens.

Formats (``FORMATS``): ``openai`` (chat-completions ``tools``), ``responses`` (OpenAI Responses
API ``tools``), ``anthropic`` (Messages API ``tools``), ``mcp`` (MCP ``tools/list`` entries,
wire field names) and ``neutral`` (our own ``{name, description, input_schema}``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Sequence

Definition = dict[str, Any]


def to_openai(defs: Sequence[Definition]) -> list[dict[str, Any]]:
    """Chat-completions: ``{"type": "function", "function": {name, description, parameters}}``."""
    return [{"type": "function", "function": {"name": d["name"], "description": d["description"],
                                              "parameters": d["input_schema"]}} for d in defs]


def to_responses(defs: Sequence[Definition]) -> list[dict[str, Any]]:
    """Responses API: flat ``{"type": "function", name, description, parameters, strict}``.

    ``strict`` is off: strict mode requires every property to be required, and our optional
    arguments (``limit``, ``subject`` ...) are optional on purpose.
    """
    return [{"type": "function", "name": d["name"], "description": d["description"],
             "parameters": d["input_schema"], "strict": False} for d in defs]


def to_anthropic(defs: Sequence[Definition]) -> list[dict[str, Any]]:
    """Anthropic Messages API: ``{name, description, input_schema}``."""
    return [{"name": d["name"], "description": d["description"],
             "input_schema": d["input_schema"]} for d in defs]


def to_mcp(defs: Sequence[Definition]) -> list[dict[str, Any]]:
    """MCP ``tools/list`` entries as they travel on the wire (``inputSchema``)."""
    return [{"name": d["name"], "description": d["description"],
             "inputSchema": d["input_schema"]} for d in defs]


FORMATS: dict[str, Callable[[Sequence[Definition]], list[dict[str, Any]]]] = {
    "openai": to_openai, "responses": to_responses, "anthropic": to_anthropic, "mcp": to_mcp,
    "neutral": lambda defs: [dict(d) for d in defs],
}


def export(defs: Sequence[Definition], fmt: str) -> list[dict[str, Any]]:
    """The definitions in ``fmt`` (one of ``FORMATS``); an unknown format raises ``ValueError``."""
    try:
        return FORMATS[fmt](defs)
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None


def estimate_tokens(payload: Any) -> int:
    """Tokens of ``payload`` serialised as compact JSON, at about 4 characters a token.

    No model tokenizer ships here (tiktoken is not installed), and the figure is for comparing
    tool-list sizes, where the 4-characters rule is within ~15% for English JSON.
    """
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / 4)
