"""``SearchResult``: one hit of a search as the tools return it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class SearchResult:
    """One hit as the tools return it."""

    id: str
    content: str
    context: str
    keywords: list[str]
    tags: list[str]
    topics: list[str]
    links: list[str]
    timestamp: str
    note_type: str
    similarity: float
    rrf: float
    via: str  # "match" or "link"
    subjects: list[str] = field(default_factory=list)
    category: str = "General"
    #: the score matches are ordered by (``rrf`` after the heat boost); 0 for linked notes
    score: float = 0.0
    #: "bm25", "dense" or "both" for a match; "neighbour" for a match neither ranking returned,
    #: brought in as a note told right before or after a top match (``amem.search.adjacent``);
    #: "link" for a linked note
    found_by: str = "link"
    #: the newer note that replaced this one (only with ``include_superseded``)
    superseded_by: str | None = None
    #: older notes this one replaced, hidden from search for it (``include_superseded``
    #: shows them; ``amem history`` tells the chain, ``amem unsupersede`` undoes one)
    hidden: list[str] = field(default_factory=list)
    #: a newer note that changed part of this one's facts (``amem.supersede.rule.partly``):
    #: this one is still shown for the rest, listed after that note when both are found
    partly_superseded_by: str | None = None
    #: when the event happened (UTC ISO; the write time when none was given)
    event_time: str = ""
    #: the caller's labels (``amem.notefields``)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: "usage" when the agent opened this note after a near-identical query (``amem.search.usage``)
    boosted_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def found_by(sparse: bool, dense: bool) -> str:
    """Which ranking found a match: ``bm25``, ``dense`` or ``both``."""
    return "both" if sparse and dense else ("bm25" if sparse else "dense")


def make_result(payload: dict[str, Any], similarity: float, rrf_score: float, via: str,
                score: float, found: str, boosted_by: str | None = None) -> SearchResult:
    """The result of one stored note's payload."""
    return SearchResult(
        id=payload["id"], content=payload["content"], context=payload.get("context", ""),
        keywords=list(payload.get("keywords", [])), tags=list(payload.get("tags", [])),
        topics=list(payload.get("topics", [])), links=list(payload.get("links", [])),
        timestamp=payload.get("timestamp", ""), note_type=payload.get("note_type", "memory"),
        similarity=round(float(similarity), 6), rrf=round(float(rrf_score), 8), via=via,
        subjects=list(payload.get("subjects", [])), category=payload.get("category", "General"),
        score=round(float(score), 8), found_by=found,
        superseded_by=payload.get("superseded_by"),
        hidden=list(payload.get("supersedes") or []),
        partly_superseded_by=payload.get("partly_superseded_by"),
        event_time=payload.get("event_time") or payload.get("timestamp", ""),
        metadata=dict(payload.get("metadata") or {}), boosted_by=boosted_by)


__all__ = ["SearchResult", "found_by", "make_result"]
