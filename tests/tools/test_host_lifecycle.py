"""``POST /lcm/reset`` and ``POST /lcm/new`` over the real HTTP server (``tools.host_http``):
the host's ``/reset`` and ``/new``, tenanted like ingest, refused to read-only keys by the guard."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from lcm import LcmConfig, LcmStore
from tools import ToolFacade

from .http_server import owner_client, running_http
from .test_host_ingest import ALICE, ingest, turn


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, LcmStore]]:
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False, stateless_session_patterns=("agent:*:cron:*",),
                                        skip_stateless_sessions=False)) as lcm:
        facade = ToolFacade(None, lcm, agent_id="alice")
        with running_http(facade) as url, owner_client(url) as http:
            yield http, lcm


def test_reset_and_new_over_http(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    first = ingest(http, {"sessionKey": ALICE, "messages": turn(4)}).json()["conversation_id"]
    new = http.post("/lcm/new", json={"sessionKey": ALICE}, headers={"X-Amem-Agent": "alice"})
    assert new.status_code == 200, new.text
    assert new.json()["conversation_id"] == first and new.json()["pruned_items"] == 4
    ctx = http.get("/lcm/assemble", params={"budget": 5000}, headers={"X-Amem-Agent": "alice"}).json()
    assert ctx["items"] == [] and ctx["conversation_id"] == first
    reset = http.post("/lcm/reset", json={"cause": "host /reset"}, headers={"X-Amem-Agent": "alice"})
    assert reset.status_code == 200, reset.text
    assert reset.json()["archived_conversation_id"] == first and reset.json()["cause"] == "host /reset"
    assert lcm.conversation(ALICE).id == reset.json()["conversation_id"]  # type: ignore[union-attr]


def test_lifecycle_requests_are_checked(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    ingest(http, {"sessionKey": ALICE, "messages": turn(2)})
    bad = [("/lcm/reset", {"sessionKey": ALICE}, "bob", 403, "forbidden"),  # another agent's session
           ("/lcm/new", {"sessionKey": ALICE, "cause": "x"}, "alice", 400, "invalid_argument"),  # /new has no cause
           ("/lcm/reset", {"cause": ""}, "alice", 400, "invalid_argument"),
           ("/lcm/reset", [], "alice", 400, "invalid_argument"),
           ("/lcm/new", {"sessionKey": "agent:alice:cron:nightly"}, "alice", 400, "invalid_argument")]  # stateless
    for path, body, agent, status, code in bad:
        res = http.post(path, json=body, headers={"X-Amem-Agent": agent})
        assert (res.status_code, res.json()["error"]["code"]) == (status, code), (path, body, res.text)
    assert lcm.conversation(ALICE).id == 1 and len(lcm.assemble(ALICE, 5000).items) == 2  # type: ignore[union-attr]


def test_assemble_passes_the_hosts_cache_telemetry_to_the_debt(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    ingest(http, {"sessionKey": ALICE, "messages": turn(40)})
    budget = int(lcm.status().context_tokens / 0.85)  # over the threshold (0.75), under the budget: a debt
    res = http.get("/lcm/assemble", params={"budget": budget, "model": "m-1", "provider": "p-1",
                                             "cacheReadTokens": "900", "cacheWriteTokens": "12"},
                   headers={"X-Amem-Agent": "alice"})
    assert res.status_code == 200 and res.json()["debt_recorded"], res.text
    row = lcm.db.one("SELECT model, provider, cache_read_tokens, cache_write_tokens FROM compaction_debt")
    assert row is not None and tuple(row) == ("m-1", "p-1", 900, 12)
    bad = http.get("/lcm/assemble", params={"budget": 300, "cacheReadTokens": "-3"}, headers={"X-Amem-Agent": "alice"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "cacheReadTokens"
