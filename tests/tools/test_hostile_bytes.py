"""Hostile bytes on every door (issue 23): JSON nested 5,000 deep and lone surrogates are
``invalid_argument`` naming the field (HTTP 400, a tool error, a JSON-RPC error) or
``file:line`` with exit 2 from the importers; never ``internal``, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.kernel import safejson
from amem.kernel.errors import InvalidArgumentError
from lcm import LcmConfig, LcmStore
from tools import ToolFacade
from tools.cli import main

from .http_server import OWNER_SECRET, running_http

DEEP = 5000
#: a 10 KB body nested 5,000 deep, as the issue sent it
DEEP_BODY = '{"messages": ' + "[" * DEEP + "]" * DEEP + "}"
#: a lone trailing surrogate, escaped as JSON allows
LONE = '"ok \\udc80 then"'
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "X-Amem-Agent": "alice"}


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, str, MemoryStore, LcmStore]]:
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as lcm:
        facade = ToolFacade(memory, lcm, agent_id="alice")
        # the owner's key (every route is behind the guard): the bytes are what is under test
        with running_http(facade) as url, httpx.Client(
                timeout=30, headers={"Authorization": f"Bearer {OWNER_SECRET}"}) as http:
            yield http, url, memory, lcm


def _no_messages(lcm: LcmStore) -> bool:
    return int(lcm.db.scalar("SELECT count(*) FROM messages")) == 0


def test_the_rule_names_the_field_and_keeps_valid_pairs() -> None:
    with pytest.raises(InvalidArgumentError) as deep:
        safejson.loads(DEEP_BODY)
    assert deep.value.field == "messages" and "deeper than 64" in str(deep.value)
    with pytest.raises(InvalidArgumentError) as lone:
        safejson.loads('{"messages": [{"role": "user", "content": ' + LONE + "}]}")
    assert lone.value.field == "messages[0].content" and "U+DC80" in str(lone.value)
    with pytest.raises(InvalidArgumentError) as key:
        safejson.loads('{"\\ud800": 1}', root="the line")
    assert key.value.field == "the line"
    # a valid pair is one character; brackets inside strings are not nesting
    assert safejson.loads('{"t": "\\ud83d\\ude00 ' + "[" * 500 + '"}') == {"t": "\U0001F600 " + "[" * 500}
    with pytest.raises(InvalidArgumentError) as py:  # a Python caller's value: walked, not parsed
        safejson.check_text({"a": {"b": "x\udfff"}}, root="arguments")
    assert py.value.field == "a.b"


def test_host_route_answers_400_naming_the_field(served: tuple[httpx.Client, str, MemoryStore, LcmStore]) -> None:
    http, url, _, lcm = served
    ingest = url.removesuffix("/mcp") + "/lcm/ingest"
    headers = {"X-Amem-Agent": "alice", "Content-Type": "application/json"}
    deep = http.post(ingest, content=DEEP_BODY.encode(), headers=headers)
    assert deep.status_code == 400, deep.text
    assert deep.json()["error"] == {"code": "invalid_argument", "field": "messages",
                                    "message": "messages nests deeper than 64 levels of objects and arrays"}
    lone = http.post(ingest, content=('{"messages": [{"role": "user", "content": ' + LONE + "}]}").encode(),
                     headers=headers)
    assert lone.status_code == 400, lone.text
    assert lone.json()["error"]["code"] == "invalid_argument"
    assert lone.json()["error"]["field"] == "messages[0].content"
    sessid = http.post(ingest, content=b'{"sessionId": "\\udc80", "messages": []}', headers=headers)
    assert sessid.status_code == 400 and sessid.json()["error"]["field"] == "sessionId"
    assert _no_messages(lcm)


def _mcp_session(http: httpx.Client, url: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "hostile", "version": "1"}}}
    res = http.post(url, headers=MCP_HEADERS, content=json.dumps(init))
    assert res.status_code == 200, res.text
    headers = {**MCP_HEADERS, "mcp-protocol-version": "2025-06-18"}
    if res.headers.get("mcp-session-id"):
        headers["mcp-session-id"] = res.headers["mcp-session-id"]
    http.post(url, headers=headers, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    return headers


def _sse_result(res: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response (a JSON body, or the data line of an SSE event)."""
    if res.headers.get("content-type", "").startswith("application/json"):
        return dict(res.json())
    data = [line[5:] for line in res.text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1]))


def test_mcp_refuses_both_as_errors_not_internal(served: tuple[httpx.Client, str, MemoryStore, LcmStore]) -> None:
    http, url, memory, _ = served
    headers = _mcp_session(http, url)

    def call(arguments: str, ident: int) -> httpx.Response:
        return http.post(url, headers=headers, content='{"jsonrpc": "2.0", "id": %d, "method": "tools/call", '
                         '"params": {"name": "memory_add", "arguments": %s}}' % (ident, arguments))

    # the transport's parser refuses these before any tool runs: a JSON-RPC parse error
    for ident, arguments in ((2, '{"text": "x", "metadata": ' + "[" * DEEP + "]" * DEEP + "}"),
                             (3, '{"text": ' + LONE + "}")):
        res = call(arguments, ident)
        assert res.status_code == 400, res.text
        assert _sse_result(res)["error"]["code"] == -32700
    # nesting the transport lets through (100 deep) reaches the tools' rule: a tool error
    res = call('{"text": "x", "metadata": {"k": ' + "[" * 100 + "]" * 100 + "}}", 4)
    reply = _sse_result(res)["result"]
    assert reply["isError"] is True
    error = json.loads(reply["content"][0]["text"])["error"]
    assert error["code"] == "invalid_argument" and error["field"] == "metadata", error
    assert memory.count(agent_id="alice") == 0


def test_python_callers_get_invalid_argument(tmp_path: Path) -> None:
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as lcm:
        facade = ToolFacade(memory, lcm, agent_id="alice")
        added = facade.call("memory_add", {"text": "tea \udc80"})
        assert added["error"]["code"] == "invalid_argument" and added["error"]["field"] == "text"
        nested: Any = []
        for _ in range(DEEP):
            nested = [nested]
        deep = facade.call("memory_add", {"text": "tea", "metadata": {"k": nested}})
        assert deep["error"]["code"] == "invalid_argument" and deep["error"]["field"] == "metadata"
        with pytest.raises(InvalidArgumentError) as store_add:
            memory.add("tea \ud800", agent_id="alice")
        assert store_add.value.field == "text"
        with pytest.raises(InvalidArgumentError) as ingest:
            lcm.ingest("agent:alice:main", [{"role": "user", "content": "hi"},
                                            {"role": "user", "content": "bad \udc80"}])
        assert ingest.value.field == "messages[1].content"
        assert memory.count(agent_id="alice") == 0 and _no_messages(lcm)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "cli",
            "LCM_DATABASE_PATH": str(tmp_path / "lcm.db")}


@pytest.mark.parametrize("line,why", [
    ('{"text": ' + "[" * DEEP + "]" * DEEP + "}", "text nests deeper than 64"),
    ('{"text": ' + LONE + "}", "text holds a lone surrogate"),
])
def test_import_names_file_and_line_and_exits_2(tmp_path: Path, env: dict[str, str], line: str, why: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text('{"text": "a fine note"}\n' + line + "\n", encoding="utf-8")
    code = main(["import", str(src), "--no-enrich"], env=env)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{src}:2: {why}" in err and "Traceback" not in err and "internal" not in err


@pytest.mark.parametrize("line,why", [
    ('{"role": "user", "content": ' + "[" * DEEP + "]" * DEEP + "}", "content nests deeper than 64"),
    ('{"role": "user", "content": ' + LONE + "}", "content holds a lone surrogate"),
])
def test_lcm_ingest_names_file_and_line_and_exits_2(tmp_path: Path, env: dict[str, str], line: str, why: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "talk.jsonl"
    src.write_text('{"role": "user", "content": "hello"}\n' + line + "\n", encoding="utf-8")
    code = main(["lcm", "ingest", str(src), "--session-key", "agent:cli:main"], env=env)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{src}:2: {why}" in err and "Traceback" not in err and "internal" not in err


@pytest.mark.slow
def test_stdio_answers_every_line_it_cannot_read(tmp_path: Path) -> None:
    """Over stdio the SDK handed an unreadable line to the session, which answered nothing:
    the host waited for the id until its own timeout (exploratory test, 2026-12-05). Each
    such line now gets its JSON-RPC error, and the server goes on serving."""
    import os
    import subprocess
    import sys

    amem = Path(sys.executable).with_name("amem")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"})
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "memory_search", ' \
           '"arguments": {"query": %s}}}'
    lines = ["this is not json",
             '{"jsonrpc": "2.0", "id": 8}',
             call % (9, LONE),
             '{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": ' + "[" * DEEP + "]" * DEEP + "}",
             json.dumps({"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": {
                 "protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "raw", "version": "0"}}})]
    with subprocess.Popen([str(amem), "serve", "--agent", "alice"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            out, err = proc.communicate("\n".join(lines) + "\n", timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    by_id = {r.get("id"): r for r in replies}
    assert [r["error"]["code"] for r in replies if r.get("id") is None] == [-32700, -32700], replies
    assert by_id[8]["error"]["code"] == -32600
    assert by_id[9]["error"]["code"] == -32600 and "lone surrogate" in by_id[9]["error"]["message"]
    assert "deeper than 64 levels" in json.dumps(replies)
    assert by_id[11]["result"]["serverInfo"]["name"]  # still serving
    assert "Traceback" not in err
