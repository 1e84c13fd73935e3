"""The budget of requests without a valid key: a flood of bad or missing keys (the shape of
key guessing) is refused with 429 once the shared budget is spent, while a valid key is still
checked and served from its own budget; once the budget refills a bad key is told 401 again.

In process on a ``ManualClock``, plus one real ``amem serve --http`` with a real MCP client
and the CLI's ``amem doctor`` naming the flood."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import anyio
import httpx
import pytest

from tools.ratelimit import WARN_REFUSALS

from ..http_server import http_client
from .test_rate_limit import BUDGETS, Limited, limited  # noqa: F401  (the fixture)

#: three failed requests at once, then one a second
FAILED = replace(BUDGETS, failed_auth_per_minute=60, failed_auth_burst=3)


def _get(http: httpx.Client, secret: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
    return http.get("/lcm/assemble", params={"sessionKey": "agent:alice:main", "budget": "100"},
                    headers=headers)


@pytest.mark.parametrize("limited", [FAILED], indirect=True)
def test_bad_keys_past_the_budget_get_429_and_a_valid_key_is_still_served(
        limited: Limited) -> None:
    bad = "amem_" + limited.alice_id + "_" + "x" * 43  # alice's id, a guessed secret
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        answered = [_get(http, secret).status_code
                    for secret in ("wrong", None, bad)]
        assert answered == [401, 401, 401]
        for secret in ("wrong", None, bad, "Basic x"):  # the budget is spent: any failure
            refused = _get(http, secret)
            assert refused.status_code == 429, (secret, refused.text)
            error = refused.json()["error"]
            assert error["code"] == "rate_limited" and refused.headers["retry-after"] == "1"
            assert "without a valid key" in error["message"] and error["limit"]["kind"] == "auth"
        # a valid key is checked and charged to its own bucket: served while the flood is refused
        assert _get(http, limited.alice).status_code == 200
        assert _get(http, limited.owner).status_code == 200
        limited.clock.advance(1.0)  # a token again: a bad key is told it is bad
        assert _get(http, "wrong").status_code == 401
        assert _get(http, "wrong").status_code == 429
        status = http.get("/ui/health", headers={"Authorization": f"Bearer {limited.owner}"})
    assert "without_key" in status.text


@pytest.mark.parametrize("limited", [FAILED], indirect=True)
def test_the_mcp_endpoint_refuses_a_flood_of_bad_keys_as_json_rpc_and_serves_the_key(
        limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        for _ in range(3):
            assert http.post("/mcp", json={}, headers={"Authorization": "Bearer nope"}
                             ).status_code == 401
        refused = http.post("/mcp", json={}, headers={"Authorization": "Bearer nope"})
    assert refused.status_code == 429
    body = refused.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "rate_limited"

    async def main() -> None:
        async with http_client(limited.url, [(b"Authorization", f"Bearer {limited.alice}".encode())]
                               ) as alice:
            found = await alice.call_tool("memory_search", {"query": "anything"})
            assert "error" not in found.structured_content

    anyio.run(main)


@pytest.mark.slow
def test_a_real_server_refuses_a_bad_key_flood_serves_a_real_client_and_doctor_says_so(
        tmp_path: Path) -> None:
    from ..test_cli_console import amem, base_env
    from ..test_cli_server import Server

    env = base_env(tmp_path, AMEM_SERVE_FAILED_AUTH_PER_MINUTE="1",
                   AMEM_SERVE_FAILED_AUTH_BURST="2", AMEM_SERVE_HOLD_S="0", AMEM_HEAT="false")
    issued = json.loads(amem(env, "keys", "add", "--agent", "alice", "--json").stdout)
    secret = issued["secret"]
    server = Server(env)
    try:
        root = server.url.removesuffix("/mcp")
        with httpx.Client(base_url=root, timeout=30) as http:
            codes = [http.get("/lcm/assemble", params={"sessionKey": "agent:alice:main",
                                                       "budget": "100"},
                              headers={"Authorization": f"Bearer amem_{n:012x}_guess"}).status_code
                     for n in range(WARN_REFUSALS + 2)]
        assert codes[:2] == [401, 401] and set(codes[2:]) == {429}

        async def client() -> None:
            async with http_client(server.url, [(b"Authorization", f"Bearer {secret}".encode())]
                                   ) as alice:
                added = await alice.call_tool("memory_add", {"text": "Alice keeps bees"})
                assert added.structured_content["status"] == "created"

        anyio.run(client)
        doctor = json.loads(amem(env, "doctor", "--json").stdout)
    finally:
        server.stop()
    said = [w for w in doctor["warnings"] if "without a valid key" in w]
    assert said and f"{WARN_REFUSALS}" in said[0] and "amem keys" in said[0], doctor["warnings"]
    assert secret not in json.dumps(doctor)
