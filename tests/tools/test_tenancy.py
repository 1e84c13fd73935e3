"""Tenancy of the lcm session key and the identity headers: one rule, on every path.

A session key belongs to the agent its second segment names (``agent:<agent>:...``) and to
no one else; a facade re-bound to another agent never keeps the server's family; identity
headers are UTF-8 (raw or percent-escaped). The HTTP server itself is exercised in
``test_tenancy_http.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from amem import MemoryStore
from tools import ToolFacade, ToolError
from tools.mcp_server import facade_for_headers
from tools.tenancy import (
    AGENT_HEADER, SESSION_HEADER, agent_segment, decode_header, default_session_key,
    session_key_for, session_owner,
)

# Agent ids as amem accepts them: no control characters, no surrounding spaces.
agents = st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")),
                 min_size=1, max_size=30).map(str.strip).filter(bool)


@settings(max_examples=300, deadline=None)
@given(agent=agents, other=agents, rest=st.sampled_from(["main", "cron:nightly", "x:y:z"]))
def test_a_session_key_names_exactly_one_agent(agent: str, other: str, rest: str) -> None:
    key = f"agent:{agent_segment(agent)}:{rest}"
    assert session_owner(key) == agent
    assert session_owner(default_session_key(agent)) == agent
    assert session_key_for(agent, key) == key
    if other != agent:
        with pytest.raises(ToolError) as info:
            session_key_for(other, key)
        assert info.value.code == "forbidden" and info.value.field == "session_key"


@pytest.mark.parametrize("key", [
    "agent:a:b:main",      # agent "a", never agent "a:b" (whose keys read agent:a%3Ab:...)
    "agent:a%3ab:main",    # not the canonical spelling: nobody's
    "agent:a%3Ab",         # no rest
    "agent::main", "main", "telegram:123", "agent:%ZZ:main", "agent:%FF:main",
])
def test_keys_of_nobody_or_of_a_prefix_agent_are_refused(key: str) -> None:
    with pytest.raises(ToolError) as info:
        session_key_for("a:b", key)
    assert info.value.code == "forbidden"


@pytest.mark.parametrize("key,code", [("", "invalid_argument"), ("agent:a:\x00", "invalid_argument"),
                                      ("agent:a:" + "x" * 600, "invalid_argument"),
                                      (5, "invalid_argument")])
def test_malformed_keys_name_the_field(key: Any, code: str) -> None:
    with pytest.raises(ToolError) as info:
        session_key_for("a", key, field="X-Amem-Session")
    assert (info.value.code, info.value.field) == (code, "X-Amem-Session")


def test_a_rebound_facade_never_keeps_another_agents_session(memory: MemoryStore,
                                                              lcm_store: Any) -> None:
    # The reproduction: server run as alice with her session, a request as bob.
    server = ToolFacade(memory, lcm_store, agent_id="alice", session_key="agent:alice:main")
    bob = server.for_agent("bob")
    assert bob.session_key == "agent:bob:main"
    assert bob.call("lcm_grep", {"pattern": "Lisbon"})["hits"] == []
    assert server.for_agent("alice").session_key == "agent:alice:main"
    with pytest.raises(ToolError) as info:
        server.for_agent("bob", session_key="agent:alice:main")
    assert info.value.code == "forbidden"
    with pytest.raises(ToolError):  # the host's own configuration is held to the same rule
        ToolFacade(memory, lcm_store, agent_id="bob", session_key="agent:alice:main")


def test_lcm_conversation_ids_never_reach_another_family(memory: MemoryStore,
                                                         lcm_store: Any) -> None:
    bob = ToolFacade(memory, lcm_store, agent_id="bob")
    for conv in lcm_store.conversations():
        out = bob.call("lcm_grep", {"pattern": "flight", "conversationId": conv.id})
        assert out["error"]["code"] == "not_found"


# ---------------------------------------------------------------------- identity headers


def _headers(**values: str | bytes) -> Headers:
    """Request headers as the HTTP server hands them over (raw bytes, read as latin-1)."""
    return Headers(raw=[(name.replace("_", "-").encode(), v if isinstance(v, bytes) else v.encode())
                        for name, v in values.items()])


@pytest.mark.parametrize("raw,agent", [
    ("ålice".encode(), "ålice"), (b"%C3%A5lice", "ålice"), ("中".encode(), "中"),
    (b"%E4%B8%AD", "中"), (b"50%25", "50%"), (b"plain", "plain"),
])
def test_identity_headers_are_utf8_or_percent_escapes(memory: MemoryStore, raw: bytes,
                                                      agent: str) -> None:
    assert decode_header(raw.decode("latin-1"), AGENT_HEADER) == agent
    server = ToolFacade(memory, None, agent_id="default")
    assert facade_for_headers(server, _headers(x_amem_agent=raw)).agent_id == agent


@pytest.mark.parametrize("headers,field", [
    ({"x_amem_agent": b"\xff\xfe"}, AGENT_HEADER),                  # not UTF-8
    ({"x_amem_agent": "%FF"}, AGENT_HEADER),                         # escapes not UTF-8
    ({"x_amem_agent": "100%"}, AGENT_HEADER),                        # a bare %
    ({"x_amem_agent": ""}, AGENT_HEADER),                            # empty
    ({"x_amem_agent": "%00"}, AGENT_HEADER),                         # a control character
    ({"x_amem_session": "agent:bob:main"}, SESSION_HEADER),          # another agent's
    ({"x_amem_agent": "bob", "x_amem_session": "agent:alice:main"}, SESSION_HEADER),
    ({"x_amem_agent": "%C3%A5lice", "x_amem_session": b"agent:\xe5lice:main"}, SESSION_HEADER),
])
def test_bad_identity_headers_are_refused_naming_the_header(memory: MemoryStore,
                                                            headers: dict[str, Any],
                                                            field: str) -> None:
    server = ToolFacade(memory, None, agent_id="alice", session_key="agent:alice:main")
    with pytest.raises(ToolError) as info:
        facade_for_headers(server, _headers(**headers))
    assert info.value.field == field
    assert info.value.code in ("invalid_argument", "forbidden")


def test_a_non_ascii_agent_reads_its_own_session(memory: MemoryStore) -> None:
    server = ToolFacade(memory, None, agent_id="alice", session_key="agent:alice:main")
    view = facade_for_headers(server, _headers(x_amem_agent="%C3%A5lice",
                                               x_amem_session="agent:ålice:work".encode()))
    assert (view.agent_id, view.session_key) == ("ålice", "agent:ålice:work")


def test_an_identity_header_sent_twice_is_refused(memory: MemoryStore) -> None:
    server = ToolFacade(memory, None, agent_id="alice")
    twice = Headers(raw=[(b"x-amem-agent", b"alice"), (b"x-amem-agent", b"bob")])
    with pytest.raises(ToolError) as info:
        facade_for_headers(server, twice)
    assert (info.value.code, info.value.field) == ("invalid_argument", AGENT_HEADER)


def test_amem_serve_refuses_a_session_of_another_agent(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tools.cli import main

    code = main(["serve", "--agent", "alice", "--session-key", "agent:bob:main",
                 "--no-scheduler", "--home", str(tmp_path)],
                env={"AMEM_EMBEDDER": "hashing"})
    assert code == 2  # usage: the key is not this agent's
    err = capsys.readouterr().err
    assert "agent:bob:main" in err and "alice" in err
