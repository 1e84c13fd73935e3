"""LLMClient against httpx.MockTransport: payloads, retries, the ladder, the breaker."""

from __future__ import annotations

import json
import logging
import random
from typing import Any, Callable

import httpx
import pytest

from amem.errors import LLMError, LLMResponseError
from amem.llm import LLMClient, LLMConfig

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["keywords", "category"],
    "properties": {
        "keywords": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "category": {"type": "string", "enum": ["Technical", "General"]},
    },
}
GOOD = {"keywords": ["qdrant", "vectors"], "category": "Technical"}


class FakeTime:
    """A monotonic clock and a sleep that only moves it (no real waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def envelope(content: str | None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


def ok(content: str) -> httpx.Response:
    return httpx.Response(200, json=envelope(content))


Handler = Callable[[httpx.Request], httpx.Response]


def make(replies: list[httpx.Response | Exception | Handler], **cfg: Any) -> tuple[LLMClient, list[dict[str, Any]], FakeTime]:
    """A client whose transport answers with ``replies`` in order; records each request body."""
    seen: list[dict[str, Any]] = []
    queue = list(replies)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        seen[-1]["_auth"] = request.headers.get("authorization")
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        if callable(item):
            return item(request)
        return item

    ft = FakeTime()
    config = LLMConfig(**{"base_url": "http://llm.test/v1", "model": "m1", "api_key": "k", **cfg})
    client = LLMClient(config, http=httpx.Client(transport=httpx.MockTransport(handler)), clock=ft.clock,
                       sleep=ft.sleep, rng=random.Random(7))
    return client, seen, ft


def test_complete_sends_openai_payload_and_returns_text() -> None:
    client, seen, ft = make([ok("hello there")])
    assert client.complete("sys", "usr", max_tokens=50) == "hello there"
    body = seen[0]
    assert body["model"] == "m1"
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}]
    assert body["temperature"] == 0.0 and body["max_tokens"] == 50 and "response_format" not in body
    assert body["_auth"] == "Bearer k"
    assert ft.sleeps == []


def test_complete_json_uses_json_schema_first_and_checks_shape() -> None:
    client, seen, _ = make([ok(json.dumps(GOOD))])
    assert client.complete_json("sys", "usr", schema=SCHEMA, name="enrichment") == GOOD
    fmt = seen[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "enrichment"
    assert fmt["json_schema"]["schema"] == SCHEMA
    assert '"keywords"' in seen[0]["messages"][0]["content"]  # the schema is also in the prompt


def test_ladder_downgrades_on_rejection_and_remembers_the_rung(caplog: pytest.LogCaptureFixture) -> None:
    reject = httpx.Response(400, json={"error": {"message": "response_format json_schema is not supported"}})
    reject_obj = httpx.Response(400, json={"error": {"message": "Unknown field: response_format"}})
    fenced = "Here you go:\n```json\n{\"keywords\": [\"a\",], \"category\": \"General\",}\n```"
    client, seen, ft = make([reject, reject_obj, ok(fenced), ok(json.dumps(GOOD))])
    with caplog.at_level(logging.WARNING, logger="amem.llm.client"):
        assert client.complete_json("s", "u", schema=SCHEMA, name="n") == {"keywords": ["a"], "category": "General"}
    assert [b.get("response_format", {}).get("type") for b in seen] == ["json_schema", "json_object", None]
    assert client.rung == "prompt"
    assert sum("rejected response_format" in r.message for r in caplog.records) == 2
    # the next call starts at the rung that worked: one request, no response_format
    assert client.complete_json("s", "u", schema=SCHEMA, name="n") == GOOD
    assert len(seen) == 4 and "response_format" not in seen[3]
    assert ft.sleeps == []  # downgrades are not retries
    assert client.breaker.failures == 0


def test_json_object_rung_is_used_when_only_json_schema_is_rejected() -> None:
    reject = httpx.Response(400, json={"error": {"message": "'json_schema' not supported"}})
    client, seen, _ = make([reject, ok(json.dumps(GOOD))])
    assert client.complete_json("s", "u", schema=SCHEMA, name="n") == GOOD
    assert seen[1]["response_format"] == {"type": "json_object"}
    assert client.rung == "json_object"


def test_500_is_retried_with_growing_jittered_backoff_then_fails() -> None:
    client, seen, ft = make([httpx.Response(500, text="boom")] * 4, max_retries=3, backoff_base=0.5,
                            backoff_max=1.5, jitter=0.25)
    with pytest.raises(LLMError, match=r"after 4 attempt\(s\): HTTP 500: boom"):
        client.complete("s", "u")
    assert len(seen) == 4
    caps = [0.5, 1.0, 1.5]
    assert len(ft.sleeps) == 3
    for slept, cap in zip(ft.sleeps, caps):
        assert cap * 0.75 <= slept <= cap
    assert len(set(ft.sleeps)) == 3


def test_429_then_ok_honours_retry_after() -> None:
    client, seen, ft = make([httpx.Response(429, headers={"Retry-After": "2"}, json={"error": {}}),
                             ok("fine")])
    assert client.complete("s", "u") == "fine"
    assert ft.sleeps == [2.0]
    assert client.breaker.failures == 0  # the success reset the count


def test_unreasonable_retry_after_is_ignored_for_backoff(caplog: pytest.LogCaptureFixture) -> None:
    client, _, ft = make([httpx.Response(503, headers={"Retry-After": "86400"}), ok("fine")],
                         backoff_base=0.1, jitter=0.0)
    with caplog.at_level(logging.WARNING):
        assert client.complete("s", "u") == "fine"
    assert ft.sleeps == [0.1]
    assert any("ignoring Retry-After" in r.message for r in caplog.records)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(status: int) -> None:
    client, seen, ft = make([httpx.Response(status, json={"error": {"message": "nope"}})] * 3)
    with pytest.raises(LLMError, match=f"HTTP {status} \\(not retried\\)"):
        client.complete("s", "u")
    assert len(seen) == 1 and ft.sleeps == []


@pytest.mark.parametrize("status", [408, 409, 502, 503])
def test_retryable_statuses(status: int) -> None:
    client, seen, ft = make([httpx.Response(status), ok("done")], jitter=0.0, backoff_base=0.2)
    assert client.complete("s", "u") == "done"
    assert len(seen) == 2 and ft.sleeps == [0.2]


def test_connection_errors_and_timeouts_are_retried() -> None:
    client, seen, ft = make([httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ok("up")], max_retries=2)
    assert client.complete("s", "u") == "up"
    assert len(seen) == 3 and len(ft.sleeps) == 2


def test_timeouts_exhaust_retries_with_a_clear_message() -> None:
    client, seen, _ = make([httpx.ReadTimeout("slow")] * 3, max_retries=2, read_timeout=0.5)
    with pytest.raises(LLMError, match=r"timed out \(ReadTimeout, connect 5.0 s, read 0.5 s\)"):
        client.complete("s", "u")
    assert len(seen) == 3


def test_garbage_and_wrong_shape_are_response_errors_with_raw() -> None:
    client, _, _ = make([ok("I'd say the keywords are qdrant and vectors."),
                         ok(json.dumps({"keywords": "qdrant", "category": "Technical"})),
                         ok(json.dumps({"keywords": ["x"], "category": "Cooking"})),
                         ok("{}"),
                         ok("")])
    with pytest.raises(LLMResponseError, match="not JSON") as garbage:
        client.complete_json("s", "u", schema=SCHEMA, name="n")
    assert garbage.value.raw == "I'd say the keywords are qdrant and vectors."
    with pytest.raises(LLMResponseError, match=r"\$\.keywords should be array, got string"):
        client.complete_json("s", "u", schema=SCHEMA, name="n")
    with pytest.raises(LLMResponseError, match=r"\$\.category should be one of"):
        client.complete_json("s", "u", schema=SCHEMA, name="n")
    with pytest.raises(LLMResponseError, match="missing the required key 'keywords'") as empty_obj:
        client.complete_json("s", "u", schema=SCHEMA, name="n")
    assert empty_obj.value.raw == "{}"
    with pytest.raises(LLMResponseError, match="empty"):
        client.complete("s", "u")


def test_non_json_envelope_and_missing_choices() -> None:
    client, _, _ = make([httpx.Response(200, text="<html>proxy</html>"), httpx.Response(200, json={"x": 1})])
    with pytest.raises(LLMResponseError, match="non-JSON body") as html:
        client.complete("s", "u")
    assert html.value.raw == "<html>proxy</html>"
    with pytest.raises(LLMResponseError, match=r"no choices \(got nothing\)"):
        client.complete("s", "u")


def test_breaker_opens_refuses_without_calling_and_closes_after_cooldown() -> None:
    replies: list[Any] = [httpx.Response(500)] * 3 + [ok("back")]
    client, seen, ft = make(replies, max_retries=0, breaker_threshold=3, breaker_cooldown=30.0)
    for _ in range(3):
        with pytest.raises(LLMError, match="HTTP 500"):
            client.complete("s", "u")
    assert client.breaker.state == "open"
    with pytest.raises(LLMError, match=r"circuit open .* another 30\.0 s \(until about"):
        client.complete("s", "u")
    assert len(seen) == 3  # refused without a request
    ft.now += 29.0
    with pytest.raises(LLMError, match="circuit open"):
        client.complete("s", "u")
    ft.now += 1.5
    assert client.breaker.state == "half-open"
    assert client.complete("s", "u") == "back"
    assert client.breaker.state == "closed" and len(seen) == 4


def test_half_open_failure_reopens_at_once() -> None:
    client, seen, ft = make([httpx.Response(500)] * 3, max_retries=0, breaker_threshold=2, breaker_cooldown=10.0)
    for _ in range(2):
        with pytest.raises(LLMError):
            client.complete("s", "u")
    ft.now += 11
    with pytest.raises(LLMError, match="HTTP 500"):
        client.complete("s", "u")  # the trial call
    with pytest.raises(LLMError, match="circuit open"):
        client.complete("s", "u")
    assert len(seen) == 3


def test_breaker_opening_mid_retries_stops_the_retries() -> None:
    client, seen, _ = make([httpx.Response(503)] * 5, max_retries=4, breaker_threshold=2)
    with pytest.raises(LLMError, match=r"circuit open.*last failure: HTTP 503"):
        client.complete("s", "u")
    assert len(seen) == 2


def test_bad_url_scheme_fails_without_retry() -> None:
    client, seen, _ = make([httpx.UnsupportedProtocol("no"), ok("never")])
    with pytest.raises(LLMError, match="UnsupportedProtocol"):
        client.complete("s", "u")
    assert len(seen) == 1


def test_own_http_client_is_closed_and_injected_one_is_not() -> None:
    config = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m")
    with LLMClient(config) as own:
        inner = own._http  # noqa: SLF001 - checking ownership, not behaviour
    assert inner.is_closed
    injected = httpx.Client(transport=httpx.MockTransport(lambda r: ok("x")))
    LLMClient(config, http=injected).close()
    assert not injected.is_closed
    injected.close()
