"""Step 2 beside step 1: the BM25 leg runs while the query is embedded.

The sparse ranking needs the query's terms, not its vector, so it has no reason to wait for
the embedding, which is most of a search's time (the default embedder, ~4-6 ms a query on one
onnxruntime thread, against ~1-2 ms for the BM25 leg with its candidates' ranking fields).
onnxruntime lets go of the interpreter lock while the model runs; the engine binding keeps it
for a query. So the leg goes to a worker thread *before* the caller starts embedding: the
worker takes the lock while the model runs, and the caller finds the leg done when the
embedding returns (started the other way round, the worker waited for the caller's query to
end and nothing overlapped: measured, 10k notes after ``optimize()``, embed 6.2 ms + leg 2.0
ms -> 8.3 ms one way, 6.4 ms the other).

The worker also reads the BM25 hits' vectors (``with_vectors``): the dense leg then scores
them from the vectors in hand instead of in an exact query over their ids after the
embedding, and MMR's head finds those of them it holds already read (measured, 10k notes
after ``optimize()``, 300 questions alternated: the legs after the embedding 1.38 -> 1.24 ms
at p50, against a 0.66 ms read on the worker beside a ~5 ms embedding).

What it changes is wall time only: the same work runs, on a second core. A machine with one
core, or a server whose cores all search at once, gets no gain and loses ~0.05 ms to the
hand-over; results are the same either way (the leg needs no query vector).

The workers are those of :mod:`amem.kernel.beside`, shared by every store of the process
(and lcm's greps), made again in a forked child.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..backends.base import Hit, SparseVector, VectorBackend, Where
from ..kernel.beside import beside


def embed_beside_bm25(embed: Callable[[], np.ndarray], engine: VectorBackend,
                      sparse: SparseVector | None, where: Where, limit: int,
                      fields: Sequence[str]) -> tuple[np.ndarray, list[Hit] | None]:
    """The query's vector (``embed()``) and the BM25 ranking (``engine.sparse_search``, each
    hit with its vector), the ranking read on a worker while ``embed`` runs here; None
    without a sparse vector (a query of stop words only has no BM25 leg).

    An error of either is raised here, after both have ended: no engine call outlives the
    search that started it (a store closed right after an error finds no query running).
    """
    if sparse is None:
        return embed(), None
    hits, qvec = beside(lambda: engine.sparse_search(sparse, where, limit, fields=fields,
                                                     with_vectors=True), embed)
    return qvec, hits


__all__ = ["embed_beside_bm25"]
