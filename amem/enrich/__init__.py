"""Enrichment: note construction, link verification and memory evolution, by an LLM or offline."""

from __future__ import annotations

from .base import (
    CATEGORIES,
    NOTE_TYPES,
    OFFLINE,
    OFFLINE_FALLBACK,
    Candidate,
    Enricher,
    Enrichment,
    EvolutionDecision,
    EvolutionUpdate,
    LinkDecision,
    NoteView,
    llm_label,
)
from .fallback import FallbackEnricher, build_enricher
from .keywords import extract_keywords
from .llm import LLMEnricher
from .offline import OfflineEnricher, OfflineRules, normalise_tag

__all__ = [
    "CATEGORIES",
    "NOTE_TYPES",
    "OFFLINE",
    "OFFLINE_FALLBACK",
    "Candidate",
    "Enricher",
    "Enrichment",
    "EvolutionDecision",
    "EvolutionUpdate",
    "LinkDecision",
    "NoteView",
    "llm_label",
    "FallbackEnricher",
    "build_enricher",
    "LLMEnricher",
    "OfflineEnricher",
    "OfflineRules",
    "extract_keywords",
    "normalise_tag",
]
