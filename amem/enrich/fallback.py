"""The fallback combinator: ask the LLM, and on any failure of the LLM path decide offline instead.

Any failure: an :class:`amem.errors.LLMError` from the client, but also any other exception
the LLM path raises (a bug, an LLM implementation that does not keep the seam's contract, a
reply shape nobody foresaw). A note must never be lost because the optional step that describes
it broke. A failure never hides either: the result is labelled ``"offline-fallback"``
(``enriched_by`` / ``decided_by``), its ``warnings`` say what went wrong, and a warning is
logged (with the traceback when it was not an ``LLMError``, since that is a bug to fix).
Bad input (:class:`amem.errors.ValidationError`) is not a model failure and propagates: the
offline rules would refuse it too.
"""

from __future__ import annotations

import logging

from ..errors import LLMError, ValidationError
from ..kernel.llm import LLM
from .base import OFFLINE_FALLBACK, Candidate, Enricher, Enrichment, EvolutionDecision, LinkDecision, NoteView
from .llm import LLMEnricher
from .offline import OfflineEnricher, OfflineRules

log = logging.getLogger(__name__)


class FallbackEnricher:
    """An :class:`amem.enrich.Enricher`: ``primary`` (the LLM) first, ``fallback`` on any failure of it.

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
        except ValidationError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the optional LLM step falls back
            reason = _reason("enrichment", exc)
            return self.fallback.enrich(text, enriched_by=OFFLINE_FALLBACK, warnings=[reason])

    def verify_links(self, note_text: str, candidates: list[Candidate]) -> LinkDecision:
        try:
            return self.primary.verify_links(note_text, candidates)
        except ValidationError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the optional LLM step falls back
            reason = _reason("link verification", exc)
            return self.fallback.verify_links(note_text, candidates, decided_by=OFFLINE_FALLBACK, warnings=[reason])

    def evolve(self, note: NoteView, neighbours: list[NoteView]) -> EvolutionDecision:
        try:
            return self.primary.evolve(note, neighbours)
        except ValidationError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the optional LLM step falls back
            reason = _reason("memory evolution", exc)
            return self.fallback.evolve(note, neighbours, decided_by=OFFLINE_FALLBACK, warnings=[reason])


def _reason(step: str, exc: Exception) -> str:
    """The warning recorded on the result (cut short: an error may quote a huge reply)."""
    detail = " ".join(str(exc).split())
    if len(detail) > 500:
        detail = detail[:500] + "..."
    reason = f"LLM {step} failed ({type(exc).__name__}: {detail}); used the offline rules"
    # An LLMError is the endpoint's doing; anything else is a bug in the LLM path: keep its traceback.
    log.warning("%s", reason, exc_info=not isinstance(exc, LLMError))
    return reason


def build_enricher(llm: LLM | None = None, *, rules: OfflineRules | None = None, evolve_max: int = 3) -> Enricher:
    """The enricher the write path should use: offline when ``llm`` is None, else LLM with fallback."""
    offline = OfflineEnricher(rules)
    if llm is None:
        return offline
    return FallbackEnricher(LLMEnricher(llm, evolve_max=evolve_max), offline)
