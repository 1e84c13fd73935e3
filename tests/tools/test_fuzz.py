"""Property-based tests: random JSON to every tool gives results or structured errors only,
and the stores are intact afterwards; our validator agrees with ``jsonschema``."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amem import MemoryStore
from tools import ToolFacade
from tools.errors import ToolError
from tools.schema import validate

from .conftest import Tenants

CATALOGUE = ToolFacade(None, None, agent_id="default", lcm_listed=True)
TOOLS = {t.name: t for t in CATALOGUE.registry}
KNOWN_CODES = {"unknown_tool", "invalid_argument", "payload_too_large", "not_found",
               "unavailable", "regex_refused", "config_error"}

_scalars = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
            | st.floats(allow_nan=False, allow_infinity=False, width=32)
            | st.text(max_size=30) | st.sampled_from(["", " ", "msg_1", "sum_0123456789abcdef",
                                                      "regex", "both", "hybrid", "x" * 300]))
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def arguments_for(name: str) -> st.SearchStrategy[Any]:
    """Mostly objects keyed by the tool's real argument names (so validation is exercised
    beyond 'unknown field'), sometimes anything at all."""
    props = list(TOOLS[name].schema.get("properties", {})) or ["x"]
    keys = st.sampled_from(props) | st.text(max_size=10)
    return st.dictionaries(keys, _json, max_size=5) | _json


@pytest.fixture(scope="module")
def facades(memory: MemoryStore, lcm_store: Any) -> tuple[ToolFacade, Tenants]:
    tenants = Tenants(memory, "fuzzer", "victim")
    memory.add("the victim's private note", [], enrich=False, agent_id=tenants.mallory)
    memory.add("a note the fuzzer may find", [], enrich=False, agent_id=tenants.alice)
    return ToolFacade(memory, lcm_store, agent_id=tenants.alice), tenants


def _snapshot(memory: MemoryStore, lcm_store: Any, agent: str) -> tuple[Any, ...]:
    notes = sorted((n.id, n.content) for n, _ in memory.iter_notes(agent_id=agent))
    status = lcm_store.status()
    return notes, status.messages, status.summaries, status.conversations


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_random_json_gives_results_or_structured_errors(
        name: str, facades: tuple[ToolFacade, Tenants], lcm_store: Any) -> None:
    facade, tenants = facades
    memory = tenants.store
    victim_before = _snapshot(memory, lcm_store, tenants.mallory)
    # memory_consolidate and memory_add may legitimately change the fuzzer's own notes;
    # memory_delete could only hit an id it guessed. Track successes to account for them.
    own_before = memory.count(agent_id=tenants.alice)
    changes = {"added": 0, "deleted": 0}

    @settings(max_examples=60 if name != "memory_consolidate" else 10, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(args=arguments_for(name))
    def run(args: Any) -> None:
        out = facade.call(name, args)
        assert isinstance(out, dict)
        json.dumps(out, allow_nan=False)  # JSON-able, always
        if "error" in out:
            err = out["error"]
            assert set(err) == {"code", "message", "field"}
            assert err["code"] in KNOWN_CODES, out
            assert isinstance(err["message"], str) and err["message"]
            assert "Traceback" not in err["message"]
        elif name == "memory_add" and out["status"] == "created":
            changes["added"] += 1
        elif name == "memory_delete":
            changes["deleted"] += 1

    run()
    assert _snapshot(memory, lcm_store, tenants.mallory) == victim_before
    if name != "memory_consolidate":
        assert memory.count(agent_id=tenants.alice) == (own_before + changes["added"]
                                                        - changes["deleted"])


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_validator_agrees_with_jsonschema(name: str) -> None:
    schema = TOOLS[name].schema
    reference = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=150, deadline=None)
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
