"""Request budgets through the real HTTP server: a key over its budget is refused (429 with
``Retry-After`` on the host routes, a JSON-RPC error an MCP client shows on ``/mcp``) while
another key is served at once; a refused write writes nothing and the session goes on; the
owner's status counts the refusals per key, never a secret; budgets off refuse nothing.

The budgets run on a ``ManualClock``: time moves when a test says, never by sleeping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore
from tools.mcp_server import OwnerAccess
from tools.ratelimit import RateLimits

from ..http_server import OWNER_SECRET, http_client, running_http

#: small budgets, so a test reaches them in a few requests: a write a second, bursts of 3;
#: refusals answered at once (holding them back is tested on its own)
BUDGETS = RateLimits(writes_per_minute=60, write_burst=3, reads_per_minute=120, read_burst=6,
                     owner_factor=10, hold_s=0)


@dataclass
class Limited:
    url: str
    root: str
    memory: MemoryStore
    lcm: Any
    clock: ManualClock
    alice: str
    bob: str
    owner: str
    alice_id: str
    bob_id: str


def _owner_report(name: str, agent: str, clean: bool) -> dict[str, Any]:
    return {"report": name, "agent": agent}


@pytest.fixture
def limited(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Limited]:
    from lcm import LcmConfig, LcmStore

    budgets = getattr(request, "param", BUDGETS)

    keys = KeyStore(tmp_path / "keys.json")
    alice_record, alice = keys.add(agent="alice")
    bob_record, bob = keys.add(agent="bob")
    _, owner = keys.add(agent=None, owner=True)
    clock = ManualClock()
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as lcm:
        guard = GuardConfig(keys=keys, record_secret=OWNER_SECRET, rate_limits=budgets)
        with running_http(ToolFacade(memory, lcm, agent_id="alice"), guard=guard, clock=clock,
                          owner=OwnerAccess(_owner_report)) as url:
            yield Limited(url, url.removesuffix("/mcp"), memory, lcm, clock, alice, bob, owner,
                          alice_record.id, bob_record.id)


def _auth(secret: str) -> list[tuple[bytes, bytes]]:
    return [(b"Authorization", f"Bearer {secret}".encode())]


#: notes that share no word, so that none folds into another (each add is one note)
NOTES = ["Alice drinks green tea every morning", "The staging database moved to db-2",
         "Porto trip planned for the second week of May", "Her bicycle has a squeaky chain",
         "Quarterly taxes are due on the fifteenth", "Wren is the boat moored at pier nine",
         "Sourdough starter needs feeding twice daily", "Umbrellas left at the office lobby",
         "Violin lessons resume after the holidays", "Kestrels nest under the old bridge",
         "Lanterns for the garden arrived broken", "Marathon training starts in January"]


def _add(n: int) -> dict[str, Any]:
    return {"text": NOTES[n]}


def test_an_mcp_client_over_its_write_budget_is_told_when_to_retry_while_another_key_is_served(
        limited: Limited) -> None:
    async def main() -> None:
        async with http_client(limited.url, _auth(limited.alice)) as alice, \
                http_client(limited.url, _auth(limited.bob)) as bob:
            for n in range(3):  # the burst
                result = await alice.call_tool("memory_add", _add(n))
                assert "error" not in result.structured_content, result.structured_content
            with pytest.raises(MCPError) as refused:
                await alice.call_tool("memory_add", _add(3))
            error = refused.value.data
            assert error["code"] == "rate_limited" and error["retry_after_s"] == 1
            assert error["limit"] == {"kind": "write", "per_minute": 60, "burst": 3, "cost": 1}
            said = str(refused.value)
            assert "retry in 1 s" in said and "60 a minute" in said and "nothing of this" in said
            # bob is served at once, writes and reads, while alice is held back
            for n in range(3):
                result = await bob.call_tool("memory_add", _add(6 + n))
                assert "error" not in result.structured_content, result.structured_content
            assert (await bob.call_tool("memory_search", {"query": "sourdough"})).structured_content["results"]
            # alice's reads are a budget of their own: she may still search what she wrote
            found = await alice.call_tool("memory_search", {"query": "Porto trip"})
            assert found.structured_content["results"]
            # the refused add wrote nothing; the accepted ones are all there
            assert limited.memory.count(agent_id="alice") == 3
            # once the wait has passed, the same session goes on
            limited.clock.advance(1.0)
            result = await alice.call_tool("memory_add", _add(3))
            assert "error" not in result.structured_content, result.structured_content
            assert limited.memory.count(agent_id="alice") == 4

    anyio.run(main)


def ingest(http: httpx.Client, secret: str, agent: str, n: int) -> httpx.Response:
    """One host ingest of one message as ``agent`` with its key's ``secret``."""
    return http.post("/lcm/ingest", json={"sessionKey": f"agent:{agent}:main", "messages": [
        {"role": "user", "content": f"{agent} message {n}"}]},
        headers={"Authorization": f"Bearer {secret}"})


def test_a_host_route_over_budget_answers_429_with_retry_after(limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        assert [ingest(http, limited.alice, "alice", n).status_code for n in range(3)] == [200] * 3
        refused = ingest(http, limited.alice, "alice", 3)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        error = refused.json()["error"]
        assert error["code"] == "rate_limited" and error["retry_after_s"] == 1
        assert f"key {limited.alice_id} (agent 'alice')" in error["message"]
        assert ingest(http, limited.bob, "bob", 0).status_code == 200  # bob is not held back
        # a read is not a write: alice's context is still served
        assembled = http.get("/lcm/assemble", params={"sessionKey": "agent:alice:main", "budget": "4000"},
                             headers={"Authorization": f"Bearer {limited.alice}"})
        assert assembled.status_code == 200, assembled.text
        # the refused batch stored nothing
        stored = json.dumps(assembled.json())
        assert "alice message 2" in stored and "alice message 3" not in stored
        limited.clock.advance(1.0)
        assert ingest(http, limited.alice, "alice", 3).status_code == 200


def test_the_owners_status_counts_refusals_per_key_and_shows_no_secret(limited: Limited) -> None:
    async def flood_then_status() -> dict[str, Any]:
        async with http_client(limited.url, _auth(limited.alice)) as alice:
            for n in range(5):
                try:
                    await alice.call_tool("memory_add", _add(n))
                except MCPError:
                    pass
        async with http_client(limited.url, _auth(limited.owner)) as owner:
            return dict(json.loads((await owner.read_resource("amem://owner/status")).contents[0].text))

    status = anyio.run(flood_then_status)
    budgets = status["rate_limit"]
    assert budgets["on"] is True and budgets["refused"] == 2
    alice = budgets["keys"][limited.alice_id]
    assert (alice["agent"], alice["writes"], alice["writes_refused"]) == ("alice", 3, 2)
    assert "last_refused" in alice
    assert limited.bob_id not in budgets["keys"]  # bob sent nothing
    text = json.dumps(status)
    for secret in (limited.alice, limited.bob, limited.owner, OWNER_SECRET):
        assert secret not in text


def test_budgets_off_refuse_nothing(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    _, alice = keys.add(agent="alice")
    off = RateLimits(enabled=False, write_burst=1, read_burst=1)
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice") as memory:
        guard = GuardConfig(keys=keys, rate_limits=off)
        with running_http(ToolFacade(memory, None, agent_id="alice"), guard=guard,
                          clock=ManualClock()) as url:
            async def main() -> None:
                async with http_client(url, _auth(alice)) as client:
                    for n in range(12):
                        result = await client.call_tool("memory_add", _add(n))
                        assert "error" not in result.structured_content
                        await client.call_tool("memory_search", {"query": "boat"})

            anyio.run(main)
        assert memory.count(agent_id="alice") == 12


def test_the_owners_health_page_shows_the_refusals_and_an_agents_not_another_keys(limited: Limited) -> None:
    with httpx.Client(base_url=limited.root, timeout=30) as http:
        for _ in range(8):  # alice reads past her burst of 6
            http.get("/lcm/assemble", params={"sessionKey": "agent:alice:main", "budget": "100"},
                     headers={"Authorization": f"Bearer {limited.alice}"})
        owner = http.get("/ui/health", headers={"Authorization": f"Bearer {limited.owner}"})
        assert owner.status_code == 200, owner.text
        assert "rate limit" in owner.text and limited.alice_id in owner.text
        assert "reads_refused" in owner.text
        for secret in (limited.alice, limited.owner):
            assert secret not in owner.text
        agent = http.get("/ui/health", headers={"Authorization": f"Bearer {limited.bob}"})
        assert agent.status_code == 200, agent.text
        # an agent's page shows its own key's budget (tests/tools/security/test_rate_reports.py)
        assert limited.alice_id not in agent.text and limited.bob_id in agent.text, agent.text


@pytest.mark.parametrize("limited", [replace(BUDGETS, hold_s=0.6)], indirect=True)
def test_a_refusal_is_held_back_while_another_key_is_served_at_once(limited: Limited) -> None:
    """A client looping on refusals waits for each one (up to ``hold_s``), so it cannot flood
    the server with refused requests; another key is answered meanwhile without waiting."""
    import threading
    import time

    with httpx.Client(base_url=limited.root, timeout=30) as http:
        assert [ingest(http, limited.alice, "alice", n).status_code for n in range(3)] == [200] * 3
        held: list[float] = []

        def refused() -> None:
            began = time.monotonic()
            assert ingest(http, limited.alice, "alice", 3).status_code == 429
            held.append(time.monotonic() - began)

        waiting = threading.Thread(target=refused)
        waiting.start()
        time.sleep(0.1)  # alice's refusal is being held
        with httpx.Client(base_url=limited.root, timeout=30) as other:
            began = time.monotonic()
            assert ingest(other, limited.bob, "bob", 0).status_code == 200
            bob_took = time.monotonic() - began
        waiting.join()
    assert held[0] >= 0.55, held  # the wait named (1 s) capped at hold_s
    assert bob_took < 0.45, bob_took
