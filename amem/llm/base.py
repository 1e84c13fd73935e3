"""The LLM seam: the two calls amem and lcm make of a chat model."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class LLM(Protocol):
    """A chat model. :class:`amem.llm.LLMClient` is the real one; tests pass a scripted one.

    Both calls raise :class:`amem.errors.LLMError` when the model cannot be used (and
    :class:`amem.errors.LLMResponseError` when it answered unusably); callers fall back.
    """

    @property
    def model(self) -> str:
        """The model name, as recorded in ``enriched_by = "llm:<model>"``."""
        ...

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """The model's text reply to one system + user message."""
        ...

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any], name: str) -> dict[str, Any]:
        """A JSON object reply that satisfies ``schema`` (``name`` labels the schema)."""
        ...
