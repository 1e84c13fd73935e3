"""The enrichment seam: what the write path asks of an enricher, and the values it gets back.

Three decisions, steps 3-5 of ``add``: build the note's metadata (:meth:`Enricher.enrich`),
confirm which nearest neighbours to link (:meth:`Enricher.verify_links`), and update the
context and tags of linked notes in the light of the new one (:meth:`Enricher.evolve`).
:class:`amem.enrich.OfflineEnricher`, :class:`amem.enrich.LLMEnricher` and
:class:`amem.enrich.FallbackEnricher` implement it.

Every result says who decided (``"llm:<model>"``, ``"offline"`` or ``"offline-fallback"``) and
carries warnings when a degraded path was taken, so the caller can record both on the note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Protocol, Sequence, runtime_checkable

# One definition of the fixed sets, in the note schema.
from ..notes import CATEGORIES as CATEGORIES  # noqa: E402
from ..notes import NOTE_TYPES as NOTE_TYPES  # noqa: E402
OFFLINE = "offline"
OFFLINE_FALLBACK = "offline-fallback"

NoteType = Literal["memory", "knowledge"]


def llm_label(model: str) -> str:
    """The ``enriched_by`` value of a decision the model made."""
    return f"llm:{model}"


@dataclass(frozen=True)
class Enrichment:
    """The metadata of one note (step 3 of ``add``)."""

    keywords: tuple[str, ...]
    tags: tuple[str, ...]
    context: str
    category: str
    note_type: NoteType
    topics: tuple[str, ...]
    enriched_by: str
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"category must be one of {', '.join(CATEGORIES)}, got {self.category!r}")
        if self.note_type not in NOTE_TYPES:
            raise ValueError(f"note_type must be one of {', '.join(NOTE_TYPES)}, got {self.note_type!r}")


@dataclass(frozen=True)
class NoteView:
    """What the decisions need to know of a stored note."""

    id: str
    content: str
    context: str = ""
    keywords: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class EvolutionUpdate:
    """New context and tags for one linked note (step 5); the caller records old and new."""

    id: str
    context: str
    tags: tuple[str, ...]
    decided_by: str
    reason: str = ""


class LinkDecision(list[str]):
    """The ids to link, best candidate first: a plain ``list[str]`` that also says who decided.

    Attributes:
        decided_by: ``"llm:<model>"``, ``"offline"`` or ``"offline-fallback"``.
        warnings: why a degraded path was taken, if one was.
    """

    def __init__(self, ids: Iterable[str] = (), *, decided_by: str, warnings: Sequence[str] = ()) -> None:
        super().__init__(ids)
        self.decided_by = decided_by
        self.warnings: tuple[str, ...] = tuple(warnings)

    def __repr__(self) -> str:
        return f"LinkDecision({list(self)!r}, decided_by={self.decided_by!r}, warnings={self.warnings!r})"


class EvolutionDecision(list[EvolutionUpdate]):
    """The updates to apply (unchanged notes are absent): a plain list that also says who decided."""

    def __init__(self, updates: Iterable[EvolutionUpdate] = (), *, decided_by: str,
                 warnings: Sequence[str] = ()) -> None:
        super().__init__(updates)
        self.decided_by = decided_by
        self.warnings: tuple[str, ...] = tuple(warnings)

    def __repr__(self) -> str:
        return f"EvolutionDecision({list(self)!r}, decided_by={self.decided_by!r}, warnings={self.warnings!r})"


#: a link candidate: (note id, note text, cosine similarity to the new note)
Candidate = tuple[str, str, float]


@runtime_checkable
class Enricher(Protocol):
    """Steps 3-5 of ``add``. Implementations never raise for a model failure: the combinator
    (:class:`amem.enrich.FallbackEnricher`) turns those into offline decisions."""

    def enrich(self, text: str) -> Enrichment:
        """Keywords, tags, context, category, note type and topics of ``text``."""
        ...

    def verify_links(self, note_text: str, candidates: list[Candidate]) -> LinkDecision:
        """Which of ``candidates`` (id, text, cosine) the new note should link to."""
        ...

    def evolve(self, note: NoteView, neighbours: list[NoteView]) -> EvolutionDecision:
        """New context and tags for the ``neighbours`` the new ``note`` changes (at most 3 used)."""
        ...
