"""``amem.nearduplicate``: a fold is scored content against content, whatever the engine holds."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from amem.backends.base import Hit
from amem.embed.hashing import HashingEmbedder
from amem.write.nearduplicate import ContentVectors, content_cosines
from amem.notes import Note, content_hash

HASHING = HashingEmbedder(dim=64)


class Counting:
    """The hashing embedder's passages, counting calls and texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.asarray(HASHING.embed(list(texts), kind="passage"))


def unit(text: str) -> np.ndarray:
    v = np.asarray(HASHING.embed([text], kind="passage")[0], dtype=np.float32)
    return v / np.linalg.norm(v)


def hit(content: str, dense: np.ndarray, **fields: object) -> Hit:
    note = Note(id=content[:8], content=content, agent_id="a", hash=content_hash(content),
                **fields)  # type: ignore[arg-type]
    return Hit(id=note.id, score=0.0, payload=note.to_payload(), dense=dense)


def test_the_enrichment_in_a_stored_vector_never_reaches_the_score() -> None:
    # the engine's vector of an LLM-enriched note embeds a long context; the score does not
    content = "My car brakes squeak when it rains"
    enriched = hit(content, unit(content + "\nContext: " + "a long shared context " * 20),
                   enriched_by="llm:x", context="a long shared context " * 20)
    embed = Counting()
    (score,) = content_cosines(unit(content), [enriched], ContentVectors(embed))
    assert abs(score - 1.0) < 1e-5
    assert embed.calls == [[content]]


def test_a_stale_vector_is_not_read_and_a_content_vector_is_lent() -> None:
    old, now = "Deploys run on Fridays", "Deploys run on Fridays\n\nAnd on Mondays too"
    stale = hit(now, unit(old), vector_stale=True)  # the vector of an earlier text
    fresh = hit("Alice prefers green tea", unit("Alice prefers green tea"))
    embed = Counting()
    vectors = ContentVectors(embed)
    scores = content_cosines(unit(now), [stale, fresh], vectors)
    assert abs(scores[0] - 1.0) < 1e-5
    assert embed.calls == [[now]]  # the fresh note lent its stored vector, the stale one did not
    assert set(vectors.fresh) == {content_hash(now)}
    content_cosines(unit(now), [stale, fresh], vectors)
    assert len(embed.calls) == 1  # both now cached by content hash


def test_new_notes_are_embedded_in_one_call_and_cached() -> None:
    embed = Counting()
    vectors = ContentVectors(embed, size=2)
    notes = [Note(id=t, content=t, agent_id="a", hash=content_hash(t)) for t in ("x y", "y z", "z w")]
    out = vectors.embed(notes)
    assert embed.calls == [["x y", "y z", "z w"]] and len(out) == 3
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-5 for v in out)
    # the bounded cache kept the two latest; the first is embedded again when asked
    content_cosines(out[0], [hit("x y", unit("q r"), vector_stale=True)], vectors)
    assert embed.calls[-1] == ["x y"]
