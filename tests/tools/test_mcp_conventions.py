"""MCP conventions: titles, hints and output schemas on every tool, validated on real results;
a status tool; descriptions overridable by config; lazy mode that a strict host accepts."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from amem.errors import ConfigError
from tools import ToolFacade
from tools.conventions import CONVENTIONS, ERROR_SCHEMA, description_overrides
from tools.facade import CORE_TOOLS, catalogue
from tools.mcp_server import build_server
from tools.settings import load_settings

from .conftest import Tenants

CATALOGUE = ToolFacade(None, None, agent_id="default", lcm_listed=True)
TOOLS = list(CATALOGUE.registry)

#: a text the hashing embedder folds its longer telling into (0.87 >= fold_threshold)
BIKE = "Alice keeps a green bicycle in the garage at home."
#: one valid call per tool, in an order where each finds what it needs ("$id" = a note id)
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("memory_add", {"text": "Carol's birthday is on 12 June", "subjects": ["carol"]}),
    ("memory_add", {"text": "Carol's birthday is on 12 June", "subjects": ["carol"]}),
    ("memory_search", {"query": "green tea", "limit": 2}),
    ("memory_list", {"limit": 2}),
    ("memory_get", {"id": "$id"}),
    ("memory_update", {"id": "$id", "subjects": ["tea drinkers"]}),
    ("memory_status", {}),
    ("memory_consolidate", {}),
    ("tool_info", {"query": "memory_get"}),
    ("tool_info", {"query": "delete a memory"}),
    ("lcm_grep", {"pattern": "flight"}),
    ("lcm_describe", {"id": "$msg"}),
    ("lcm_expand", {"query": "Lisbon"}),
    ("lcm_expand_query", {"prompt": "Which flight?", "query": "flight"}),
    ("memory_add", {"text": "Carol drinks coffee every morning", "subjects": ["carol"]}),
    ("memory_add", {"text": "Carol stopped coffee, she drinks tea now", "subjects": ["carol"]}),
    ("memory_history", {"id": "$old"}),
    ("memory_unsupersede", {"id": "$old", "confirm": True}),
    ("memory_add", {"text": BIKE}),
    ("memory_add", {"text": f"{BIKE} It has a wicker basket."}),  # folded into the first
    ("memory_history", {"id": "$fold"}),
    ("memory_separate", {"id": "$fold", "part": "$part", "confirm": True}),
    ("memory_delete", {"id": "$id"}),
    ("memory_delete_all", {"confirm": True}),
]


def _run_all(call: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every call of ``CALLS`` through ``call(name, args)``, ids filled in from earlier results."""
    seen: dict[str, str] = {}
    out = []
    for name, args in CALLS:
        args = {k: seen.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
        result = call(name, args)
        out.append((name, result))
        _remember(seen, name, result)
    return out


def _remember(seen: dict[str, str], name: str, result: dict[str, Any]) -> None:
    """The ids a later call of ``CALLS`` names ("$id", ...), from this call's result."""
    if name == "memory_list":
        seen["$id"] = result["notes"][0]["id"]
    if name == "lcm_grep":
        seen["$msg"] = result["hits"][0]["id"]
    if name == "memory_add" and result.get("supersedes"):  # the coffee note it hid
        seen["$old"] = result["supersedes"][0]
    if name == "memory_add" and result.get("status") == "folded":
        seen["$fold"] = result["id"]
    if name == "memory_history":  # the part the fold joined in, as history shows it
        seen.update({"$part": e["triggered_by"] for n in result["chain"]
                     for e in n["events"] if e["action"] == "fold"})


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_every_tool_has_title_hints_and_output_schema(tool: Any) -> None:
    assert tool.title and tool.title != tool.name
    schema = tool.output_schema
    assert schema is not None and schema["type"] == "object"  # MCP wants an object root
    jsonschema.Draft202012Validator.check_schema(schema)
    hints = tool.annotations()
    assert hints["readOnlyHint"] is (not tool.writes)
    assert not hints["destructiveHint"] or tool.writes  # only a writer can lose data
    assert set(hints) == {"title", "readOnlyHint", "destructiveHint", "idempotentHint",
                          "openWorldHint"}


def test_every_registered_tool_has_a_convention() -> None:
    assert {t.name for t in catalogue()} == set(CONVENTIONS)


def test_real_results_and_errors_validate_against_the_output_schema(
        tenants: Tenants, lcm_store: Any) -> None:
    facade = ToolFacade(tenants.store, lcm_store, agent_id="alice")
    results = _run_all(facade.call)
    assert {name for name, _ in results} == {t.name for t in facade.available()}
    for name, result in results:
        assert "error" not in result, (name, result)
        tool = facade.registry.get(name)
        assert tool is not None and tool.output_schema is not None
        schema = tool.output_schema
        jsonschema.validate(result, schema)
        # The success branch alone must hold too: the error branch may not carry it.
        jsonschema.validate(result, schema["anyOf"][0])
    # Every kind of failure validates as well, whatever a client does with isError results.
    for tool in facade.available():
        bad = facade.call(tool.name, {"no_such_argument": 1})
        assert bad["error"]["code"] == "invalid_argument", tool.name
        jsonschema.validate(bad, tool.output_schema)
        jsonschema.validate(bad, ERROR_SCHEMA)


def test_served_tools_carry_the_conventions(tenants: Tenants, lcm_store: Any) -> None:
    facade = ToolFacade(tenants.store, lcm_store, agent_id="alice")

    async def main() -> list[Any]:
        async with Client(build_server(facade)) as client:
            return list((await client.list_tools()).tools)

    served = anyio.run(main)
    assert [t.name for t in served] == [t.name for t in facade.available()]
    for tool in served:
        mine = facade.registry.get(tool.name)
        assert mine is not None and tool.output_schema == mine.output_schema
        assert tool.title == mine.title and tool.annotations is not None
        assert tool.annotations.read_only_hint is (not mine.writes)
        assert tool.annotations.destructive_hint is mine.destructive
        assert tool.annotations.idempotent_hint is mine.idempotent
    by_name = {t.name: t.annotations for t in served}
    assert by_name["memory_delete"].destructive_hint is True
    assert by_name["memory_search"].read_only_hint is True


class StrictHost:
    """A host that calls only tools the server listed, and lets the SDK client validate
    every structured result against the listed output schema."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.listed: dict[str, Any] = {}

    async def start(self) -> None:
        self.listed = {t.name: t for t in (await self.client.list_tools()).tools}

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name not in self.listed:
            raise PermissionError(f"{name} was not listed by the server")
        assert self.listed[name].output_schema is not None, f"{name}: nothing to validate against"
        res = await self.client.call_tool(name, args)  # raises on invalid structured content
        assert not res.is_error, (name, res.content)
        assert isinstance(res.structured_content, dict)
        return res.structured_content


def test_lazy_mode_works_with_a_host_that_allows_only_listed_tools(
        tenants: Tenants, lcm_store: Any, caplog: pytest.LogCaptureFixture) -> None:
    facade = ToolFacade(tenants.store, lcm_store, agent_id="alice", lazy=True)

    async def main() -> tuple[StrictHost, list[tuple[str, dict[str, Any]]], dict[str, Any]]:
        async with Client(build_server(facade)) as client:
            host = StrictHost(client)
            await host.start()
            out: list[tuple[str, dict[str, Any]]] = []
            seen: dict[str, str] = {}
            for name, args in CALLS:
                args = {k: seen.get(v, v) if isinstance(v, str) else v for k, v in args.items()}
                result = await host.call(name, args)
                out.append((name, result))
                _remember(seen, name, result)
            full = await host.call("tool_info", {"query": "memory_get"})
            return host, out, full

    with caplog.at_level(logging.WARNING):
        host, out, full = anyio.run(main)
    assert not [r for r in caplog.records if "not listed" in r.getMessage()]
    assert set(host.listed) == {t.name for t in facade.available()}
    for name, tool in host.listed.items():
        if name in CORE_TOOLS:
            assert tool.input_schema == dict(facade.registry.get(name).schema)  # type: ignore[union-attr]
        else:  # short: a permissive schema, the full one through tool_info
            assert tool.input_schema == {"type": "object"} and "tool_info" in tool.description
    assert full["tools"][0]["input_schema"]["required"] == ["id"]
    assert len(out) == len(CALLS)


def test_status_counts_only_the_callers_notes_and_names_degraded_paths(
        tenants: Tenants) -> None:
    status = ToolFacade(tenants.store, None, agent_id=tenants.alice).call("memory_status", {})
    assert status["agent"] == tenants.alice
    assert status["memory"]["notes"] == 4  # mallory's note is not counted
    assert status["memory"]["embedder"].startswith("hashing")
    assert status["lcm"] == {"available": False}
    assert any("hashing" in d for d in status["degraded"])
    assert any("lcm" in d for d in status["degraded"])
    assert "amem" in status["versions"]


def test_descriptions_are_overridable_by_config(tmp_path: Path, tenants: Tenants) -> None:
    cfg = tmp_path / "amem.toml"
    cfg.write_text('[tools.descriptions]\nmemory_search = "Look up what you know about the '
                   'user."\nmemory_add = "from the file"\n', encoding="utf-8")
    names = [t.name for t in catalogue()]
    env = {"AMEM_TOOL_DESCRIPTION_MEMORY_ADD": "Remember a durable fact."}
    got = description_overrides(env, load_settings(cfg, env={}).tools, names=names)
    assert got == {"memory_search": "Look up what you know about the user.",
                   "memory_add": "Remember a durable fact."}  # the environment wins
    facade = ToolFacade(tenants.store, None, agent_id=tenants.alice, descriptions=got)
    listed = {d["name"]: d["description"] for d in facade.for_agent("bob").list_tools()}
    assert listed["memory_add"] == "Remember a durable fact."
    assert listed["memory_list"] == facade.registry.get("memory_list").description  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as err:
        description_overrides({"AMEM_TOOL_DESCRIPTION_MEMORY_SERCH": "typo"}, names=names)
    assert err.value.key == "AMEM_TOOL_DESCRIPTION_MEMORY_SERCH"
    with pytest.raises(ConfigError):
        description_overrides({"AMEM_TOOL_DESCRIPTION_MEMORY_ADD": "  "}, names=names)
    with pytest.raises(ConfigError) as err:
        description_overrides({}, {"descriptions": "not a table"}, names=names)
    assert err.value.key == "tools.descriptions"
    with pytest.raises(ValueError, match="nope"):
        ToolFacade(None, None, agent_id="a", descriptions={"nope": "x"})


def test_amem_config_accepts_the_description_variables() -> None:
    from amem.config import load_config

    load_config(None, env={"AMEM_TOOL_DESCRIPTION_MEMORY_ADD": "Remember a durable fact."})


def test_serve_refuses_a_description_for_no_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tools.cli import main

    monkeypatch.setenv("AMEM_HOME", str(tmp_path))
    monkeypatch.setenv("AMEM_EMBEDDER", "hashing")
    monkeypatch.setenv("AMEM_TOOL_DESCRIPTION_MEMORY_SERCH", "a typo")
    # env given: run as a command inside this process (main() without it is the process
    # itself, which sets the umask and leaves its log handler for good)
    assert main(["serve", "--no-scheduler", "--no-lcm"], env=dict(os.environ)) == 2
    err = capsys.readouterr().err
    assert "AMEM_TOOL_DESCRIPTION_MEMORY_SERCH" in err and "no tool named 'memory_serch'" in err


def test_serve_takes_the_overrides_from_its_settings(tmp_path: Path) -> None:
    from tools.cli.serve import tool_descriptions
    from tools.runtime import Runtime

    cfg = tmp_path / "amem.toml"
    cfg.write_text('[tools.descriptions]\nmemory_list = "Page through what you remember."\n',
                   encoding="utf-8")
    runtime = Runtime.load({"AMEM_HOME": str(tmp_path)}, config_path=str(cfg))
    assert tool_descriptions(runtime) == {"memory_list": "Page through what you remember."}
