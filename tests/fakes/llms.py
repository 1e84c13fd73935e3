"""Canned answers of a JSON LLM for write-path tests: a fixed enrichment, and every candidate
linked (so a test controls which notes get links by which notes exist)."""

from __future__ import annotations

from typing import Any

#: the enrichment every note gets
ENRICHMENT = {"keywords": ["note"], "tags": ["note"], "context": "A note.",
              "category": "General", "note_type": "memory", "topics": []}


def enrich_and_link_all(name: str, user: str) -> dict[str, Any] | None:
    """The answer to a ``note_enrichment`` or ``link_decisions`` call (every candidate of the
    prompt linked); None for any other call, which the caller answers itself."""
    if name == "note_enrichment":
        return dict(ENRICHMENT)
    if name == "link_decisions":
        count = user.count("<candidate ")
        return {"links": [{"candidate": n, "link": True} for n in range(1, count + 1)]}
    return None
