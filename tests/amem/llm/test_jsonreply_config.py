"""Parse-and-repair, the shape check, and LLMConfig validation."""

from __future__ import annotations

from typing import Any

import pytest

from amem.errors import ConfigError, LLMResponseError
from amem.llm import LLMConfig, check_shape, parse_json_object
from amem.llm.jsonreply import outermost_object


@pytest.mark.parametrize("raw, expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('```\n{"a": 1}\n```', {"a": 1}),
    ('Sure! Here it is: {"a": "x {not a brace}"} Hope that helps.', {"a": "x {not a brace}"}),
    ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
    ('<think>the user wants {json}</think>\n{"a": 1}', {"a": 1}),
    ('{"a": "quote \\" and } inside"}', {"a": 'quote " and } inside'}),
])
def test_repairs(raw: str, expected: dict[str, Any]) -> None:
    assert parse_json_object(raw) == expected


@pytest.mark.parametrize("raw, message", [
    ("", "empty"),
    ("   \n", "empty"),
    ("no json here", "not JSON"),
    ('{"a": 1', "not JSON"),  # cut off by the token limit
    ("[1, 2]", "not an object"),
])
def test_unrepairable(raw: str, message: str) -> None:
    with pytest.raises(LLMResponseError, match=message) as info:
        parse_json_object(raw)
    assert info.value.raw == raw


def test_outermost_object_skips_braces_in_strings() -> None:
    assert outermost_object('x "}" {"k": "}{"} y') == '{"k": "}{"}'
    assert outermost_object("nothing") is None


SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["tags", "n", "flag"],
    "properties": {
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2},
        "n": {"type": "integer"},
        "flag": {"type": "boolean"},
        "maybe": {"type": ["string", "null"]},
    },
}


@pytest.mark.parametrize("value, problem", [
    ({"tags": ["a"], "n": 1, "flag": True, "maybe": None}, None),
    ({"tags": ["a"], "n": 1}, "missing the required key 'flag'"),
    ({"tags": ["a", ""], "n": 1, "flag": True}, r"\$\.tags\[1\] should have at least 1 character"),
    ({"tags": ["a", "b", "c"], "n": 1, "flag": True}, "at most 2 item"),
    ({"tags": [], "n": True, "flag": True}, r"\$\.n should be integer, got boolean"),
    ({"tags": [], "n": 1.5, "flag": True}, r"\$\.n should be integer, got number"),
    ({"tags": [], "n": 1, "flag": True, "maybe": 3}, r"\$\.maybe should be string or null"),
])
def test_check_shape(value: dict[str, Any], problem: str | None) -> None:
    if problem is None:
        check_shape(value, SCHEMA)
    else:
        with pytest.raises(LLMResponseError, match=problem):
            check_shape(value, SCHEMA, raw="r")


def test_config_defaults_and_url() -> None:
    cfg = LLMConfig(base_url="http://localhost:11434/v1/", model="qwen2.5")
    assert cfg.chat_url == "http://localhost:11434/v1/chat/completions"
    assert cfg.temperature == 0.0 and cfg.api_key


@pytest.mark.parametrize("changes, key", [
    ({"base_url": "localhost:11434"}, "base_url"),
    ({"model": " "}, "model"),
    ({"read_timeout": 0}, "read_timeout"),
    ({"connect_timeout": -1}, "connect_timeout"),
    ({"max_retries": -1}, "max_retries"),
    ({"max_retries": 1.5}, "max_retries"),
    ({"jitter": 2}, "jitter"),
    ({"backoff_base": 5, "backoff_max": 1}, "backoff_max"),
    ({"breaker_threshold": 0}, "breaker_threshold"),
    ({"temperature": 3}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"structured_output": "xml"}, "structured_output"),
])
def test_config_rejects_bad_values_naming_the_key(changes: dict[str, Any], key: str) -> None:
    values = {"base_url": "http://x/v1", "model": "m", **changes}
    with pytest.raises(ConfigError) as info:
        LLMConfig(**values)
    assert info.value.key == key and key in str(info.value)


def test_config_from_mapping() -> None:
    cfg = LLMConfig.from_mapping({"base_url": "http://x/v1", "model": "m", "max_retries": 0})
    assert cfg.max_retries == 0
    with pytest.raises(ConfigError, match="unknown LLM setting.*retries") as info:
        LLMConfig.from_mapping({"base_url": "http://x/v1", "model": "m", "retries": 1})
    assert info.value.key == "retries"
    with pytest.raises(ConfigError, match="'model' is required"):
        LLMConfig.from_mapping({"base_url": "http://x/v1"})
