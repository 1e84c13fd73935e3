"""A request is charged what it writes (``tools.ratecost``): an ingest of many messages takes
as many write tokens, capped at the burst so that the largest legal request still passes when
the bucket is full; every write of the server (tools and routes) has its cost said in one
table, so a new one cannot slip in uncounted."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from amem.kernel.clock import ManualClock
from tools import ToolFacade
from tools.http_guard import Guard
from tools.mcp_server import http_app
from tools.ratecost import WRITES, request_cost
from tools.ratelimit import RateLimiter

from .test_rate_limit import BUDGETS, Limited, limited  # noqa: F401  (the fixture)

READS = frozenset({"memory_search"})


def _call(name: str, arguments: dict[str, object]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}}).encode()


def _ingest_body(n: int) -> bytes:
    return json.dumps({"sessionKey": "agent:a:main", "messages": [
        {"role": "user", "content": f"m{i}"} for i in range(n)]}).encode()


@pytest.mark.parametrize(("method", "path", "body", "cost"), [
    ("POST", "/mcp", _call("memory_add", {"text": "x"}), ("write", 1)),
    ("POST", "/mcp", _call("memory_search", {"query": "x"}), ("read", 1)),
    ("POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}', ("read", 1)),
    ("POST", "/mcp", b"[" + _call("memory_add", {}) + b"," + _call("memory_delete", {}) + b"]",
     ("write", 2)),
    ("POST", "/mcp", b"not json tools/call", ("read", 1)),
    ("DELETE", "/mcp", b"", None),
    ("POST", "/lcm/ingest", _ingest_body(500), ("write", 500)),
    ("POST", "/lcm/ingest", b'{"messages": "not a list"}', ("write", 1)),
    ("POST", "/lcm/ingest", b"{broken", ("write", 1)),
    ("POST", "/lcm/ingest", _ingest_body(0), ("write", 1)),
    ("POST", "/lcm/reset", b"{}", ("write", 1)),
    ("GET", "/lcm/assemble", b"", ("read", 1)),
])
def test_what_a_request_costs(method: str, path: str, body: bytes,
                              cost: tuple[str, int] | None) -> None:
    assert request_cost(method, path, body, mcp_path="/mcp", read_tools=READS) == cost


def test_every_write_of_the_server_says_its_cost() -> None:
    facade = ToolFacade(None, None, agent_id="x")
    writers = {tool.name for tool in facade.registry if tool.writes}
    app = http_app(facade)
    assert isinstance(app, Guard)
    starlette: Any = app.app
    routes = {f"{method} {route.path}" for route in starlette.routes
              for method in (getattr(route, "methods", None) or ()) if method not in ("GET", "HEAD")}
    routes.discard("POST /mcp")  # its tools are the writers above
    routes.discard("DELETE /mcp")  # closing a session is free
    assert writers and routes
    assert writers | routes == set(WRITES), "a write must say what it costs (tools.ratecost.WRITES)"


def test_a_request_larger_than_the_burst_takes_the_whole_bucket_not_forever() -> None:
    clock = ManualClock()
    limiter = RateLimiter(replace(BUDGETS, write_burst=3), clock)  # a write a second
    assert limiter.check("k", "write", cost=500) is None  # full: the largest request passes
    refused = limiter.check("k", "write")
    assert refused is not None and refused.retry_after == pytest.approx(1.0)
    clock.advance(2.0)
    refused = limiter.check("k", "write", cost=500)  # 2 of 3 tokens: waits for a full bucket
    assert refused is not None and refused.retry_after == pytest.approx(1.0) and refused.cost == 3
    clock.advance(1.0)
    assert limiter.check("k", "write", cost=500) is None


def _ingest(http: httpx.Client, secret: str, n: int, first: int = 0,
            agent: str = "alice") -> httpx.Response:
    return http.post("/lcm/ingest", content=json.dumps({
        "sessionKey": f"agent:{agent}:main",
        "messages": [{"role": "user", "content": f"{agent} message {first + i}"} for i in range(n)]}),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"})


def test_an_ingest_is_charged_per_message_through_the_server(limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        assert _ingest(http, limited.alice, 2).status_code == 200  # 2 of the burst of 3
        refused = _ingest(http, limited.alice, 2, first=2)
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["limit"]["cost"] == 2 and "counts as 2" in error["message"]
        assert _ingest(http, limited.alice, 1, first=2).status_code == 200  # the token left
        limited.clock.advance(3.0)  # full again: 40 messages (over the burst) still pass, once
        assert _ingest(http, limited.alice, 40, first=3).status_code == 200
        assert _ingest(http, limited.alice, 1, first=43).status_code == 429
        assert _ingest(http, limited.bob, 40, agent="bob").status_code == 200  # bob's bucket is his own
