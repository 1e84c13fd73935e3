"""The enricher of the write path, built on first use, and how a note takes its enrichment."""

from __future__ import annotations

from ..enrich.base import Enricher, Enrichment, NoteView
from ..kernel.llm import LLM
from ..notes import Note
from .drafts import Draft


class EnricherSlot:
    """The store's one enricher (LLM when configured, offline otherwise), built on first use:
    the episodic fast path never loads keyword models or LLM clients."""

    def __init__(self, llm: LLM | None) -> None:
        self._llm = llm
        self._enricher: Enricher | None = None

    @property
    def llm_configured(self) -> bool:
        """Whether an LLM verifies links (else the offline rule of ``amem.write.linking``)."""
        return self._llm is not None

    def get(self) -> Enricher:
        if self._enricher is None:
            from ..enrich import build_enricher

            self._enricher = build_enricher(self._llm)
        return self._enricher


def enrich_draft(slot: EnricherSlot, draft: Draft) -> list[str]:
    """Fill keywords/tags/context/category unless the caller gave them; return warnings."""
    note = draft.note
    if not draft.enrich:
        note.enriched_by = "given" if draft.given_enrichment else "none"
        return []
    if draft.given_enrichment:
        note.enriched_by = "given"
        return []
    result: Enrichment = slot.get().enrich(note.content)
    note.keywords = list(result.keywords)
    note.tags = list(result.tags)
    note.context = result.context
    note.category = result.category
    if (not draft.given_type and note.note_type == "memory" and result.note_type == "knowledge"
            and not note.topics):
        note.note_type = "knowledge"
    note.topics = note.topics or list(result.topics)
    note.enriched_by = result.enriched_by
    note.warnings = list(result.warnings)
    return list(result.warnings)


def enrich_edit(slot: EnricherSlot, note: Note) -> list[str]:
    """Enrich an edited text as ``add`` would; given or skipped enrichment is kept, and said."""
    if note.enriched_by == "none":
        return []  # stored by the episodic fast path: it stays unenriched
    if note.enriched_by == "given":
        return ["the note's keywords, tags and context were given when it was added and are "
                "kept; they may no longer fit the new text"]
    result = slot.get().enrich(note.content)
    note.keywords, note.tags = list(result.keywords), list(result.tags)
    note.context, note.category = result.context, result.category
    note.enriched_by = result.enriched_by
    note.warnings = list(result.warnings)
    return list(result.warnings)


def view_of_note(note: Note) -> NoteView:
    """What the enricher's evolution step reads of a note."""
    return NoteView(id=note.id, content=note.content, context=note.context,
                    keywords=tuple(note.keywords), tags=tuple(note.tags))


__all__ = ["EnricherSlot", "enrich_draft", "enrich_edit", "view_of_note"]
