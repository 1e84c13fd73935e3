"""Bounded MCP sessions: a key that abandons sessions fills only its own share (429 naming
the cap), other keys keep opening theirs, and idle sessions expire."""

from __future__ import annotations

import time

import httpx

from tools import ToolFacade
from tools.http_guard import GuardConfig

from ..http_server import refusal, running_http
from .conftest import Served

INIT = (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
        b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}}}')


def open_session(http: httpx.Client, url: str, key: str) -> httpx.Response:
    return http.post(url, content=INIT, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream"})


def test_a_flood_of_abandoned_sessions_is_capped_per_key(served: Served) -> None:
    cap = 8  # the fixture's sessions_per_key
    began = time.monotonic()
    statuses: list[int] = []
    opened: list[str] = []
    with httpx.Client(timeout=30) as http:
        for _ in range(300):
            res = open_session(http, served.url, served.alice)
            statuses.append(res.status_code)
            if res.status_code == 200:
                opened.append(res.headers["mcp-session-id"])
            else:
                error = refusal(res)
                assert error["code"] == "too_many_sessions" and f"{cap} open MCP sessions" in error["message"]
                assert res.headers["retry-after"]
        assert statuses.count(200) == cap and statuses.count(429) == 300 - cap, set(statuses)
        # another client is not touched by alice's flood: no 503, its own sessions open
        for _ in range(3):
            assert open_session(http, served.url, served.bob).status_code == 200
        # alice closing a session frees a place for her
        closed = http.delete(served.url, headers={"Authorization": f"Bearer {served.alice}",
                                                  "Mcp-Session-Id": opened[0]})
        assert closed.status_code < 400, closed.text
        assert open_session(http, served.url, served.alice).status_code == 200
        assert open_session(http, served.url, served.alice).status_code == 429
        # a session belongs to the key that opened it: bob cannot use alice's
        stolen = http.post(served.url, content=b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}',
                           headers={"Authorization": f"Bearer {served.bob}", "Mcp-Session-Id": opened[1],
                                    "Content-Type": "application/json",
                                    "Accept": "application/json, text/event-stream"})
        assert stolen.status_code == 404
        # ... nor end it: the SDK keeps alice's session, so it still counts against her cap
        # (the book forgot a session another key was refused for, and alice opened one more)
        assert http.delete(served.url, headers={"Authorization": f"Bearer {served.bob}",
                                                "Mcp-Session-Id": opened[2]}).status_code == 404
        assert open_session(http, served.url, served.alice).status_code == 429
    assert time.monotonic() - began < 30


def test_idle_sessions_expire_and_free_their_place() -> None:
    guard = GuardConfig(record_secret="owner-secret-" + "1" * 30, sessions_per_key=4, session_idle=1.0)
    with running_http(ToolFacade(None, None, agent_id="alice"), guard=guard) as url, \
            httpx.Client(timeout=30) as http:
        key = guard.record_secret or ""
        first = [open_session(http, url, key) for _ in range(4)]
        assert [r.status_code for r in first] == [200] * 4
        assert open_session(http, url, key).status_code == 429
        time.sleep(2.6)  # the SDK expires them after 1 s idle; the guard's book a second later
        assert open_session(http, url, key).status_code == 200
        gone = http.post(url, content=b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}', headers={
            "Authorization": f"Bearer {key}", "Mcp-Session-Id": first[0].headers["mcp-session-id"],
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        assert gone.status_code == 404  # expired in the SDK too, not only in the guard's count
