"""Step 4c of a search: the head of the ranking diversified (maximal marginal relevance).

A question about several events ("which events has she attended?") is answered by notes
from several conversations; the fused ranking fills its head with near-repeats of the best
one. Over the ``HEAD`` best candidates, ``ranking.diversify`` trades a note's fused standing
against its cosine to the notes already picked. LoCoMo dev (benchmarks/RESULTS.md, issue 29):
R@10 of categories 1-4 +0.013 over the neighbour lift, multi-hop +0.02.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import ranking
from ..backends.base import VectorBackend
from ..config import AmemConfig

#: the candidates reordered; the rest keep their place (a limit of at most HEAD is what an
#: agent reads, and each pick compares with every earlier one)
HEAD = 20
#: the calibrated similarity to the fused z scale: a repeat at similarity 1 (identical) weighs
#: 1.5 standard deviations of the fused score. Chosen on half a of LoCoMo dev as 10 per raw e5
#: cosine (0.15 of cosine is one unit of e5's scale); 3 and 6 gave 0.796 and 0.801
PENALTY = 1.5


def diversify(config: AmemConfig, backend: VectorBackend, fused: list[tuple[str, float]],
              similarities: Callable[[np.ndarray], np.ndarray]) -> list[tuple[str, float]]:
    """``fused`` with its head reordered by MMR (``mmr_lambda`` 1 = off); one read of the
    head's vectors. ``similarities`` puts a table of note-to-note cosines on the store's
    calibrated scale (``NoteIndex.similarities``: 0 = unrelated), so that only what is alike
    beyond the embedder's usual closeness counts as a repeat. RRF scores are not on the scale
    this needs: skipped."""
    keep = config.mmr_lambda
    if keep >= 1.0 or config.fusion != "zscore" or len(fused) < 3:
        return fused
    head = fused[:HEAD]
    vectors = {h.id: h.dense for h in backend.retrieve([pid for pid, _ in head],
                                                        with_vectors=True, with_payload=False)
               if h.dense is not None}
    if len(vectors) < len(head):  # a point without a vector cannot be compared: as fused
        return fused
    matrix = np.stack([vectors[pid] for pid, _ in head]).astype(np.float64)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    # every pair scaled at once and handed over as floats: the picks only look values up (a
    # call per pair, scaled one at a time, was half of this step)
    table = similarities(matrix @ matrix.T).tolist()
    return ranking.diversify(head, table, keep, PENALTY) + fused[HEAD:]


__all__ = ["HEAD", "PENALTY", "diversify"]
