"""Tenancy over the real HTTP server: every combination of identity headers, zero reads across
agents or session families.

The server runs as alice with her session ``agent:alice:main``; six agents (some with
non-ASCII ids, one whose id is a prefix of another's session keys) own one note and one or
two conversations each, every one marked with its own tag. Each header combination gets its
own MCP session and reads through every reading tool. The expected identity comes from the
tables below, written out by hand (not from ``tools.tenancy``), and what a caller sees must
be exactly its own tags: nothing of another agent, nothing of another family.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from tools import ToolFacade

from .http_server import OWNER_AUTH, http_session, running_http

#: note tag per agent (whole words: a tag is never part of another)
NOTES = {"alice": "tagnalice", "bob": "tagnbob", "ålice": "tagnaring", "a": "tagnaprefix",
         "a:b": "tagnacolonb", "中": "tagnzhong"}
#: conversation tag per session key, and the agent each key belongs to
SESSIONS = {"agent:alice:main": ("alice", "tagcalicemain"),
            "agent:alice:work": ("alice", "tagcalicework"),
            "agent:bob:main": ("bob", "tagcbob"),
            "agent:ålice:main": ("ålice", "tagcaring"),
            "agent:a:b:main": ("a", "tagcaprefix"),       # agent "a"'s, not agent "a:b"'s
            "agent:a%3Ab:main": ("a:b", "tagcacolonb"),
            "agent:中:main": ("中", "tagczhong")}
DEFAULT = {"alice": "agent:alice:main", "bob": "agent:bob:main", "ålice": "agent:ålice:main",
           "a": "agent:a:main", "a:b": "agent:a%3Ab:main", "中": "agent:中:main",
           "mallory": "agent:mallory:main"}
ERROR = "error"
#: raw X-Amem-Agent bytes -> the agent they name (None: header absent -> the server's alice):
#: absent, own, another, non-ASCII raw and escaped, a prefix of others' keys, malformed
AGENTS: dict[bytes | None, str] = {
    None: "alice", b"alice": "alice", b"bob": "bob", "ålice".encode(): "ålice",
    b"%E4%B8%AD": "中", b"a": "a", b"a:b": "a:b", b"mallory": "mallory",
    b"\xe5lice": ERROR, b"": ERROR,
}
#: raw X-Amem-Session bytes -> the key they name
KEYS: dict[bytes | None, str | None] = {
    None: None, b"agent:alice:main": "agent:alice:main", b"agent:alice:work": "agent:alice:work",
    b"agent:bob:main": "agent:bob:main", "agent:ålice:main".encode(): "agent:ålice:main",
    b"agent:%E4%B8%AD:main": "agent:中:main", b"agent:a:b:main": "agent:a:b:main",
    # The header is percent-decoded once, so agent "a:b"'s key agent:a%3Ab:main travels as
    # agent:a%253Ab:main, and agent:a%3Ab:main in a header is agent "a"'s agent:a:b:main.
    b"agent:a%253Ab:main": "agent:a%3Ab:main", b"agent:a%3Ab:main": "agent:a:b:main",
    b"garbage": "garbage", b"\xff\xfe": ERROR,
}
OWNERS = {**{k: owner for k, (owner, _) in SESSIONS.items()}, "agent:mallory:main": "mallory"}


def expected(agent_raw: bytes | None, key_raw: bytes | None) -> tuple[str, str] | str:
    """(agent, session) the request must run as, or the header it must be refused for."""
    agent = AGENTS[agent_raw]
    if agent == ERROR:
        return "X-Amem-Agent"
    key = KEYS[key_raw]
    if key is None:
        return agent, "agent:alice:main" if agent == "alice" else DEFAULT[agent]
    if key == ERROR or OWNERS.get(key) != agent:
        return "X-Amem-Session"
    return agent, key


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, dict[str, int]]]:
    from lcm import LcmStore

    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as memory, \
            LcmStore(":memory:") as lcm:
        for agent, tag in NOTES.items():
            memory.add(f"kumquat secret {tag}", [], enrich=False, agent_id=agent)
        for key, (_, tag) in SESSIONS.items():
            lcm.ingest(key, [{"role": "user", "content": f"tangerine plans {tag}"}])
        conversations = {str(c.session_key): c.id for c in lcm.conversations()}
        facade = ToolFacade(memory, lcm, agent_id="alice", session_key="agent:alice:main")
        with running_http(facade) as url:
            yield url, conversations


def _tags(value: Any) -> set[str]:
    """Every tag word anywhere in a result."""
    return set(TAG_RE.findall(str(value)))


TAG_RE = re.compile(r"tag[nc][a-z]+")
READS: list[tuple[str, dict[str, Any]]] = [
    ("memory_list", {"limit": 100}), ("memory_search", {"query": "kumquat secret", "limit": 50}),
    ("lcm_grep", {"pattern": "tangerine", "limit": 200}),
    ("lcm_grep", {"pattern": "tangerine", "mode": "regex", "limit": 200}),
    ("lcm_expand", {"query": "tangerine"}),
]


def _probes(conversations: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """Every conversation id and message id of every family, named as arguments."""
    return [call for cid in conversations.values() for call in (
        ("lcm_grep", {"pattern": "tangerine", "conversationId": cid}),
        ("lcm_describe", {"id": f"msg_{cid}"}))]


def test_every_header_combination_reads_only_its_own_agent_and_family(
        server: tuple[str, dict[str, int]]) -> None:
    url, conversations = server
    combos = list(itertools.product(AGENTS, KEYS))

    async def session(part: list[tuple[Any, Any]], out: list[Any], probed: set[Any]) -> None:
        import httpx2

        # One MCP session for many combinations: identity is read per request, so switching
        # headers mid-session must switch (or refuse) the identity, never keep the old one.
        async with http_session(url) as (client, http):
            for agent_raw, key_raw in part:
                http.headers = httpx2.Headers([
                    (name, raw) for name, raw in ((b"X-Amem-Agent", agent_raw),
                                                  (b"X-Amem-Session", key_raw),
                                                  OWNER_AUTH)
                    if raw is not None])
                want = expected(agent_raw, key_raw)
                # A refused request is refused before any tool runs: two tools show it.
                reads = READS if not isinstance(want, str) else READS[::2]
                results = [(await client.call_tool(n, a)).structured_content for n, a in reads]
                probes = []
                if want not in probed:  # the id probes once per identity the headers give
                    probed.add(want)
                    probes = [(await client.call_tool(n, a)).structured_content
                              for n, a in _probes(conversations)]
                out.append((agent_raw, key_raw, results, probes))

    async def main() -> list[tuple[Any, Any, list[Any], list[Any]]]:
        out: list[Any] = []
        probed: set[Any] = set()
        async with anyio.create_task_group() as tg:  # four clients at once, as a server sees
            for i in range(4):
                tg.start_soon(session, combos[i::4], out, probed)
        return out

    checked = refused = 0
    for agent_raw, key_raw, reads, probes in anyio.run(main):
        want = expected(agent_raw, key_raw)
        where = (agent_raw, key_raw)
        if isinstance(want, str):  # refused: every call, naming the header, showing nothing
            for result in reads + probes:
                assert result["error"]["field"] == want, (where, result)
                assert result["error"]["code"] in ("invalid_argument", "forbidden"), where
                assert not _tags(result), (where, result)
            refused += 1
            continue
        agent, key = want
        own_note = {NOTES[agent]} if agent in NOTES else set()
        own_family = {SESSIONS[key][1]} if key in SESSIONS else set()
        listed, searched, grep, regex, expanded = reads
        assert listed["count"] == len(own_note) and _tags(listed) == own_note, where
        assert _tags(searched) == own_note, where
        for found in (grep, regex, expanded):
            assert _tags(found) == own_family, (where, found)
        for result in probes:
            assert _tags(result) <= own_family, (where, result)
            if not _tags(result):
                assert result["error"]["code"] == "not_found", (where, result)
        checked += 1
    assert checked and refused and checked + refused == len(combos)
