"""LLMConfig: the settings of one OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

from ..errors import ConfigError
from ..kernel.settings import Section

if TYPE_CHECKING:
    from ..config import AmemConfig

#: Structured-output rungs, strongest first. ``prompt`` = no ``response_format``; parse and repair.
Rung = Literal["json_schema", "json_object", "prompt"]
RUNGS: tuple[Rung, ...] = ("json_schema", "json_object", "prompt")

#: A placeholder key: local servers (Ollama, llama.cpp, vLLM) ignore it but some clients insist.
PLACEHOLDER_API_KEY = "sk-no-key-required"


@dataclass(frozen=True)
class LLMConfig:
    """Where the endpoint is and how patiently to talk to it.

    Attributes:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or ``http://localhost:11434/v1``
            (Ollama); ``/chat/completions`` is appended.
        model: the model name the endpoint knows.
        api_key: sent as ``Authorization: Bearer``; a placeholder is fine for local servers.
        connect_timeout: seconds to open the connection.
        read_timeout: seconds to wait for each read of the reply (local models can be slow: be
            generous). It bounds one read, not the whole reply: see ``deadline``.
        deadline: seconds one call may take in all (every retry, wait and byte of the reply);
            past it the call fails and the caller falls back. A server dripping its reply a byte
            at a time never trips the read timeout, but it trips this; hitting it also opens the
            circuit breaker at once (for ``breaker_cooldown``).
        max_reply_bytes: a reply longer than this is not read further and fails (a model's
            JSON answer is a few KB; this stops a broken or hostile server filling the memory).
        max_retries: extra attempts after the first, only for connection errors, timeouts and
            HTTP 408/409/429/5xx.
        backoff_base: the first retry waits about this long; each further retry doubles it.
        backoff_max: no single wait is longer than this.
        jitter: fraction (0..1) of each wait that is randomised, so clients do not retry in step.
        retry_after_max: a server's ``Retry-After`` is honoured when it is at most this many seconds;
            a longer one is treated as unreasonable and the normal backoff applies.
        breaker_threshold: consecutive failed requests that open the circuit.
        breaker_cooldown: seconds the circuit stays open before one trial request is let through.
        temperature: 0 for extraction: the same note should get the same enrichment.
        max_tokens: default cap on the reply length (``None`` leaves it to the server).
        structured_output: the rung of the structured-output ladder to start from.
    """

    base_url: str
    model: str
    api_key: str = PLACEHOLDER_API_KEY
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    deadline: float = 90.0
    max_reply_bytes: int = 2_000_000
    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    jitter: float = 0.25
    retry_after_max: float = 30.0
    breaker_threshold: int = 5
    breaker_cooldown: float = 60.0
    temperature: float = 0.0
    max_tokens: int | None = 1024
    structured_output: Rung = "json_schema"

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must be an http(s) URL, got {self.base_url!r}", key="base_url")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model must be a non-empty string", key="model")
        if not isinstance(self.api_key, str):
            raise ConfigError("api_key must be a string (a placeholder is fine)", key="api_key")
        for name in ("connect_timeout", "read_timeout", "deadline", "breaker_cooldown"):
            _positive(name, getattr(self, name))
        for name in ("backoff_base", "backoff_max", "retry_after_max"):
            _non_negative(name, getattr(self, name))
        if self.backoff_max < self.backoff_base:
            raise ConfigError("backoff_max must be >= backoff_base", key="backoff_max")
        if not isinstance(self.jitter, (int, float)) or not 0.0 <= self.jitter <= 1.0:
            raise ConfigError(f"jitter is a fraction in [0, 1], got {self.jitter!r}", key="jitter")
        if (not isinstance(self.max_reply_bytes, int) or isinstance(self.max_reply_bytes, bool)
                or self.max_reply_bytes < 1024):
            raise ConfigError(f"max_reply_bytes must be an int >= 1024, got {self.max_reply_bytes!r}",
                              key="max_reply_bytes")
        if not isinstance(self.max_retries, int) or isinstance(self.max_retries, bool) or self.max_retries < 0:
            raise ConfigError(f"max_retries must be an int >= 0, got {self.max_retries!r}", key="max_retries")
        if (not isinstance(self.breaker_threshold, int) or isinstance(self.breaker_threshold, bool)
                or self.breaker_threshold < 1):
            raise ConfigError(f"breaker_threshold must be an int >= 1, got {self.breaker_threshold!r}",
                              key="breaker_threshold")
        if not isinstance(self.temperature, (int, float)) or not 0.0 <= self.temperature <= 2.0:
            raise ConfigError(f"temperature must lie in [0, 2], got {self.temperature!r}", key="temperature")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            raise ConfigError(f"max_tokens must be None or an int >= 1, got {self.max_tokens!r}",
                              key="max_tokens")
        if self.structured_output not in RUNGS:
            raise ConfigError(f"structured_output must be one of {', '.join(RUNGS)}, "
                              f"got {self.structured_output!r}", key="structured_output")

    @property
    def chat_url(self) -> str:
        """The chat-completions endpoint."""
        return self.base_url.rstrip("/") + "/chat/completions"

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "LLMConfig":
        """Build from a plain mapping (e.g. a TOML table); unknown keys are an error, not ignored."""
        loaded = _SECTION.load(tables=[(values, "LLM settings")])
        unknown = sorted(item.name for item in loaded.unclaimed)
        if unknown:
            raise ConfigError(f"unknown LLM setting(s): {', '.join(unknown)}; known: {', '.join(sorted(_SECTION.specs))}",
                              key=unknown[0], source="LLM settings")
        for required in ("base_url", "model"):
            if required not in loaded.values:
                raise ConfigError(f"LLM setting {required!r} is required", key=required)
        return cls(**loaded.values)

    @classmethod
    def from_amem(cls, config: "AmemConfig") -> "LLMConfig | None":
        """The note store's endpoint (its ``llm_*`` keys), or None when ``llm_base_url`` is unset
        (offline enrichment)."""
        if not config.llm_base_url:
            return None
        return cls(base_url=config.llm_base_url, model=config.llm_model,
                   api_key=config.llm_api_key or PLACEHOLDER_API_KEY,
                   connect_timeout=config.llm_connect_timeout, read_timeout=config.llm_read_timeout,
                   deadline=config.llm_deadline_s, max_reply_bytes=config.llm_max_reply_bytes)


#: a mapping's values are converted by the fields' types (no environment variables of its own:
#: the note store's ``AMEM_LLM_*`` reach it through ``from_amem``)
_SECTION = Section(LLMConfig, error=ConfigError, env_prefix=None)


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name} must be a number > 0, got {value!r}", key=name)


def _non_negative(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(f"{name} must be a number >= 0, got {value!r}", key=name)
