"""Step 4c of a search: the head of the ranking diversified (maximal marginal relevance).

A question about several events ("which events has she attended?") is answered by notes
from several conversations; the fused ranking fills its head with near-repeats of the best
one. Over the ``HEAD`` best candidates, ``ranking.diversify`` trades a note's fused standing
against its cosine to the notes already picked. LoCoMo dev (benchmarks/RESULTS.md, issue 29):
R@10 of categories 1-4 +0.013 over the neighbour lift, multi-hop +0.02.
"""

from __future__ import annotations

import numpy as np

from .. import ranking
from ..backends.base import VectorBackend
from ..config import AmemConfig

#: the candidates reordered; the rest keep their place (a limit of at most HEAD is what an
#: agent reads, and each pick compares with every earlier one)
HEAD = 20
#: cosine units to the fused z scale: e5-small puts the notes of one conversation at cosines
#: 0.75-0.95, so a tenth of cosine weighs about one standard deviation of the fused score
PENALTY = 10.0


def diversify(config: AmemConfig, backend: VectorBackend,
              fused: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``fused`` with its head reordered by MMR (``mmr_lambda`` 1 = off); one read of the
    head's vectors. RRF scores are not on the scale this needs: skipped there."""
    keep = config.mmr_lambda
    if keep >= 1.0 or config.fusion != "zscore" or len(fused) < 3:
        return fused
    head = fused[:HEAD]
    vectors = {h.id: h.dense for h in backend.retrieve([pid for pid, _ in head],
                                                        with_vectors=True, with_payload=False)
               if h.dense is not None}
    if len(vectors) < len(head):  # a point without a vector cannot be compared: as fused
        return fused
    unit = {pid: v / (float(np.linalg.norm(v)) or 1.0) for pid, v in vectors.items()}
    reordered = ranking.diversify(head, lambda a, b: float(np.dot(unit[a], unit[b])), keep,
                                  PENALTY)
    return reordered + fused[HEAD:]


__all__ = ["HEAD", "PENALTY", "diversify"]
