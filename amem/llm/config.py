"""LLMConfig: the settings of one OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

from ..errors import ConfigError
from ..kernel.settings import Section, setting

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
    connect_timeout: float = setting(5.0, above=0)
    read_timeout: float = setting(60.0, above=0)
    deadline: float = setting(90.0, above=0)
    max_reply_bytes: int = setting(2_000_000, at_least=1024)
    max_retries: int = setting(2, at_least=0)
    backoff_base: float = setting(0.5, at_least=0)
    backoff_max: float = setting(8.0, at_least=0)
    jitter: float = setting(0.25, at_least=0, at_most=1)
    retry_after_max: float = setting(30.0, at_least=0)
    breaker_threshold: int = setting(5, at_least=1)
    breaker_cooldown: float = setting(60.0, above=0)
    temperature: float = setting(0.0, at_least=0, at_most=2)
    max_tokens: int | None = setting(1024, at_least=1)
    structured_output: Rung = "json_schema"

    def __post_init__(self) -> None:
        _SECTION.validate(self)  # every field's type and the bounds above
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must be an http(s) URL, got {self.base_url!r}", key="base_url")
        if not self.model.strip():
            raise ConfigError("model must be a non-empty string", key="model")
        if self.backoff_max < self.backoff_base:
            raise ConfigError("backoff_max must be >= backoff_base", key="backoff_max")

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

