"""One naming style across all tools: arguments are camelCase; a snake_case spelling of one is
refused with an error that names the right spelling (no silent alias)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tools.errors import ToolError
from tools.facade import ToolFacade, catalogue
from tools.schema import validate

CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
# snake_case arguments still taken by the memory tools (tools/memory_tools.py, not this file's
# owner's): listed so none can be added unnoticed; rename them and drop them from here.
PENDING: dict[str, set[str]] = {}


def _names(schema: dict[str, Any], at: str = "") -> list[str]:
    out = []
    for name, sub in schema.get("properties", {}).items():
        out.append(f"{at}{name}")
        out += _names(sub, f"{at}{name}.")
        out += _names(sub.get("items", {}), f"{at}{name}[].")
    return out


@pytest.mark.parametrize("tool", catalogue(), ids=lambda t: t.name)
def test_every_argument_is_camel_case(tool: Any) -> None:
    bad = {n for n in _names(tool.schema) if not CAMEL.match(n.split(".")[-1].removesuffix("[]"))}
    assert bad <= PENDING.get(tool.name, set()), f"{tool.name}: {sorted(bad)} are not camelCase"


def test_a_snake_case_spelling_names_the_camel_case_one() -> None:
    facade = ToolFacade(None, None, agent_id="default", lcm_listed=True)
    got = facade.call("tool_info", {"query": "delete a memory", "max_results": 2})
    assert got["error"]["code"] == "invalid_argument" and got["error"]["field"] == "max_results"
    assert "use 'maxResults'" in got["error"]["message"]
    assert len(facade.call("tool_info", {"query": "memory", "maxResults": 2})["tools"]) <= 2
    for tool in catalogue():  # the same hint for every camelCase argument of every tool
        for name in tool.schema.get("properties", {}):
            snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
            if snake == name:
                continue
            with pytest.raises(ToolError) as caught:  # the facade's validation, before any store
                validate({**{r: "x" for r in tool.schema.get("required", [])}, snake: 1}, tool.schema)
            assert caught.value.field == snake and f"use {name!r}" in caught.value.message, tool.name
