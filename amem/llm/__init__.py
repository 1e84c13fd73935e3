"""The LLM client: any OpenAI-compatible chat endpoint, with retries, a breaker and JSON replies."""

from __future__ import annotations

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
