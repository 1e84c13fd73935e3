"""``POST /lcm/reset``, ``/lcm/new`` and ``/lcm/rotate`` over the real HTTP server (``tools.host_http``):
the host's ``/reset`` and ``/new``, tenanted like ingest, refused to read-only keys by the guard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


def test_rotate_over_http_is_a_dry_run_until_apply(tmp_path: Path) -> None:
    cfg = LcmConfig(log_file_enabled=False, rotate_backup_dir=str(tmp_path / "backups"), fresh_tail_count=4,
                    leaf_min_fanout=2, leaf_chunk_tokens=150)
    with LcmStore(":memory:", cfg) as lcm, running_http(ToolFacade(None, lcm, agent_id="alice")) as url, \
            owner_client(url) as http:
        conv = ingest(http, {"sessionKey": ALICE, "messages": turn(30)}).json()["conversation_id"]
        dry = http.post("/lcm/rotate", json={}, headers={"X-Amem-Agent": "alice"})
        assert dry.status_code == 200, dry.text
        plan = dry.json()
        assert (plan["applied"], plan["conversation_id"], plan["tail_items"], plan["compactable_messages"]) == \
            (False, conv, 4, 26)
        assert not (tmp_path / "backups").exists() and lcm.db.scalar("SELECT count(*) FROM summaries") == 0
        done = http.post("/lcm/rotate", json={"sessionKey": ALICE, "apply": True}, headers={"X-Amem-Agent": "alice"})
        assert done.status_code == 200, done.text
        body = done.json()
        assert body["applied"] and body["summaries_made"] > 0 and body["token_delta"] < 0
        assert body["backup"]["counts"]["messages"] == 30 and len(list((tmp_path / "backups").iterdir())) == 1
        assert lcm.conversation(ALICE).id == conv  # type: ignore[union-attr]
        for body_, field in (({"apply": "yes"}, "apply"), ({"maxRounds": 0}, "maxRounds"), ({"restore": "/etc/x"}, "restore")):
            bad = http.post("/lcm/rotate", json=body_, headers={"X-Amem-Agent": "alice"})
            assert (bad.status_code, bad.json()["error"]["field"]) == (400, field), bad.text
        other = http.post("/lcm/rotate", json={"sessionKey": ALICE}, headers={"X-Amem-Agent": "bob"})
        assert other.status_code == 403
