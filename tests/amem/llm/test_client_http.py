"""The real LLMClient over real HTTP against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from amem.errors import LLMError, LLMResponseError
from amem.llm import LLMClient, LLMConfig
from tests.fakes import FakeOpenAI, chat, error, garbage, json_reply, raw, reject_format, slow

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "string", "minLength": 1}},
}


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def client_for(server: FakeOpenAI, sleeps: Sleeps, **cfg: Any) -> LLMClient:
    config = LLMConfig(**{"base_url": server.url, "model": "fake", "connect_timeout": 1.0, "read_timeout": 2.0,
                          "max_retries": 2, **cfg})
    return LLMClient(config, sleep=sleeps)


def test_normal_reply(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(json_reply({"answer": "42"}), chat("plain text"))
    sleeps = Sleeps()
    with client_for(fake_openai, sleeps) as client:
        assert client.complete_json("sys", "question", schema=SCHEMA, name="answer") == {"answer": "42"}
        assert client.complete("sys", "question") == "plain text"
    first = fake_openai.requests[0]
    assert first.headers["authorization"].startswith("Bearer ")
    assert first.response_format == "json_schema" and first.user == "question"
    assert sleeps.calls == []


def test_slow_reply_times_out_and_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(slow(1.0, json_reply({"answer": "late"})), json_reply({"answer": "on time"}))
    sleeps = Sleeps()
    started = time.monotonic()
    with client_for(fake_openai, sleeps, read_timeout=0.2) as client:
        assert client.complete_json("s", "u", schema=SCHEMA, name="a") == {"answer": "on time"}
    assert time.monotonic() - started < 0.9  # gave up on the slow reply at the read timeout
    assert len(fake_openai.requests) == 2 and len(sleeps.calls) == 1


def test_slow_every_time_fails_after_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(slow(1.0))
    sleeps = Sleeps()
    with client_for(fake_openai, sleeps, read_timeout=0.1, max_retries=1) as client:
        with pytest.raises(LLMError, match=r"after 2 attempt\(s\): timed out"):
            client.complete("s", "u")
    assert len(fake_openai.requests) == 2


def test_500_is_retried_then_fails(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(error(500, "model crashed"))
    sleeps = Sleeps()
    with client_for(fake_openai, sleeps) as client:
        with pytest.raises(LLMError, match="HTTP 500.*model crashed"):
            client.complete("s", "u")
    assert len(fake_openai.requests) == 3 and len(sleeps.calls) == 2


def test_429_then_ok(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(error(429, "slow down", retry_after="0.25"), json_reply({"answer": "ok"}))
    sleeps = Sleeps()
    with client_for(fake_openai, sleeps) as client:
        assert client.complete_json("s", "u", schema=SCHEMA, name="a") == {"answer": "ok"}
    assert sleeps.calls == [0.25]


def test_garbage_wrong_schema_and_html(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(garbage(), json_reply({"answer": 3}), raw(200, "<html>bad gateway</html>", "text/html"))
    with client_for(fake_openai, Sleeps()) as client:
        with pytest.raises(LLMResponseError, match="not JSON"):
            client.complete_json("s", "u", schema=SCHEMA, name="a")
        with pytest.raises(LLMResponseError, match=r"\$\.answer should be string, got integer"):
            client.complete_json("s", "u", schema=SCHEMA, name="a")
        with pytest.raises(LLMResponseError, match="non-JSON body"):
            client.complete_json("s", "u", schema=SCHEMA, name="a")
    assert len(fake_openai.requests) == 3  # bad content is not retried


def test_server_rejecting_json_schema_downgrades_once(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(reject_format("json_schema", json_reply({"answer": "via json_object"})))
    with client_for(fake_openai, Sleeps()) as client:
        for _ in range(2):
            assert client.complete_json("s", "u", schema=SCHEMA, name="a") == {"answer": "via json_object"}
        assert client.rung == "json_object"
    assert [r.response_format for r in fake_openai.requests] == ["json_schema", "json_object", "json_object"]


def test_server_rejecting_both_formats_ends_on_prompt_and_repair(fake_openai: FakeOpenAI) -> None:
    repaired = chat('Sure:\n```json\n{"answer": "repaired",}\n```')
    fake_openai.set_default(reject_format("json_schema,json_object", repaired))
    with client_for(fake_openai, Sleeps()) as client:
        assert client.complete_json("s", "u", schema=SCHEMA, name="a") == {"answer": "repaired"}
        assert client.rung == "prompt"
    assert [r.response_format for r in fake_openai.requests] == ["json_schema", "json_object", None]


def test_401_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(error(401, "bad key"))
    sleeps = Sleeps()
    with client_for(fake_openai, sleeps) as client:
        with pytest.raises(LLMError, match="HTTP 401 \\(not retried\\).*bad key"):
            client.complete("s", "u")
    assert len(fake_openai.requests) == 1 and sleeps.calls == []


def test_connection_refused_is_retried_then_fails() -> None:
    server = FakeOpenAI()
    url = server.url
    server.close()  # nothing listens on that port any more
    sleeps = Sleeps()
    config = LLMConfig(base_url=url, model="m", connect_timeout=0.5, max_retries=1)
    with LLMClient(config, sleep=sleeps) as client:
        with pytest.raises(LLMError, match="connection failed \\(ConnectError"):
            client.complete("s", "u")
    assert len(sleeps.calls) == 1


def test_request_body_is_valid_openai_json(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(json_reply({"answer": "x"}))
    with client_for(fake_openai, Sleeps()) as client:
        client.complete_json("s", "u", schema=SCHEMA, name="answer")
    body = fake_openai.requests[0].body
    assert body["response_format"]["json_schema"] == {"name": "answer", "schema": SCHEMA}
    assert body["stream"] is False and body["temperature"] == 0.0
    json.dumps(body)  # round-trips
