"""The facade's contract: validation, structured errors, identity, lazy loading, tool_info."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tools import MAX_PAYLOAD_BYTES, ToolFacade
from tools.errors import is_error, redact
from tools.facade import CORE_TOOLS

from .conftest import Tenants


def err(result: dict) -> dict:
    assert is_error(result), result
    assert set(result["error"]) == {"code", "message", "field"}
    assert result["error"]["message"]
    return result["error"]


def test_search_returns_matches_for_the_caller(facade: ToolFacade) -> None:
    out = facade.call("memory_search", {"query": "what does Alice drink in the morning", "limit": 2})
    assert out["matches"] <= 2
    assert out["results"][0]["content"].startswith("Alice prefers green tea")
    assert {r["via"] for r in out["results"]} <= {"match", "link"}
    assert all("vault" not in r["content"] for r in out["results"])


def test_integer_valued_float_is_accepted_as_integer(facade: ToolFacade) -> None:
    out = facade.call("memory_search", {"query": "car", "limit": 1.0})
    assert out["matches"] == 1


def test_list_get_delete_round_trip(facade: ToolFacade) -> None:
    listed = facade.call("memory_list", {"limit": 2})
    assert listed["count"] == 4 and len(listed["notes"]) == 2 and listed["next_offset"]
    rest = facade.call("memory_list", {"limit": 50, "offset": listed["next_offset"]})
    ids = [n["id"] for n in listed["notes"] + rest["notes"]]
    assert len(set(ids)) == 4
    note = facade.call("memory_get", {"id": ids[0]})
    assert note["id"] == ids[0] and "hash" not in note and "agent_id" not in note
    assert facade.call("memory_delete", {"id": ids[0]}) == {"id": ids[0], "deleted": True,
                                                            "released": []}
    assert err(facade.call("memory_get", {"id": ids[0]}))["code"] == "not_found"
    assert facade.call("memory_list", {})["count"] == 3


@pytest.mark.parametrize("name,args,code,field", [
    ("nope", {}, "unknown_tool", "name"),
    (42, {}, "unknown_tool", "name"),
    ("memory_search", {}, "invalid_argument", "query"),
    ("memory_search", {"query": 7}, "invalid_argument", "query"),
    ("memory_search", {"query": "x", "limit": 0}, "invalid_argument", "limit"),
    ("memory_search", {"query": "x", "limit": 51}, "invalid_argument", "limit"),
    ("memory_search", {"query": "x", "limit": True}, "invalid_argument", "limit"),
    ("memory_search", {"query": "x", "limit": 2.5}, "invalid_argument", "limit"),
    ("memory_search", {"query": "x", "topicsFilter": "a"}, "invalid_argument", "topicsFilter"),
    ("memory_search", {"query": "x", "topicsFilter": ["a", 1]}, "invalid_argument", "topicsFilter[1]"),
    ("memory_search", {"query": "   "}, "invalid_argument", "query"),
    ("memory_add", {"text": ""}, "invalid_argument", "text"),
    ("memory_add", {"text": "x" * 32_001}, "invalid_argument", "text"),
    ("memory_add", {"text": "hi", "agent_id": "mallory"}, "invalid_argument", "agent_id"),
    ("memory_get", {"id": None}, "invalid_argument", "id"),
    ("memory_get", {"id": "no-such-note"}, "not_found", None),
    ("memory_delete", {"id": "\x00bad"}, "invalid_argument", "id"),
    ("memory_list", {"limit": 101}, "invalid_argument", "limit"),
    ("tool_info", {"query": "x", "maxResults": 0}, "invalid_argument", "maxResults"),
    ("tool_info", {"query": "x", "max_results": 3}, "invalid_argument", "max_results"),
    ("lcm_grep", {"pattern": "x"}, "unavailable", None),
])
def test_bad_calls_are_structured_errors(facade: ToolFacade, name: object, args: dict,
                                         code: str, field: str | None) -> None:
    e = err(facade.call(name, args))
    assert (e["code"], e["field"]) == (code, field)


def test_arguments_must_be_an_object(facade: ToolFacade) -> None:
    assert err(facade.call("memory_list", ["limit", 3]))["field"] == "arguments"
    assert facade.call("memory_list", None)["count"] == 4  # None means no arguments


def test_non_json_arguments_are_rejected(facade: ToolFacade) -> None:
    assert err(facade.call("memory_search", {"query": "x", "limit": float("nan")}))["field"] == "arguments"
    assert err(facade.call("memory_search", {"query": {1, 2}}))["field"] == "arguments"


def test_oversized_payload_is_rejected_before_validation(facade: ToolFacade) -> None:
    e = err(facade.call("memory_add", {"text": "a", "subjects": ["x" * 200] * 2000}))
    assert e["code"] == "payload_too_large"
    assert str(MAX_PAYLOAD_BYTES) in e["message"]
    assert facade.call("memory_list", {})["count"] == 4


def test_unexpected_exception_is_internal_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        """A real object that fails the way a crashed engine would."""

        def __getattr__(self, name: str) -> object:
            raise RuntimeError("engine exploded")

    facade = ToolFacade(Broken(), None, agent_id="alice")  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="tools.facade"):
        e = err(facade.call("memory_list", {}))
    assert e["code"] == "internal" and "Traceback" not in e["message"]
    assert "engine exploded" not in e["message"]
    assert any(r.exc_info for r in caplog.records)


def test_identity_comes_from_the_facade_only(tenants: Tenants) -> None:
    mallory = ToolFacade(tenants.store, None, agent_id=tenants.mallory)
    alice = ToolFacade(tenants.store, None, agent_id=tenants.alice)
    assert mallory.call("memory_list", {})["count"] == 1
    found = mallory.call("memory_search", {"query": "Alice green tea coffee", "limit": 10})
    assert all("Alice" not in r["content"] for r in found["results"])
    alice_id = alice.call("memory_list", {})["notes"][0]["id"]
    assert err(mallory.call("memory_get", {"id": alice_id}))["code"] == "not_found"
    assert err(mallory.call("memory_delete", {"id": alice_id}))["code"] == "not_found"
    assert alice.call("memory_get", {"id": alice_id})["id"] == alice_id
    assert alice.call("memory_list", {})["count"] == 4


def test_for_agent_shares_the_store(facade: ToolFacade) -> None:
    other = facade.for_agent(facade.agent_id.replace("alice", "mallory"))
    assert other.agent_id.startswith("mallory") and other.memory is facade.memory
    assert other.call("memory_list", {})["count"] == 1


def test_bad_agent_id_is_refused_at_construction(tenants: Tenants) -> None:
    with pytest.raises(ValueError):
        ToolFacade(tenants.store, None, agent_id="")


def test_lazy_lists_every_tool_and_shortens_the_rest(tenants: Tenants) -> None:
    full = ToolFacade(tenants.store, None, agent_id=tenants.alice, lcm_listed=True)
    lazy = ToolFacade(tenants.store, None, agent_id=tenants.alice, lazy=True, lcm_listed=True)
    # Every tool stays listed: hosts that allow only listed tools would block a hidden one.
    assert [t["name"] for t in lazy.list_tools()] == [t["name"] for t in full.list_tools()]
    short = {t["name"]: t for t in lazy.list_tools() if t["name"] not in CORE_TOOLS}
    assert set(short) == {"memory_list", "memory_get", "memory_update", "memory_delete",
                          "memory_history", "memory_unsupersede", "memory_separate",
                          "memory_delete_all", "memory_consolidate",
                          "memory_status", "lcm_describe", "lcm_expand", "lcm_expand_query"}
    for name, d in short.items():
        assert d["input_schema"] == {"type": "object"} and "tool_info" in d["description"]
    # A shortened tool is still validated against its full schema, and tool_info serves it.
    assert lazy.call("memory_list", {})["count"] == 4
    assert lazy.call("memory_get", {"nope": 1})["error"]["field"] == "id"
    got = lazy.call("tool_info", {"query": "memory_get"})
    assert got["matched_by"] == "name" and got["tools"][0]["input_schema"]["required"] == ["id"]


def test_tool_info_keyword_search(facade: ToolFacade) -> None:
    got = facade.call("tool_info", {"query": "delete a memory", "maxResults": 3})
    assert got["matched_by"] == "keyword"
    assert got["tools"][0]["name"] == "memory_delete"
    assert len(got["tools"]) <= 3
    assert facade.call("tool_info", {"query": "zzzz qqqq"})["tools"] == []


def test_listing_only_facade() -> None:
    catalogue = ToolFacade(None, None, agent_id="default", lcm_listed=True)
    assert len(catalogue.list_tools()) == 17
    assert err(catalogue.call("memory_list", {}))["code"] == "unavailable"
    assert catalogue.call("tool_info", {"query": "lcm_grep"})["tools"][0]["name"] == "lcm_grep"


# ---------------------------------------------------------------------- no server paths


def test_real_store_failures_reach_the_caller_without_server_paths(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A store broken on disk and a tampered file record: the caller learns the error code
    and what failed, never where the data lives; the server log keeps the paths."""
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from lcm import LcmStore

    home = tmp_path / "data dir with spaces"
    lcm = LcmStore(str(home / "lcm.db"))
    lcm.ingest("agent:alice:main", [{"role": "user", "content": "log dump " + "line " * 30_000}])
    with contextlib.closing(sqlite3.connect(home / "lcm.db")) as db, db:
        (file_id,) = [r[0] for r in db.execute("SELECT file_id FROM large_files")]
        # a record pointing outside the files directory (a tampered or corrupt database)
        db.execute("UPDATE large_files SET storage_path = '../../../../etc/passwd'")
    memory = MemoryStore(home / "store", embedder=HashingEmbedder())
    facade = ToolFacade(memory, lcm, agent_id="alice")
    try:
        shutil.rmtree(home / "store" / "shard")  # the engine's files vanish under it
        with caplog.at_level(logging.WARNING, logger="tools.facade"):
            escaped = err(facade.call("lcm_describe", {"id": file_id}))
            broken = err(facade.call("memory_add", {"text": "a note the engine cannot keep"}))
    finally:
        lcm.close()
        with contextlib.suppress(Exception):
            memory.close()  # fails: the engine cannot flush what is gone
        with contextlib.suppress(Exception):
            memory.index.backend.close()  # so release the engine and its lock by hand
    assert (escaped["code"], broken["code"]) == ("path_escape", "backend_error")
    for e in (escaped, broken):
        assert str(tmp_path) not in e["message"] and "spaces" not in e["message"], e
        assert not re.search(r"(?<![\w.:/])/\w", e["message"]), e  # no absolute path at all
        assert "<path>" in e["message"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert str(home) in logged  # the operator still sees where


@pytest.mark.parametrize("message,expected", [
    ("the store at /srv/my data/store is locked", "the store at <path> is locked"),
    ("no note 'b/c' for agent 'a'", "no note 'b/c' for agent 'a'"),
    ("see http://127.0.0.1:8765/mcp", "see http://127.0.0.1:8765/mcp"),
    ("open C:\\amem\\store failed", "open <path> failed"),
    ("at ~/.local/share/amem (pid 7)", "at <path> (pid 7)"),
    ("ratio 1/2 of (a|b)/c", "ratio 1/2 of (a|b)/c"),
])
def test_redact_removes_paths_and_keeps_the_rest(message: str, expected: str) -> None:
    assert redact(message, ["/srv/my data"]) == expected


def test_redact_keeps_escaped_input_and_regexes() -> None:
    for message in ["since: not an ISO-8601 time: '\\x00'", "pattern '\\d+\\s' was refused"]:
        assert redact(message) == message
