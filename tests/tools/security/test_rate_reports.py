"""What the budgets' refusals tell their readers: the owner's doctor (and status) warns of a
key refused many times in the last window, by key id and with what to do, never a secret; an
agent's own health page shows its own counts and no other key's."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx

from tools.ratelimit import WARN_REFUSALS, WARN_WINDOW_S

from ..http_server import OWNER_SECRET, http_client
from .test_rate_limit import Limited, limited  # noqa: F401  (the fixture)


def _flood_reads(http: httpx.Client, secret: str, n: int) -> list[int]:
    return [http.get("/lcm/assemble", params={"sessionKey": "agent:alice:main", "budget": "100"},
                     headers={"Authorization": f"Bearer {secret}"}).status_code for _ in range(n)]


def _owner_reads(limited: Limited) -> tuple[dict[str, Any], dict[str, Any]]:
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with http_client(limited.url, [(b"Authorization",
                                              f"Bearer {limited.owner}".encode())]) as owner:
            doctor = json.loads((await owner.read_resource("amem://owner/doctor")).contents[0].text)
            status = json.loads((await owner.read_resource("amem://owner/status")).contents[0].text)
            return doctor, status

    return anyio.run(main)


def test_doctor_and_status_warn_of_a_key_refused_often_in_the_last_window(limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        codes = _flood_reads(http, limited.alice, 6 + WARN_REFUSALS)  # the burst, then refusals
        assert codes.count(429) == WARN_REFUSALS
        _flood_reads(http, limited.bob, 7)  # one refusal: no finding
    doctor, status = _owner_reads(limited)
    found = [w for w in doctor["warnings"] if limited.alice_id in w]
    assert len(found) == 1, doctor["warnings"]
    said = found[0]
    assert "'alice'" in said and f"{WARN_REFUSALS} requests" in said
    assert "Retry-After" in said and "amem keys revoke" in said and "[serve]" in said
    assert not any(limited.bob_id in w for w in doctor["warnings"])
    assert status["rate_limit"]["warnings"] == found
    assert status["rate_limit"]["keys"][limited.alice_id]["refused_recently"] == WARN_REFUSALS
    for secret in (limited.alice, limited.bob, limited.owner, OWNER_SECRET):
        assert secret not in json.dumps(doctor) and secret not in json.dumps(status)
    limited.clock.advance(WARN_WINDOW_S + 60)  # the window has passed: nothing to warn of now
    doctor, status = _owner_reads(limited)
    assert not any(limited.alice_id in w for w in doctor["warnings"])
    assert status["rate_limit"]["keys"][limited.alice_id]["reads_refused"] == WARN_REFUSALS


def test_an_agents_health_page_shows_its_own_refusals_and_no_other_keys(limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        assert _flood_reads(http, limited.alice, 9).count(429) == 3
        _flood_reads(http, limited.bob, 2)
        limited.clock.advance(1.0)  # a read again: her own page
        alice = http.get("/ui/health", headers={"Authorization": f"Bearer {limited.alice}"})
        bob = http.get("/ui/health", headers={"Authorization": f"Bearer {limited.bob}"})
    assert alice.status_code == 200 and bob.status_code == 200
    assert limited.alice_id in alice.text and limited.bob_id not in alice.text
    assert "<dt>reads_refused</dt><dd>3</dd>" in alice.text
    assert "120 a minute, bursts of 6" in alice.text  # her read budget, beside the counts
    assert limited.bob_id in bob.text and limited.alice_id not in bob.text
    for page in (alice.text, bob.text):
        for secret in (limited.alice, limited.bob, limited.owner):
            assert secret not in page


def _agent_status(limited: Limited, secret: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``memory_status`` through a real MCP client with ``secret``, and ``amem://status``."""
    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with http_client(limited.url, [(b"Authorization", f"Bearer {secret}".encode())]) as mcp:
            called = await mcp.call_tool("memory_status", {})
            assert not called.is_error, called
            resource = json.loads((await mcp.read_resource("amem://status")).contents[0].text)
            return called.structured_content, resource

    return anyio.run(main)


def test_an_agents_memory_status_shows_its_own_budget_and_refusals_and_no_other_keys(
        limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        assert _flood_reads(http, limited.alice, 9).count(429) == 3
        _flood_reads(http, limited.bob, 2)
    limited.clock.advance(60.0)  # her read budget refilled: the status call itself is served
    status, resource = _agent_status(limited, limited.alice)
    own = status["rate_limit"]
    assert own["key"] == limited.alice_id and own["on"] is True
    assert own["reads_refused"] == 3 and own["refused_recently"] == 3
    assert own["budgets"]["reads"] == "120 a minute, bursts of 6"
    assert any("3 of your requests were refused" in d for d in status["degraded"])
    assert resource["rate_limit"]["key"] == limited.alice_id
    said = json.dumps([status, resource])
    assert limited.bob_id not in said
    for secret in (limited.alice, limited.bob, limited.owner):
        assert secret not in said
    bob, _ = _agent_status(limited, limited.bob)
    assert bob["rate_limit"]["key"] == limited.bob_id and bob["rate_limit"]["reads_refused"] == 0
    assert not any("refused" in d for d in bob["degraded"])
    assert limited.alice_id not in json.dumps(bob)
