"""Tool-list exports for each host, and the lazy-loading size reduction."""

from __future__ import annotations

import pytest

from tools import FORMATS, ToolFacade, estimate_tokens, export
from tools.facade import catalogue

FULL = ToolFacade(None, None, agent_id="default", lcm_listed=True)
LAZY = ToolFacade(None, None, agent_id="default", lcm_listed=True, lazy=True)


def test_openai_chat_completions_shape() -> None:
    tools = export(FULL.list_tools(), "openai")
    assert len(tools) == len(catalogue())
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert tool["function"]["parameters"]["type"] == "object"


def test_responses_shape() -> None:
    for tool in export(FULL.list_tools(), "responses"):
        assert set(tool) == {"type", "name", "description", "parameters", "strict"}
        assert tool["strict"] is False


def test_anthropic_and_mcp_shapes() -> None:
    for tool in export(FULL.list_tools(), "anthropic"):
        assert set(tool) == {"name", "description", "input_schema"}
    for tool in export(FULL.list_tools(), "mcp"):
        assert set(tool) == {"name", "description", "inputSchema"}


def test_mcp_export_is_what_the_sdk_accepts() -> None:
    import mcp.types as types

    for tool in export(FULL.list_tools(), "mcp"):
        parsed = types.Tool.model_validate(tool)
        assert parsed.input_schema == tool["inputSchema"]


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        export(FULL.list_tools(), "soap")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_lazy_list_is_much_smaller(fmt: str) -> None:
    full = estimate_tokens(export(FULL.list_tools(), fmt))
    lazy = estimate_tokens(export(LAZY.list_tools(), fmt))
    # The figures go in the report; the test holds the direction and a real saving.
    assert lazy < 0.65 * full, (fmt, full, lazy)


def test_estimate_tokens_counts_characters() -> None:
    assert estimate_tokens("a" * 398) == 100  # 400 characters with the JSON quotes
