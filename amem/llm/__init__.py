"""The LLM client: any OpenAI-compatible chat endpoint, with retries, a breaker and JSON replies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from ..kernel.breaker import CircuitBreaker
    from ..kernel.llm import LLM
    from .client import LLMClient
    from .config import PLACEHOLDER_API_KEY, RUNGS, LLMConfig, Rung
    from .jsonreply import check_shape, parse_json_object

__all__ = [
    "LLM",
    "LLMClient",
    "LLMConfig",
    "CircuitBreaker",
    "Rung",
    "RUNGS",
    "PLACEHOLDER_API_KEY",
    "parse_json_object",
    "check_shape",
]

# Loaded on first use (PEP 562): every store reads ``amem.llm.config`` to learn whether an
# endpoint is configured, and the client's httpx costs ~60 ms of each CLI command's start on
# the (default) offline path that never sends a request.
__getattr__, __dir__ = lazy_exports(__name__, {
    "LLM": "..kernel.llm",
    "CircuitBreaker": "..kernel.breaker",
    "LLMClient": ".client",
    "LLMConfig": ".config",
    "Rung": ".config",
    "RUNGS": ".config",
    "PLACEHOLDER_API_KEY": ".config",
    "parse_json_object": ".jsonreply",
    "check_shape": ".jsonreply",
}, __all__)
