"""The lcm_* tools over a real in-memory LcmStore, confined to the caller's session family."""

from __future__ import annotations

from typing import Any

import pytest

from amem import MemoryStore
from tools import ToolFacade
from tools.errors import ToolError, is_error


@pytest.fixture
def alice(memory: MemoryStore, lcm_store: Any) -> ToolFacade:
    return ToolFacade(memory, lcm_store, agent_id="alice")


@pytest.fixture
def mallory(memory: MemoryStore, lcm_store: Any) -> ToolFacade:
    return ToolFacade(memory, lcm_store, agent_id="mallory")


def _ids(facade: ToolFacade, pattern: str) -> list[str]:
    return [h["id"] for h in facade.call("lcm_grep", {"pattern": pattern})["hits"]]


def test_grep_finds_only_the_callers_history(alice: ToolFacade, mallory: ToolFacade) -> None:
    out = alice.call("lcm_grep", {"pattern": "flight", "sort": "relevance"})
    assert len(out["hits"]) == 2
    assert all("Oslo" not in h["snippet"] for h in out["hits"])
    assert [h["snippet"] for h in mallory.call("lcm_grep", {"pattern": "flight"})["hits"]] == [
        "Mallory's flight to Oslo, booking code ZX9"]


def test_lcm_tools_are_listed_with_a_store(alice: ToolFacade) -> None:
    names = [t["name"] for t in alice.list_tools()]
    assert names[-5:] == ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query", "tool_info"]


def test_describe_expand_and_expand_query(alice: ToolFacade) -> None:
    msg = _ids(alice, "Lisbon")[0]
    desc = alice.call("lcm_describe", {"id": msg})
    assert desc["kind"] == "message" and "Lisbon" in desc["content"]
    expanded = alice.call("lcm_expand", {"query": "TP1234"})
    assert {m["conversationId"] for m in expanded["messages"]} == {desc["conversationId"]}
    answer = alice.call("lcm_expand_query", {"prompt": "What is the flight number?",
                                             "query": "flight"})
    assert "TP1234" in answer["answer"] and answer["citedIds"]


def test_other_families_answer_not_found(alice: ToolFacade, mallory: ToolFacade) -> None:
    theirs = _ids(mallory, "Oslo")[0]
    conv = mallory.call("lcm_describe", {"id": theirs})["conversationId"]
    assert alice.call("lcm_describe", {"id": theirs})["error"]["code"] == "not_found"
    assert alice.call("lcm_grep", {"pattern": "Oslo", "conversationId": conv})["error"]["code"] == "not_found"
    assert alice.call("lcm_describe", {"id": "sum_0123456789abcdef"})["error"]["code"] == "not_found"
    # Queries never reach into another family either.
    assert all("Oslo" not in m["content"]
               for m in alice.call("lcm_expand", {"query": "Oslo"})["messages"])


def test_session_key_from_the_connection(memory: MemoryStore, lcm_store: Any) -> None:
    facade = ToolFacade(memory, lcm_store, agent_id="mallory", session_key="agent:mallory:main")
    assert len(facade.call("lcm_grep", {"pattern": "Oslo"})["hits"]) == 1
    # Another agent naming that key is refused (tests/tools/test_tenancy.py covers every path).
    with pytest.raises(ToolError) as info:
        ToolFacade(memory, lcm_store, agent_id="someone", session_key="agent:mallory:main")
    assert info.value.code == "forbidden" and info.value.field == "session_key"


@pytest.mark.parametrize("name,args,code,field", [
    ("lcm_grep", {"pattern": r"(a)\1", "mode": "regex"}, "regex_refused", "pattern"),
    ("lcm_grep", {"pattern": "(?=a)b", "mode": "regex"}, "regex_refused", "pattern"),
    # a NUL ends an FTS5 query string (it was an internal "unterminated string" error)
    ("lcm_grep", {"pattern": "flight\x00", "mode": "full_text"}, "invalid_argument", "pattern"),
    ("lcm_grep", {"pattern": "中\x00文字", "mode": "full_text"}, "invalid_argument", "pattern"),
    ("lcm_expand", {"query": "TP\x001234"}, "invalid_argument", "query"),
    ("lcm_expand_query", {"prompt": "why?", "query": "fl\x00ight"}, "invalid_argument", "query"),
    ("lcm_describe", {"id": "msg_1\n"}, "invalid_argument", "id"),
    ("lcm_describe", {"id": "msg_1\x00"}, "invalid_argument", "id"),
    ("lcm_grep", {"pattern": "x", "mode": "fuzzy"}, "invalid_argument", "mode"),
    ("lcm_grep", {"pattern": "x", "limit": 201}, "invalid_argument", "limit"),
    ("lcm_grep", {"pattern": "x", "limit": -1}, "invalid_argument", "limit"),
    ("lcm_grep", {"pattern": "x", "limit": 10**30}, "invalid_argument", "limit"),
    ("lcm_grep", {"pattern": "x", "conversationId": -5}, "invalid_argument", "conversationId"),
    ("lcm_expand", {"query": "x", "maxDepth": 10**20}, "invalid_argument", "maxDepth"),
    ("lcm_expand_query", {"prompt": "x", "query": "y", "maxTokens": -1}, "invalid_argument", "maxTokens"),
    ("lcm_grep", {"pattern": "x", "since": "yesterday"}, "invalid_argument", "since"),
    ("lcm_describe", {"id": "not-an-id"}, "invalid_argument", "id"),
    ("lcm_expand", {}, "invalid_argument", "query"),
    ("lcm_expand", {"summaryIds": ["bogus"]}, "invalid_argument", "summaryIds"),
    ("lcm_expand_query", {"prompt": "why?"}, "invalid_argument", "query"),
])
def test_lcm_errors_are_structured(alice: ToolFacade, name: str, args: dict, code: str,
                                   field: str) -> None:
    out = alice.call(name, args)
    assert is_error(out), out
    assert (out["error"]["code"], out["error"]["field"]) == (code, field)


@pytest.mark.parametrize("pattern", ['"unterminated', '"', "AND", "NEAR(a b)", "*", "a* OR -b ^c", "flight\x01"])
def test_fts5_syntax_in_user_text_is_searched_as_text(alice: ToolFacade, pattern: str) -> None:
    out = alice.call("lcm_grep", {"pattern": pattern, "mode": "full_text"})
    assert not is_error(out), out


@pytest.mark.parametrize("bad_id", ["msg_99999999999999999999", "msg_9223372036854775808"])
def test_ids_beyond_sqlite_integers_are_not_found(alice: ToolFacade, bad_id: str) -> None:
    # They overflowed SQLite's integer on the lookup (an internal error).
    assert alice.call("lcm_describe", {"id": bad_id})["error"]["code"] == "not_found"
    assert alice.call("lcm_grep", {"pattern": "x", "conversationId": int(bad_id[4:])})["error"]["code"] == "not_found"


def test_a_regex_nul_is_searched_not_refused(alice: ToolFacade) -> None:
    out = alice.call("lcm_grep", {"pattern": "TP\x001234", "mode": "regex"})
    assert out["hits"] == [] and not out["truncated"]


def test_redos_corpus_through_the_tool(memory: MemoryStore) -> None:
    """Every known catastrophic pattern answers (hits or regex_refused) within the deadline."""
    import time

    from lcm import LcmConfig, LcmStore
    from tests.lcm.test_regex_redos import ADVERSARIAL, CORPUS, REFUSED

    with LcmStore(":memory:", LcmConfig(grep_regex_deadline_ms=1000, log_file_enabled=False)) as lcm:
        lcm.ingest("agent:alice:main", [{"role": "user", "content": t} for t in ADVERSARIAL])
        alice = ToolFacade(memory, lcm, agent_id="alice")
        for pattern in CORPUS:
            start = time.monotonic()
            out = alice.call("lcm_grep", {"pattern": pattern, "mode": "regex", "sort": "relevance"})
            assert time.monotonic() - start < 1.5, pattern
            if pattern in REFUSED:
                assert out["error"]["code"] == "regex_refused" and out["error"]["field"] == "pattern", out
            else:
                assert "error" not in out and not out["truncated"], (pattern, out)
