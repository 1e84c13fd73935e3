"""The fallback combinator: ask the LLM, and on any LLM failure decide offline instead.

A failure never loses a note and never hides: the result is labelled ``"offline-fallback"``
(``enriched_by`` / ``decided_by``), its ``warnings`` say what went wrong, and a warning is
logged. Bad input (:class:`amem.errors.ValidationError`) is not a model failure and propagates.
"""

from __future__ import annotations

import logging

from ..errors import LLMError
from ..llm.base import LLM
from .base import OFFLINE_FALLBACK, Candidate, Enricher, Enrichment, EvolutionDecision, LinkDecision, NoteView
from .llm import LLMEnricher
from .offline import OfflineEnricher, OfflineRules

log = logging.getLogger(__name__)


class FallbackEnricher:
    """An :class:`amem.enrich.Enricher`: ``primary`` (the LLM) first, ``fallback`` on :class:`LLMError`.

    Args:
        primary: usually an :class:`LLMEnricher`.
        fallback: the offline rules.
    """

    def __init__(self, primary: Enricher, fallback: OfflineEnricher | None = None) -> None:
        self.primary = primary
        self.fallback = fallback or OfflineEnricher()

    def enrich(self, text: str) -> Enrichment:
        try:
            return self.primary.enrich(text)
        except LLMError as exc:
            reason = _reason("enrichment", exc)
            return self.fallback.enrich(text, enriched_by=OFFLINE_FALLBACK, warnings=[reason])

    def verify_links(self, note_text: str, candidates: list[Candidate]) -> LinkDecision:
        try:
            return self.primary.verify_links(note_text, candidates)
        except LLMError as exc:
            reason = _reason("link verification", exc)
            return self.fallback.verify_links(note_text, candidates, decided_by=OFFLINE_FALLBACK, warnings=[reason])

    def evolve(self, note: NoteView, neighbours: list[NoteView]) -> EvolutionDecision:
        try:
            return self.primary.evolve(note, neighbours)
        except LLMError as exc:
            reason = _reason("memory evolution", exc)
            return self.fallback.evolve(note, neighbours, decided_by=OFFLINE_FALLBACK, warnings=[reason])


def _reason(step: str, exc: LLMError) -> str:
    reason = f"LLM {step} failed ({type(exc).__name__}: {exc}); used the offline rules"
    log.warning("%s", reason)
    return reason


def build_enricher(llm: LLM | None = None, *, rules: OfflineRules | None = None, evolve_max: int = 3) -> Enricher:
    """The enricher the write path should use: offline when ``llm`` is None, else LLM with fallback."""
    offline = OfflineEnricher(rules)
    if llm is None:
        return offline
    return FallbackEnricher(LLMEnricher(llm, evolve_max=evolve_max), offline)
