"""The host's way in over the real HTTP server: ``POST /lcm/ingest`` and ``GET /lcm/assemble``
(``tools.host_http``), tenanted like the MCP routes, idempotent, replay-guarded and bounded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lcm import LcmConfig, LcmStore
from tools import ToolFacade
from tools.host_http import MAX_BODY_BYTES

from .chat_exports import chatgpt_lisbon, claude_invoice
from .http_server import owner_client, running_http

ALICE = "agent:alice:main"


def turn(n: int, start: int = 0, word: str = "lantern") -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"{word} turn {i}: the deploy of service {i} is scheduled"} for i in range(start, start + n)]


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, LcmStore]]:
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False, fresh_tail_count=8,
                                        replay_flood_threshold_external=3)) as lcm:
        facade = ToolFacade(None, lcm, agent_id="alice")
        with running_http(facade) as url, owner_client(url) as http:
            yield http, lcm


def ingest(http: httpx.Client, body: dict[str, Any], agent: str | None = "alice",
           **headers: str) -> httpx.Response:
    sent = {"X-Amem-Agent": agent} if agent is not None else {}
    return http.post("/lcm/ingest", json=body, headers={**sent, **headers})


def messages(lcm: LcmStore, key: str) -> int:
    return int(lcm.db.scalar("SELECT count(*) FROM messages m JOIN conversations c ON c.id = m.conversation_id "
                             "WHERE c.session_key = ?", (key,)))


def test_a_host_ingests_and_a_replayed_batch_stores_nothing_twice(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    first = ingest(http, {"sessionKey": ALICE, "sessionId": "s-1", "messages": turn(6)})
    assert first.status_code == 200, first.text
    assert first.json()["stored"] == 6 and first.json()["session_key"] == ALICE
    again = ingest(http, {"sessionKey": ALICE, "sessionId": "s-1", "messages": turn(6)})
    assert again.status_code == 200 and (again.json()["stored"], again.json()["skipped_duplicates"]) == (0, 6)
    grown = ingest(http, {"sessionKey": ALICE, "messages": turn(8)})  # the same window, two more
    assert (grown.json()["stored"], grown.json()["skipped_duplicates"]) == (2, 6)
    assert messages(lcm, ALICE) == 8
    # without a key the request writes to the agent's own default family
    assert ingest(http, {"messages": turn(2, word="kettle")}).json()["session_key"] == ALICE


def test_another_agents_session_is_forbidden_and_untouched(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    ingest(http, {"sessionKey": ALICE, "messages": turn(2)})
    for res in (ingest(http, {"sessionKey": ALICE, "messages": turn(2, 10)}, agent="bob"),
                ingest(http, {"messages": turn(2, 10)}, agent="bob", **{"X-Amem-Session": ALICE}),
                ingest(http, {"sessionKey": "agent:alice:work", "messages": turn(2, 10)}, agent="mallory"),
                http.get("/lcm/assemble", params={"budget": 1000, "sessionKey": ALICE}, headers={"X-Amem-Agent": "bob"})):
        assert res.status_code == 403, res.text
        assert res.json()["error"]["code"] == "forbidden"
    assert messages(lcm, ALICE) == 2 and messages(lcm, "agent:alice:work") == 0
    # bob's own key works, and reads nothing of alice's
    own = ingest(http, {"sessionKey": "agent:bob:notes", "messages": turn(2, 20)}, agent="bob")
    assert own.status_code == 200 and own.json()["stored"] == 2
    ctx = http.get("/lcm/assemble", params={"budget": 5000, "sessionKey": "agent:bob:notes"},
                   headers={"X-Amem-Agent": "bob"}).json()
    assert [it["content"][:12] for it in ctx["items"]] == ["lantern turn"] * 2 and "turn 0:" not in str(ctx)


def test_a_conversation_without_a_key_is_adopted_by_no_agent(served: tuple[httpx.Client, LcmStore]) -> None:
    # a script on the library may write a conversation by session id alone; lcm lets a key
    # without a conversation adopt it, which over the server would give it to any agent
    http, lcm = served
    lcm.ingest(None, [{"role": "user", "content": "keyless payroll figures 7731"}], session_id="host-run-9")
    res = ingest(http, {"sessionKey": "agent:bob:fresh", "sessionId": "host-run-9",
                        "messages": turn(2, word="kettle")}, agent="bob")
    assert res.status_code == 403 and res.json()["error"]["field"] == "sessionId", res.text
    assert "conversation 1" not in res.text  # nothing about the conversation itself
    assert lcm.conversation(session_id="host-run-9").session_key is None  # type: ignore[union-attr]
    assert messages(lcm, "agent:bob:fresh") == 0
    # the key's own conversation keeps following the host's new ids, as before
    assert ingest(http, {"sessionKey": "agent:bob:fresh", "messages": turn(2)}, agent="bob").status_code == 200
    moved = ingest(http, {"sessionKey": "agent:bob:fresh", "sessionId": "host-run-9",
                          "messages": turn(2, 2)}, agent="bob")
    assert moved.status_code == 200 and moved.json()["stored"] == 2, moved.text
    assert "7731" not in str(http.get("/lcm/assemble", params={"budget": 5000, "sessionKey": "agent:bob:fresh"},
                                      headers={"X-Amem-Agent": "bob"}).json())


def test_bad_requests_are_clear_errors_and_store_nothing(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    cases: list[tuple[Any, int, str, str]] = [
        ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "invalid_argument", "messages[0].role"),
        ({"messages": []}, 400, "invalid_argument", "messages"),
        ({"messages": turn(1), "agentId": "bob"}, 400, "invalid_argument", "agentId"),
        ({"messages": turn(1), "sessionId": "a\nb"}, 400, "invalid_argument", "sessionId"),
        ({"messages": turn(1), "afterTurn": "yes"}, 400, "invalid_argument", "afterTurn"),
        ([1, 2], 400, "invalid_argument", "body"),
        ({"messages": [{"role": "user", "content": "buy now"}] * 4}, 409, "replay_flood", "messages"),
    ]
    for body, status, code, field in cases:
        res = ingest(http, body)
        assert res.status_code == status, (body, res.text)
        assert res.json()["error"]["code"] == code and (res.json()["error"]["field"] or "") == field
    res = http.post("/lcm/ingest", content=b"{not json", headers={"X-Amem-Agent": "alice", "Content-Type": "application/json"})
    assert res.status_code == 400 and res.json()["error"]["field"] == "body"
    assert lcm.db.scalar("SELECT count(*) FROM messages") == 0
    huge = b'{"messages": [{"role": "user", "content": "' + b"x" * MAX_BODY_BYTES + b'"}]}'
    res = http.post("/lcm/ingest", content=huge, headers={"X-Amem-Agent": "alice", "Content-Type": "application/json"})
    assert res.status_code == 413 and res.json()["error"]["code"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"y" * 65536
        yield b'"}]}'

    res = http.post("/lcm/ingest", content=chunks(), headers={"X-Amem-Agent": "alice", "Content-Type": "application/json"})
    assert res.status_code == 413
    bad = http.get("/lcm/assemble", params={"budget": "-3"}, headers={"X-Amem-Agent": "alice"})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "budget"
    # digits str.isdigit takes and int refuses ('²': a 500) or reads ('٣' as 3): refused by name
    for odd, field in (("²", "budget"), ("١٠٠٠", "budget"), ("²", "contextWindow"), ("٣", "cacheReadTokens")):
        params = {"budget": "1000", field: odd}
        bad = http.get("/lcm/assemble", params=params, headers={"X-Amem-Agent": "alice"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == field, (odd, field, bad.text)
    assert lcm.db.scalar("SELECT count(*) FROM messages") == 0


def test_a_chat_apps_export_posted_is_refused_naming_the_command_that_loads_it(
        served: tuple[httpx.Client, LcmStore]) -> None:
    # an export is many conversations, each under a key of its own, and often 100 MB: the
    # route takes one session's turns, and says which command loads the file instead
    http, lcm = served
    for body, field in (([chatgpt_lisbon()], "body"), (claude_invoice(), "body"),
                        ({"messages": [claude_invoice()]}, "messages[0]"),
                        ({"sessionKey": ALICE, "messages": [*turn(2), chatgpt_lisbon()]}, "messages[2]")):
        res = ingest(http, body)  # type: ignore[arg-type]
        assert res.status_code == 400, res.text
        error = res.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_argument", field)
        assert "data export" in error["message"] and "amem lcm ingest FILE" in error["message"], error
    assert lcm.db.scalar("SELECT count(*) FROM messages") == 0
    # a message that merely has such a field is a message
    own = ingest(http, {"sessionKey": ALICE, "messages": [{"role": "user", "content": "the mapping is done",
                                                           "mapping": {}}]})
    assert "data export" not in own.text
    # one over the body limit (8 MiB) is refused before it is read, saying the same
    big = b'[{"title": "x", "mapping": {' + b" " * MAX_BODY_BYTES + b"}}]"
    res = http.post("/lcm/ingest", content=big, headers={"X-Amem-Agent": "alice", "Content-Type": "application/json"})
    assert res.status_code == 413 and "amem lcm ingest FILE" in res.json()["error"]["message"]


def test_the_debt_is_paid_after_an_ingested_turn(served: tuple[httpx.Client, LcmStore]) -> None:
    http, lcm = served
    ingest(http, {"messages": [*turn(100)], "afterTurn": False})
    tokens = lcm.assemble(ALICE, 100000).total_tokens
    ctx = http.get("/lcm/assemble", params={"budget": int(tokens * 1.2)}, headers={"X-Amem-Agent": "alice"})
    assert ctx.status_code == 200 and ctx.json()["debt_recorded"]  # deferred: owed, not paid
    res = ingest(http, {"messages": turn(2, 100)})
    assert res.status_code == 200 and res.json()["compaction_debt"] and res.json()["after_turn"] == "scheduled"
    deadline = time.monotonic() + 20
    while lcm.db.scalar("SELECT count(*) FROM compaction_debt") and time.monotonic() < deadline:
        time.sleep(0.05)  # (status' pending_debt leaves out a debt being paid: count the rows)
    assert lcm.db.scalar("SELECT count(*) FROM compaction_debt") == 0
    assert lcm.db.scalar("SELECT count(*) FROM summaries") >= 1
    assert lcm.assemble(ALICE, 100000).total_tokens < tokens


class SlowLcm:
    """A conversation store whose ingest blocks until released (a stand-in for a stalled disk)."""

    config = LcmConfig()

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.calls = 0

    def ingest(self, session_key: str, messages: list[Any], *, session_id: str | None = None) -> Any:
        self.calls += 1
        self.release.wait(10)
        raise RuntimeError("released")


def test_a_stalled_ingest_answers_timeout_at_the_deadline() -> None:
    from tools.runner import CallLimits

    from .overruns import overruns

    slow = SlowLcm()
    facade = ToolFacade(None, slow, agent_id="alice")
    with overruns() as ended:
        try:
            with running_http(facade, CallLimits(timeout=0.5, workers=2, per_agent=1)) as url, \
                    owner_client(url) as http:
                began = time.monotonic()
                res = ingest(http, {"messages": turn(2)})
                assert res.status_code == 504 and res.json()["error"]["code"] == "timeout"
                assert time.monotonic() - began < 5 and slow.calls == 1
        finally:
            slow.release.set()
        assert ended.wait_for(1)  # the stalled call ended (and logged) inside the test


def test_a_server_without_the_conversation_store_says_so() -> None:
    with running_http(ToolFacade(None, None, agent_id="alice")) as url, \
            owner_client(url) as http:
        for res in (ingest(http, {"messages": turn(2)}),
                    http.get("/lcm/assemble", params={"budget": 100}, headers={"X-Amem-Agent": "alice"})):
            assert res.status_code == 503 and res.json()["error"]["code"] == "unavailable"
