"""Step 4b2 of a search: a candidate the best candidates link to is lifted by their standing.

Links (``amem.write``) join a note to notes that share its rarer words, those told on other
days first: the pieces of one story told weeks apart. A question that needs two of them
("what did she do after the race?") often ranks one well and the other just below the first
ten, because the second shares fewer words with the question. Here the notes the first
``link_lift_seeds`` candidates link to gain ``link_lift`` times the sum of those seeds'
fused standings above the candidates' mean (``ranking.link_votes``): a note several good
matches point to climbs. The first ``link_lift_keep`` candidates stay where fusion put them
and no lifted note passes them, so the best answer keeps its place; only candidates move,
nothing is brought in (step 7 still appends linked notes after the matches).

Measured on LoCoMo dev with offline enrichment and links, four embedding realizations, each
against itself without the step (benchmarks/RESULTS.md, "Links as votes", and "Links
between one speaker's turns"): multi-hop R@10 +0.012 to +0.050 (mean +0.035), R@10 +0.004
to +0.012, MRR +0.001 to +0.004. A store without links (the
episodic fast path) reads the seeds and ranks as before. Only z-score fusion has the scale
this needs: with RRF the step is skipped.
"""

from __future__ import annotations

from typing import Sequence

from .. import ranking
from ..backends.base import Hit, VectorBackend
from ..config import AmemConfig
from ..notes import point_id


def lift(config: AmemConfig, backend: VectorBackend, agent_id: str,
         fused: Sequence[tuple[str, float]]) -> tuple[list[tuple[str, float]], dict[str, Hit]]:
    """``fused`` with the seeds' linked candidates lifted, and the seeds read whole.

    The seeds' whole payloads are read (their links are not among the ranking fields); they
    are returned so the search's read of its matches' payloads skips them (the matches are
    mostly seeds). Returns ``fused`` unchanged, and nothing read, when the step is off or the
    fusion is RRF.
    """
    weight, keep = config.link_lift, config.link_lift_keep
    if weight <= 0 or config.fusion != "zscore" or len(fused) <= keep:
        return list(fused), {}
    seeds = {h.id: h for h in backend.retrieve([pid for pid, _ in fused[:config.link_lift_seeds]])}
    voters: dict[str, list[str]] = {}
    for pid, hit in seeds.items():
        links = hit.payload.get("links")
        for note_id in links if isinstance(links, list) else ():
            if isinstance(note_id, str):  # a link names a note of the same agent
                voters.setdefault(point_id(agent_id, note_id), []).append(pid)
    if not voters:
        return list(fused), seeds
    return ranking.link_votes(fused, voters, weight, keep), seeds


__all__ = ["lift"]
