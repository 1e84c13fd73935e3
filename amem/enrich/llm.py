"""The LLM enricher: steps 3-5 of ``add`` decided by a chat model, one JSON call each.

Replies are checked against the schemas in :mod:`amem.enrich.prompts` by the client, then
normalised here (trimmed, de-duplicated, capped). A reply is untrusted input, whatever the note
said to the model: a keyword, tag or topic longer than ``max_term_chars`` is dropped, lists past
their count are cut, a long context is trimmed, fields the schema does not have (an ``agent_id``,
``links`` to ids of its choosing) are ignored, and each of these leaves a warning on the
result. Anything unusable raises
:class:`amem.errors.LLMError` or :class:`amem.errors.LLMResponseError`; the combinator
(:class:`amem.enrich.FallbackEnricher`) turns that into an offline decision.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

from ..errors import LLMResponseError
from ..kernel.llm import LLM
from . import prompts
from .base import (CATEGORIES, NOTE_TYPES, Candidate, Enrichment, EvolutionDecision, EvolutionUpdate, LinkDecision,
                   NoteView, llm_label)
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
        max_term_chars: a keyword, tag or topic longer than this is dropped (cutting it would
            store a fragment; a real keyword is a few words).
        evolve_max: neighbours sent for evolution.
    """

    def __init__(self, llm: LLM, *, max_keywords: int = 10, max_tags: int = 10, max_topics: int = 3,
                 context_chars: int = 300, max_term_chars: int = 60, evolve_max: int = 3) -> None:
        self.llm = llm
        self.max_keywords = max_keywords
        self.max_tags = max_tags
        self.max_topics = max_topics
        self.context_chars = context_chars
        self.max_term_chars = max_term_chars
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
        warnings: list[str] = []
        extra = sorted(set(reply) - set(prompts.ENRICH_SCHEMA["properties"]))
        if extra:
            warnings.append(f"ignored field(s) the enrichment does not have: {_names(extra)}")
        keywords = self._terms(reply["keywords"], "keywords", self.max_keywords, str.strip, warnings)
        tags = self._terms(reply["tags"], "tags", self.max_tags, normalise_tag, warnings)
        topics = self._terms(reply["topics"], "topics", self.max_topics, normalise_tag, warnings)
        context = self._context(reply["context"], "context", warnings)
        if not keywords or not tags or not context:
            raise LLMResponseError("the LLM reply has blank keywords, tags or context", raw=_preview(reply))
        for name, allowed in (("category", CATEGORIES), ("note_type", NOTE_TYPES)):
            if reply[name] not in allowed:  # the real client checked the schema; another LLM may not
                raise LLMResponseError(f"the LLM reply's {name} {str(reply[name])[:40]!r} is not one of "
                                       f"{', '.join(allowed)}", raw=_preview(reply))
        for w in warnings:
            log.warning("enrichment: %s", w)
        return Enrichment(keywords=tuple(keywords), tags=tuple(tags), context=context, category=reply["category"],
                          note_type=reply["note_type"], topics=tuple(topics), enriched_by=self.label,
                          warnings=tuple(warnings))

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
        invented: list[int] = []
        for entry in reply["links"]:
            n = entry["candidate"]
            if not 1 <= n <= len(cands):
                invented.append(n)
            elif n not in verdicts:
                verdicts[n] = entry["link"]
        if invented:  # one warning however many: a reply may list thousands
            warnings.append(f"the LLM answered for candidate {_numbers(invented)}, which does not exist; ignored")
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
        invalid: list[int] = []
        for entry in reply["updates"]:
            n = entry["neighbour"]
            if not 1 <= n <= len(used) or n in done:
                invalid.append(n)
                continue
            done.add(n)
            nb = used[n - 1]
            context = self._context(entry["context"], f"context of neighbour {n}", warnings)
            tags = tuple(self._terms(entry["tags"], f"tags of neighbour {n}", self.max_tags, normalise_tag, warnings))
            if not tags:
                warnings.append(f"the LLM sent no usable tags for neighbour {n}; kept its tags")
                tags = nb.tags
            if context == nb.context and tags == tuple(nb.tags):
                continue
            updates.append(EvolutionUpdate(nb.id, context, tags, self.label, "decided by the LLM"))
        if invalid:  # one warning however many: a reply may list thousands
            warnings.append(f"the LLM sent updates for neighbour {_numbers(invalid)}, which does not exist "
                            "or repeats; ignored")
        for w in warnings:
            log.warning("memory evolution: %s", w)
        return EvolutionDecision(updates, decided_by=self.label, warnings=warnings)


    def _terms(self, values: Iterable[Any], field: str, limit: int, fold: Callable[[str], str],
               warnings: list[str]) -> list[str]:
        """Folded, non-blank, first-seen-unique (case-insensitively) terms of at most
        ``max_term_chars``, at most ``limit`` of them; what was dropped is said in ``warnings``."""
        out: dict[str, str] = {}
        too_long = 0
        for value in values:
            flat = " ".join(str(value).split())
            if len(flat) > self.max_term_chars:
                too_long += 1
                continue
            folded = fold(flat)
            if folded and folded.lower() not in out:
                out[folded.lower()] = folded
        if too_long:
            warnings.append(f"dropped {too_long} of the LLM's {field} longer than {self.max_term_chars} characters")
        if len(out) > limit:
            warnings.append(f"kept the first {limit} of the LLM's {len(out)} {field}")
        return list(out.values())[:limit]

    def _context(self, value: Any, field: str, warnings: list[str]) -> str:
        """One line of at most ``context_chars``; a longer one is trimmed, with a warning."""
        flat = " ".join(str(value).split())
        if len(flat) > self.context_chars:
            warnings.append(f"trimmed the LLM's {field} from {len(flat)} to {self.context_chars} characters")
        return trim(flat, self.context_chars)


def _names(keys: list[str], shown: int = 5) -> str:
    """Some of ``keys``, each cut short: they come from the reply and may be anything."""
    names = ", ".join(repr(k[:40]) for k in keys[:shown])
    return names + (f" and {len(keys) - shown} more" if len(keys) > shown else "")


def _numbers(values: list[int], shown: int = 5) -> str:
    text = ", ".join(str(v) for v in values[:shown])
    return text + (f" and {len(values) - shown} more" if len(values) > shown else "")


def _preview(reply: dict[str, Any]) -> str:
    """The reply as text for an error's ``.raw``, cut short (its fields may be huge)."""
    return repr(reply)[:4096]
