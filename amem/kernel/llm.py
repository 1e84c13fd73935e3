"""The LLM seams: what amem and lcm ask of a chat model, from one call to the full client.

    TextLLM        complete(system, user, max_tokens) -> str        lcm's summaries
    ├── DeadlineLLM  + complete_within(..., seconds)                  lcm's expansion under a tool's timeoutMs
    └── LLM          + model, + complete_json(...)                    amem's enrichment (the full client)
    JsonLLM        complete_json(system, user, schema, name) -> dict  the consolidation merge
    └── LLM

Each consumer declares the narrowest one it uses; ``amem.llm.LLMClient`` satisfies LLM (so
TextLLM and JsonLLM), the runtime's per-role wrapper of it adds ``complete_within``; tests pass
small scripted ones. Failures are exceptions: lcm counts any exception as a failed
call, amem's client raises ``amem.errors.LLMError`` (``LLMResponseError`` for an unusable reply).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["TextLLM", "DeadlineLLM", "JsonLLM", "LLM"]


@runtime_checkable
class TextLLM(Protocol):
    """A chat completion endpoint reduced to one call. Any exception counts as failure."""

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """The model's text reply to one system + user message."""
        ...


@runtime_checkable
class DeadlineLLM(TextLLM, Protocol):
    """A TextLLM that can also end one call at a caller's deadline (a tool's ``timeoutMs``).

    Optional: lcm uses it when the model offers it, so the HTTP request itself stops at the
    deadline instead of running on in the background after the caller was answered.
    """

    def complete_within(self, system: str, user: str, *, max_tokens: int | None, seconds: float) -> str:
        """The reply, or an exception once ``seconds`` have passed (the request is then closed)."""
        ...


@runtime_checkable
class JsonLLM(Protocol):
    """A chat model asked for one JSON object that satisfies a schema."""

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any], name: str) -> dict[str, Any]:
        """A JSON object reply that satisfies ``schema`` (``name`` labels the schema)."""
        ...


@runtime_checkable
class LLM(TextLLM, JsonLLM, Protocol):
    """The full chat model amem enriches with: both calls, and the model's name."""

    @property
    def model(self) -> str:
        """The model name, as recorded in ``enriched_by = "llm:<model>"``."""
        ...
