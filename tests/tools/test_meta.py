"""Meta-tests that keep the agent-facing surface honest: tools and CLI commands."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import jsonschema
import pytest

from tools import ToolFacade
from tools.cli import build_parser, main
from tools.registry import NAME_RE, Tool

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ToolFacade(None, None, agent_id="default", lcm_listed=True)
TOOLS = list(CATALOGUE.registry)
EXPECTED = {"memory_add", "memory_search", "memory_list", "memory_get", "memory_update",
            "memory_delete", "memory_delete_all", "memory_history", "memory_unsupersede",
            "memory_separate",
            "memory_consolidate", "memory_status", "lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query",
            "tool_info"}


def test_the_catalogue_is_the_specified_one() -> None:
    assert {t.name for t in TOOLS} == EXPECTED


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_name_description_schema(tool: Tool) -> None:
    assert NAME_RE.match(tool.name)
    # OpenAI caps descriptions at 1024 characters; a useful one says when and what it returns.
    assert 80 <= len(tool.description) <= 1024
    assert "Returns" in tool.description or "returns" in tool.description
    assert len(tool.summary) <= 60
    jsonschema.Draft202012Validator.check_schema(tool.schema)
    assert tool.schema["additionalProperties"] is False
    assert "agent_id" not in tool.schema["properties"]  # identity never comes from arguments


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_schema_matches_handler(tool: Tool) -> None:
    params = tool.parameters()
    props = tool.schema["properties"]
    assert list(params) == list(props), "handler keywords and schema properties differ"
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
    assert required == tool.schema.get("required", [])
    for name, param in params.items():
        assert param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
        if param.default is not inspect.Parameter.empty and param.default is not None:
            assert props[name].get("default") == param.default, f"{name}: default differs"
        if "default" in props[name]:
            assert props[name]["default"] == param.default


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_tool_is_documented(tool: Tool) -> None:
    docs = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    assert f"`{tool.name}`" in docs, f"{tool.name} has no entry in docs/tools.md"


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(((*path, name), sub))
                found.extend(_commands(sub, (*path, name)))
    return found


COMMANDS = _commands(build_parser())


def test_every_specified_command_exists() -> None:
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"add", "search", "list", "get", "delete", "import", "export", "consolidate", "serve",
            "scheduler", "status", "doctor", "tools", "reembed", "lcm grep", "lcm describe",
            "lcm expand", "lcm status", "lcm doctor"} <= names


@pytest.mark.parametrize("path,sub", COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_every_command_has_help(path: tuple[str, ...], sub: argparse.ArgumentParser,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert sub.description and len(sub.description) > 10
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: amem " + " ".join(path))
    for action in sub._actions:
        if action.option_strings and action.help is None:
            pytest.fail(f"amem {' '.join(path)} {action.option_strings[0]} has no help")


def test_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Exit codes" in out and "serve" in out
