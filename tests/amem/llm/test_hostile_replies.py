"""LLMClient against malformed, slow and huge replies: each ends as an LLMError, on time and bounded."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable

import httpx
import pytest

from amem.errors import ConfigError, LLMError, LLMResponseError
from amem.llm import LLMClient, LLMConfig, parse_json_object
from amem.llm.jsonreply import drop_think_blocks, outermost_object
from tests.fakes.openai_server import FakeOpenAI, drip, huge, json_reply

SCHEMA: dict[str, Any] = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}


def mock_client(body: bytes | str, status: int = 200, **cfg: Any) -> LLMClient:
    """A client whose endpoint always answers ``body`` (bytes as they are)."""
    content = body.encode() if isinstance(body, str) else body

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content, headers={"Content-Type": "application/json"})

    config = LLMConfig(**{"base_url": "http://llm.test/v1", "model": "m", "max_retries": 0, **cfg})
    return LLMClient(config, http=httpx.Client(transport=httpx.MockTransport(handler)))


# Every level of the envelope with a wrong type or missing; the first is the reply that lost a note.
MALFORMED: list[tuple[str, Any]] = [
    ("content part text is a number", {"choices": [{"message": {"content": [{"text": 5}]}}]}),
    ("content part is a number", {"choices": [{"message": {"content": [5]}}]}),
    ("content part text is an object", {"choices": [{"message": {"content": [{"text": {"x": 1}}]}}]}),
    ("content is a number", {"choices": [{"message": {"content": 5}}]}),
    ("content is an object", {"choices": [{"message": {"content": {"a": 1}}}]}),
    ("content is missing", {"choices": [{"message": {}}]}),
    ("content is null with a refusal object", {"choices": [{"message": {"content": None, "refusal": {"r": 1}}}]}),
    ("message is a string", {"choices": [{"message": "hi"}]}),
    ("message is a list", {"choices": [{"message": [{"content": "{}"}]}]}),
    ("choice is a string", {"choices": ["{\"a\": 1}"]}),
    ("choice is null", {"choices": [None]}),
    ("choices is empty", {"choices": []}),
    ("choices is an object", {"choices": {"0": {"message": {"content": "{}"}}}}),
    ("choices is a string", {"choices": "abc"}),
    ("choices is missing", {"id": "x"}),
    ("body is a list", [{"choices": []}]),
    ("body is a string", "just text"),
    ("body is a number", 5),
    ("body is null", None),
]


@pytest.mark.parametrize("body", [b for _, b in MALFORMED], ids=[name for name, _ in MALFORMED])
def test_every_malformed_envelope_is_a_response_error_with_the_raw_reply(body: Any) -> None:
    raw = json.dumps(body)
    for call in ("complete", "complete_json"):
        with mock_client(raw) as client:
            with pytest.raises(LLMResponseError) as info:
                if call == "complete":
                    client.complete("s", "u")
                else:
                    client.complete_json("s", "u", schema=SCHEMA, name="n")
            assert info.value.raw == raw
            assert client.breaker.failures == 1  # an unusable reply counts against the endpoint


@pytest.mark.parametrize("body", [
    b"", b"   ", b"\xff\xfe\x00garbage", b'{"choices": [{"message": {"content": "{\\"a\\": 1', b"[" * 100_000,
    b"<html>502 Bad Gateway</html>",
], ids=["empty", "blank", "binary", "truncated", "deep-nesting", "html"])
def test_non_json_bodies_are_response_errors(body: bytes) -> None:
    with mock_client(body) as client, pytest.raises(LLMResponseError, match="non-JSON body") as info:
        client.complete("s", "u")
    assert info.value.raw is not None


def test_content_parts_without_text_are_skipped_and_text_parts_joined() -> None:
    body = {"choices": [{"message": {"content": [{"type": "image"}, {"type": "text", "text": '{"a":'},
                                                 " 1}"]}}]}
    with mock_client(json.dumps(body)) as client:
        assert client.complete_json("s", "u", schema=SCHEMA, name="n") == {"a": 1}
        assert client.breaker.failures == 0


def test_breaker_opens_after_consecutive_unusable_replies() -> None:
    with mock_client('{"choices": "no"}', breaker_threshold=2) as client:
        for _ in range(2):
            with pytest.raises(LLMResponseError):
                client.complete("s", "u")
        with pytest.raises(LLMError, match="circuit open"):
            client.complete("s", "u")


# ------------------------------------------------------------------ the overall deadline


def timed(fn: Callable[[], object]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the caller asserts on it
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


def server_client(server: FakeOpenAI, **cfg: Any) -> LLMClient:
    config = LLMConfig(**{"base_url": server.url, "model": "m", "connect_timeout": 1.0, "read_timeout": 2.0,
                          "max_retries": 0, "deadline": 0.6, **cfg})
    return LLMClient(config)


@pytest.mark.parametrize("headers_too", [False, True], ids=["body", "headers"])
def test_a_dripping_server_is_cut_off_at_the_deadline(fake_openai: FakeOpenAI, headers_too: bool) -> None:
    # One byte every 50 ms: each read is far inside the 2 s read timeout; the whole reply takes ~10 s.
    fake_openai.set_default(drip(0.05, json_reply({"a": 1}), headers_too=headers_too))
    earlier = set(exchange_threads())
    with server_client(fake_openai) as client:
        exc, elapsed = timed(lambda: client.complete_json("s", "u", schema=SCHEMA, name="n"))
    assert isinstance(exc, LLMError) and "overall deadline of 0.6 s (llm_deadline_s)" in str(exc)
    assert elapsed < 1.5
    assert client.breaker.state == "open"  # the next call does not wait another deadline
    exc, elapsed = timed(lambda: client.complete("s", "u"))
    assert isinstance(exc, LLMError) and "circuit open" in str(exc) and elapsed < 0.1
    if not headers_too:  # the abandoned exchange stops at its next body byte, not at the reply's end
        assert wait_until(lambda: not set(exchange_threads()) - earlier, 1.0)


def exchange_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "amem-llm-exchange"]


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_retries_stop_when_the_wait_would_pass_the_deadline(fake_openai: FakeOpenAI) -> None:
    from tests.fakes.openai_server import error

    fake_openai.set_default(error(429, "slow down", retry_after="5"))
    with server_client(fake_openai, max_retries=3, deadline=1.0) as client:
        exc, elapsed = timed(lambda: client.complete("s", "u"))
    assert isinstance(exc, LLMError) and "would pass the overall deadline" in str(exc)
    assert elapsed < 1.0 and len(fake_openai.requests) == 1


def test_a_drip_within_the_deadline_still_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(drip(0.001, json_reply({"a": 1})))
    with server_client(fake_openai, deadline=5.0) as client:
        assert client.complete_json("s", "u", schema=SCHEMA, name="n") == {"a": 1}


# ------------------------------------------------------------------ the reply size cap


@pytest.mark.parametrize("declare_length", [False, True], ids=["streamed", "content-length"])
def test_a_huge_reply_is_cut_at_the_cap(fake_openai: FakeOpenAI, declare_length: bool) -> None:
    fake_openai.set_default(huge(50_000_000, declare_length=declare_length))
    with server_client(fake_openai, max_reply_bytes=65_536, deadline=5.0) as client:
        exc, elapsed = timed(lambda: client.complete("s", "u"))
    assert isinstance(exc, LLMResponseError) and "over 65536 bytes (llm_max_reply_bytes" in str(exc)
    assert exc.raw is not None and len(exc.raw) <= 4096
    assert elapsed < 2.0  # 50 MB was never read


def test_a_reply_just_under_the_cap_is_read(fake_openai: FakeOpenAI) -> None:
    fake_openai.set_default(huge(60_000))
    with server_client(fake_openai, max_reply_bytes=65_536) as client:
        assert len(client.complete("s", "u")) > 59_000


@pytest.mark.parametrize("changes, key", [({"deadline": 0}, "deadline"), ({"max_reply_bytes": 10}, "max_reply_bytes"),
                                          ({"max_reply_bytes": 2.5}, "max_reply_bytes")])
def test_new_settings_are_validated(changes: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        LLMConfig(base_url="http://x/v1", model="m", **changes)
    assert info.value.key == key


# ------------------------------------------------------------------ linear JSON repair


def within(seconds: float, fn: Callable[[], object]) -> None:
    """Run ``fn`` on a daemon thread and fail if it is not done in ``seconds`` (old code took minutes)."""
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(seconds), f"not finished within {seconds} s"
    if errors and not isinstance(errors[0], LLMResponseError):
        raise errors[0]


@pytest.mark.parametrize("raw", [
    "{" * 20_000, "{" * 100_000, '{"a":' * 50_000, "<think>" * 100_000, "<think>{" * 50_000,
    "[" * 100_000, "```json\n" + "{" * 50_000, '{"a": "' + "\\" * 100_000, "," + " " * 100_000 + "x",
], ids=["20k-braces", "100k-braces", "50k-keys", "100k-think", "think-brace", "100k-brackets", "fence-braces",
        "escapes", "comma-spaces"])
def test_json_repair_is_linear(raw: str) -> None:
    within(1.0, lambda: parse_json_object(raw))


def test_linear_repair_keeps_what_the_old_repair_found() -> None:
    assert outermost_object('{"a": {"b":1}, "c": {"d":2}') == '{"b":1}'  # cut off: the first inner object
    assert outermost_object('{ {"a": {"b":1}}') == '{"a": {"b":1}}'
    assert outermost_object('x "}" {"k": "}{"} y') == '{"k": "}{"}'
    assert drop_think_blocks("<THINK>a</think>b<think>c</think>d<think>open") == "bd<think>open"
    assert parse_json_object("<think>{x}</think><think>y</think>{\"a\": 1}") == {"a": 1}
