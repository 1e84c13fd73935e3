"""The LLM enricher: steps 3-5 of ``add`` decided by a chat model, one JSON call each.

Replies are checked against the schemas in :mod:`amem.enrich.prompts` by the client, then
normalised here (trimmed, de-duplicated, capped). Anything unusable raises
:class:`amem.errors.LLMError` or :class:`amem.errors.LLMResponseError`; the combinator
(:class:`amem.enrich.FallbackEnricher`) turns that into an offline decision.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from ..errors import LLMResponseError
from ..llm.base import LLM
from . import prompts
from .base import Candidate, Enrichment, EvolutionDecision, EvolutionUpdate, LinkDecision, NoteView, llm_label
from .context import trim
from .offline import check_candidates, check_text, check_views, normalise_tag

log = logging.getLogger(__name__)


class LLMEnricher:
    """An :class:`amem.enrich.Enricher` backed by an :class:`amem.llm.LLM`.

    Args:
        llm: the model (an :class:`amem.llm.LLMClient`, or a scripted one in tests).
        max_keywords: keywords kept from a reply.
        max_tags: tags kept from a reply (for new notes and evolved ones).
        max_topics: topics kept from a reply.
        context_chars: a context longer than this is cut.
        evolve_max: neighbours sent for evolution.
    """

    def __init__(self, llm: LLM, *, max_keywords: int = 10, max_tags: int = 10, max_topics: int = 3,
                 context_chars: int = 300, evolve_max: int = 3) -> None:
        self.llm = llm
        self.max_keywords = max_keywords
        self.max_tags = max_tags
        self.max_topics = max_topics
        self.context_chars = context_chars
        self.evolve_max = evolve_max

    @property
    def label(self) -> str:
        """``"llm:<model>"``."""
        return llm_label(self.llm.model)

    def enrich(self, text: str) -> Enrichment:
        """Ask the model for keywords, tags, context, category, note type and topics.

        Raises:
            ValidationError: ``text`` is blank.
            LLMError: the model could not be used; ``LLMResponseError`` if its reply was unusable.
        """
        check_text(text)
        reply = self.llm.complete_json(prompts.ENRICH_SYSTEM, prompts.enrich_user(text),
                                       schema=prompts.ENRICH_SCHEMA, name="note_enrichment")
        keywords = _clean_list(reply["keywords"], self.max_keywords, fold=str.strip)
        tags = _clean_list(reply["tags"], self.max_tags, fold=normalise_tag)
        context = trim(" ".join(reply["context"].split()), self.context_chars)
        if not keywords or not tags or not context:
            raise LLMResponseError("the LLM reply has blank keywords, tags or context", raw=repr(reply))
        return Enrichment(
            keywords=tuple(keywords),
            tags=tuple(tags),
            context=context,
            category=reply["category"],
            note_type=reply["note_type"],
            topics=tuple(_clean_list(reply["topics"], self.max_topics, fold=normalise_tag)),
            enriched_by=self.label,
        )

    def verify_links(self, note_text: str, candidates: list[Candidate]) -> LinkDecision:
        """One call: a yes/no per candidate. Candidates the model skips are not linked (and a
        warning says so); numbers it invents are ignored (with a warning).

        Raises:
            ValidationError: bad ``note_text`` or candidates.
            LLMError: as :meth:`enrich`.
        """
        check_text(note_text, "note_text")
        cands = check_candidates(candidates)
        if not cands:
            return LinkDecision([], decided_by=self.label)
        reply = self.llm.complete_json(prompts.LINKS_SYSTEM, prompts.links_user(note_text, cands),
                                       schema=prompts.LINKS_SCHEMA, name="link_decisions")
        verdicts: dict[int, bool] = {}
        warnings: list[str] = []
        for entry in reply["links"]:
            n = entry["candidate"]
            if not 1 <= n <= len(cands):
                warnings.append(f"the LLM answered for candidate {n}, which does not exist; ignored")
            elif n not in verdicts:
                verdicts[n] = entry["link"]
        missing = [str(n) for n in range(1, len(cands) + 1) if n not in verdicts]
        if missing:
            warnings.append(f"the LLM gave no verdict for candidate(s) {', '.join(missing)}; not linked")
        for w in warnings:
            log.warning("link verification: %s", w)
        ids = [cands[n - 1][0] for n in range(1, len(cands) + 1) if verdicts.get(n)]
        return LinkDecision(list(dict.fromkeys(ids)), decided_by=self.label, warnings=warnings)

    def evolve(self, note: NoteView, neighbours: list[NoteView]) -> EvolutionDecision:
        """One call for up to ``evolve_max`` neighbours: new context and tags for those that change.

        Raises:
            ValidationError: ``note`` or a neighbour is not a :class:`NoteView`.
            LLMError: as :meth:`enrich`.
        """
        check_views(note, neighbours)
        used = [nb for nb in neighbours[: self.evolve_max] if nb.id != note.id]
        if not used:
            return EvolutionDecision([], decided_by=self.label)
        reply = self.llm.complete_json(prompts.EVOLVE_SYSTEM, prompts.evolve_user(note, used),
                                       schema=prompts.EVOLVE_SCHEMA, name="memory_evolution")
        updates: list[EvolutionUpdate] = []
        warnings: list[str] = []
        done: set[int] = set()
        for entry in reply["updates"]:
            n = entry["neighbour"]
            if not 1 <= n <= len(used) or n in done:
                warnings.append(f"the LLM sent an update for neighbour {n}, which does not exist or repeats; ignored")
                continue
            done.add(n)
            nb = used[n - 1]
            context = trim(" ".join(entry["context"].split()), self.context_chars)
            tags = tuple(_clean_list(entry["tags"], self.max_tags, fold=normalise_tag))
            if not tags:
                warnings.append(f"the LLM sent no usable tags for neighbour {n}; kept its tags")
                tags = nb.tags
            if context == nb.context and tags == tuple(nb.tags):
                continue
            updates.append(EvolutionUpdate(nb.id, context, tags, self.label, "decided by the LLM"))
        for w in warnings:
            log.warning("memory evolution: %s", w)
        return EvolutionDecision(updates, decided_by=self.label, warnings=warnings)


def _clean_list(values: Iterable[Any], limit: int, *, fold: Any) -> list[str]:
    """Folded, non-blank, first-seen-unique (case-insensitively) values, at most ``limit``."""
    out: dict[str, str] = {}
    for value in values:
        folded = fold(" ".join(str(value).split()))
        if folded and folded.lower() not in out:
            out[folded.lower()] = folded
    return list(out.values())[:limit]

