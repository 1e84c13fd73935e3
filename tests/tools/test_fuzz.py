"""The standing adversarial suite for the tools: random JSON to every tool, through the facade
and through the MCP server's own client, gives results or structured errors only, within the
call budget, and leaves both stores intact; our validator agrees with ``jsonschema``.

Arguments are hostile on purpose: wrong types, unknown keys, nested junk, NUL bytes, any
unicode, strings near and far over every limit. After each tool's run the victim agent's
notes and conversations are unchanged, the fuzzer's note count moved only by its own
successful writes, a marker note is still found, and both stores pass their checks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from amem import MemoryStore
from tools import ToolFacade
from tools.errors import ToolError
from tools.mcp_server import build_server
from tools.runner import CallLimits
from tools.schema import validate

from .conftest import Tenants

CATALOGUE = ToolFacade(None, None, agent_id="default", lcm_listed=True)
TOOLS = {t.name: t for t in CATALOGUE.registry}
#: every code a hostile argument may earn; ``internal`` and ``timeout`` are failures
KNOWN_CODES = {"unknown_tool", "invalid_argument", "payload_too_large", "not_found",
               "unavailable", "regex_refused", "config_error",
               # lcm_grep's semantic mode on a conversation store without an embedder
               "embedder_unavailable"}
#: the longest any one call may take, however hostile (the server's deadline in these tests;
#: a 32,000-character note takes about 1 s on an idle machine, 10 s leaves room for a busy CI)
CALL_BUDGET = 10.0
MARKER = "the marker note about zebra crossings"
#: who fuzzes memory_delete_all: its one valid call, ``{"confirm": true}``, erases the caller's
#: own notes (hypothesis finds it in about one run of fifteen), so it runs as a third agent and
#: the fuzzer's notes, the marker among them, must survive it like the victim's
ERASER = "eraser"
#: a failing example holding a 300 kB string is reported, not hidden behind a repr warning
big_reprs_ok = pytest.mark.filterwarnings("ignore:Generating overly large repr")

_strings = (st.text(max_size=30)
            | st.text(st.characters(codec="utf-8"), min_size=1, max_size=300)
            | st.sampled_from(["", " ", "\x00", "a\x00b", "msg_1", "msg_99999999999999999999",
                               "sum_0123456789abcdef", "file_0123456789abcdef", "regex", "both",
                               "hybrid", "(a+)+$", "(.+){20}Q", "\\", "[", "x" * 300, "中" * 4000,
                               "𝔘\u200b\ufeff", "\x00" * 1000, "y" * 40_000, "z" * 300_000]))
_scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
            | st.integers() | st.floats(allow_nan=False, allow_infinity=False, width=32)
            | _strings)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


_HOSTILE = ["\x00", "a\x00b", "msg_1", "msg_99999999999999999999", "sum_0123456789abcdef",
            "file_0123456789abcdef", "sum_\x00", "(a+)+$", "(.+){20}Q", "(?=(a+)+b)", "\\", "[",
            "*", "\"", "NEAR(", "flight", "中文", "𝔘\u200b", "1970-01-01", "9999-12-31T99:99",
            "agent:victim:main", " x ", "..", "/etc/passwd"]


def valid_ish(schema: Any) -> st.SearchStrategy[Any]:
    """Values of the field's own type and within its bounds, often hostile inside them: the
    arguments that get past validation and reach the stores."""
    kind = schema["type"]
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength", 1000)
        return (st.text(min_size=low, max_size=min(high, 60))
                | st.sampled_from([h for h in _HOSTILE if low <= len(h) <= high])
                | st.builds(lambda c: c * high, st.sampled_from(["x", "\x00", "é ", "\u3042"])))
    if kind == "integer":
        low, high = schema.get("minimum", -10**6), schema.get("maximum", 10**20)
        return st.integers(low, high) | st.sampled_from([low, high])
    if kind == "array":
        return st.lists(valid_ish(schema["items"]), min_size=schema.get("minItems", 0),
                        max_size=min(schema.get("maxItems", 5), 5))
    return _json


def arguments_for(name: str) -> st.SearchStrategy[Any]:
    """Half well-formed objects with hostile values inside the bounds, half junk: objects
    keyed by the tool's real argument names (so validation is exercised beyond 'unknown
    field'), sometimes anything at all."""
    schema = TOOLS[name].schema
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    formed = st.fixed_dictionaries({k: valid_ish(v) for k, v in props.items() if k in required},
                                   optional={k: valid_ish(v) for k, v in props.items()
                                             if k not in required})
    keys = st.sampled_from(list(props) or ["x"]) | st.text(max_size=10)
    return formed | st.dictionaries(keys, _json, max_size=5) | _json


@pytest.fixture(scope="module")
def world(memory: MemoryStore, lcm_store: Any) -> tuple[ToolFacade, Tenants]:
    tenants = Tenants(memory, "fuzzer", "victim")
    memory.add("the victim's private note", [], enrich=False, agent_id=tenants.mallory)
    memory.add(MARKER, [], enrich=False, agent_id=tenants.alice)
    return ToolFacade(memory, lcm_store, agent_id=tenants.alice), tenants


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as p:
        yield p


def _snapshot(memory: MemoryStore, lcm_store: Any, agent: str) -> tuple[Any, ...]:
    notes = sorted((n.id, n.content) for n, _ in memory.iter_notes(agent_id=agent))
    status = lcm_store.status()
    return notes, status.messages, status.summaries, status.conversations


def _check(name: str, out: Any, elapsed: float, changes: dict[str, int]) -> None:
    """One call's result: JSON, a result or a known structured error, in budget."""
    assert elapsed < CALL_BUDGET, (name, elapsed)
    assert isinstance(out, dict)
    text = json.dumps(out, allow_nan=False)  # JSON-able, always
    assert "Traceback" not in text and 'File "' not in text
    if "error" in out:
        err = out["error"]
        assert set(err) == {"code", "message", "field"}
        assert err["code"] in KNOWN_CODES, out
        assert isinstance(err["message"], str) and err["message"]
    elif name == "memory_add" and out["status"] in ("created", "pending_merge"):
        changes["added"] += 1  # a pending merge is stored as a note of its own, flagged
    elif name == "memory_delete":
        changes["deleted"] += 1


def _fuzz(name: str, world: tuple[ToolFacade, Tenants], lcm_store: Any,
          call: Callable[[str, Any], Any], strategy: st.SearchStrategy[Any], examples: int) -> None:
    """Run ``call`` on ``examples`` hostile arguments, then check both stores are intact."""
    facade, tenants = world
    memory = tenants.store
    victim_before = _snapshot(memory, lcm_store, tenants.mallory)
    own_before = memory.count(agent_id=tenants.alice)
    changes = {"added": 0, "deleted": 0}

    @settings(max_examples=examples if name != "memory_consolidate" else 8, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(args=strategy)
    def run(args: Any) -> None:
        began = time.monotonic()
        out = call(name, args)
        _check(name, out, time.monotonic() - began, changes)

    run()
    assert _snapshot(memory, lcm_store, tenants.mallory) == victim_before
    if name != "memory_consolidate":  # consolidation may merge the fuzzer's own notes
        assert memory.count(agent_id=tenants.alice) == (own_before + changes["added"]
                                                        - changes["deleted"])
    if name != "memory_delete":  # a delete could only hit the marker by guessing its uuid
        found = facade.call("memory_search", {"query": "zebra crossings marker", "limit": 3})
        assert MARKER in [r["content"] for r in found["results"]]
    assert lcm_store.doctor().ok, lcm_store.doctor()
    active = {n.id for n, _ in memory.iter_notes(agent_id=tenants.alice)}
    for note, _ in memory.iter_notes(agent_id=tenants.alice):
        assert set(note.links) <= active, note  # no dangling links (amem doctor's check)


@big_reprs_ok
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_facade_fuzz(name: str, world: tuple[ToolFacade, Tenants], lcm_store: Any) -> None:
    facade = world[0].for_agent(ERASER) if name == "memory_delete_all" else world[0]
    _fuzz(name, world, lcm_store, facade.call, arguments_for(name), 50)


@big_reprs_ok
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_mcp_fuzz(name: str, world: tuple[ToolFacade, Tenants], lcm_store: Any,
                  portal: BlockingPortal) -> None:
    """The same through the MCP server and the SDK's client (in-memory transport)."""
    facade = world[0].for_agent(ERASER) if name == "memory_delete_all" else world[0]
    server = build_server(facade, limits=CallLimits(timeout=CALL_BUDGET))
    with portal.wrap_async_context_manager(Client(server)) as client:
        def call(tool: str, args: Any) -> Any:
            res = portal.call(client.call_tool, tool, args)
            out = res.structured_content
            assert json.loads(res.content[0].text) == out
            assert res.is_error == ("error" in out)
            return out

        # MCP carries an object (or nothing) as the arguments: the client sends no others.
        objects = arguments_for(name).filter(lambda a: a is None or isinstance(a, dict))
        _fuzz(name, world, lcm_store, call, objects, 25)


@pytest.mark.parametrize("char", ["x", "é ", "中", "\u3042", "한"])
def test_the_longest_note_of_each_script_is_added_within_the_budget(
        world: tuple[ToolFacade, Tenants], char: str) -> None:
    """The fuzz's longest strings, one script each (a long run of one Han character took
    13-42 s in the offline keyword and BM25 segmenters, four jieba passes per add)."""
    facade = world[0]
    text = (char * 32_000)[:32_000]
    began = time.monotonic()
    out = facade.call("memory_add", {"text": text})
    elapsed = time.monotonic() - began
    assert out.get("status") in ("created", "deduplicated", "folded", "pending_merge"), out
    assert elapsed < CALL_BUDGET, elapsed


@big_reprs_ok
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_validator_agrees_with_jsonschema(name: str) -> None:
    schema = TOOLS[name].schema
    reference = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
    @given(args=arguments_for(name))
    def run(args: Any) -> None:
        try:
            validate(args, schema)
            ours = True
        except ToolError as exc:
            assert exc.code == "invalid_argument"
            ours = False
        assert ours == reference.is_valid(args), args

    run()


def test_validator_names_nested_fields() -> None:
    schema = TOOLS["memory_search"].schema
    with pytest.raises(ToolError) as info:
        validate({"query": "x", "topicsFilter": ["ok", ""]}, schema)
    assert info.value.field == "topicsFilter[1]"
    with pytest.raises(ToolError) as info:
        validate({"limit": 3}, schema)
    assert info.value.field == "query" and "missing" in info.value.message
