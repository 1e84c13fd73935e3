"""Step 4 of a search: the configured fusion of the BM25 and dense rankings, best first."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .. import ranking
from ..kernel.fusion import fused_order, rrf
from ..backends.base import Hit, VectorBackend
from ..config import AmemConfig


class ZTable(NamedTuple):
    """What z-score fusion ranks: the candidates, their BM25 and cosine columns, and the score
    assumed where a column lacks a candidate; after fusion, each candidate's z total (the
    fused score before the logistic) and the columns' moments. Step 4b scores the neighbours
    it brings in on the same table (their cosines added to the second column) and reuses the
    candidates' totals: computing them again was a third of that step."""

    candidates: list[str]
    columns: list[dict[str, float]]
    missing: list[float]
    totals: dict[str, float]
    moments: list[tuple[float, float]]


def fuse(config: AmemConfig, backend: VectorBackend, qvec: np.ndarray,
         sparse_hits: Sequence[Hit], dense_hits: Sequence[Hit], pool: int,
         cosine: dict[str, float]) -> tuple[list[tuple[str, float]], ZTable | None]:
    """The fused ranking (``amem.ranking``), best first, and the z-score table it came from
    (None with RRF); fills ``cosine`` as it needs.

    z-score fusion needs every candidate's cosine: a BM25-only candidate's comes with the
    legs (``search_legs`` scores the BM25 hits by the query vector under the same gate); one
    still missing is read from its stored vector (``fill_cosines``; guessing it from the dense
    cut-off measured MRR 0.550 -> 0.501 on LoCoMo dev). Its missing BM25 score is
    ``ranking.unranked_score`` of the BM25 list.
    """
    weights = [config.sparse_weight, config.dense_weight]
    if config.fusion == "rrf":
        return rrf([[h.id for h in sparse_hits], [h.id for h in dense_hits]],
                   k=config.rrf_k, weights=weights), None
    table = zscore_columns(backend, qvec, sparse_hits, dense_hits, pool, cosine)
    totals, moments = ranking.zscore_totals(table.candidates, table.columns, weights,
                                            table.missing)
    return fused_order(totals), table._replace(totals=totals, moments=moments)


def zscore_columns(backend: VectorBackend, qvec: np.ndarray, sparse_hits: Sequence[Hit],
                   dense_hits: Sequence[Hit], pool: int, cosine: dict[str, float]) -> ZTable:
    """The :class:`ZTable` of the legs' hits, before fusion (fills ``cosine`` as it needs)."""
    candidates = [h.id for h in sparse_hits] + [h.id for h in dense_hits]
    fill_cosines(backend, qvec, candidates, cosine)
    # Scores at 1e-6, as in settle_ties: engines (and an engine's cosine against ours from
    # the stored vector) differ in the 7th digit, which must not reorder equal notes.
    bm25_scores = {h.id: round(h.score, 6) for h in sparse_hits}
    cosines = {pid: round(c, 6) for pid, c in cosine.items()}
    # a candidate without a stored vector (none should lack one) gets the dense list's floor
    dense_floor = min((cosines[h.id] for h in dense_hits), default=0.0)
    return ZTable(candidates, [bm25_scores, cosines],
                  [ranking.unranked_score(list(bm25_scores.values()), pool), dense_floor],
                  totals={}, moments=[])  # filled by the fusion


def fill_cosines(backend: VectorBackend, qvec: np.ndarray, pids: Sequence[str],
                 cosine: dict[str, float]) -> None:
    """A candidate whose cosine the legs did not give (a backend whose legs leave some out, a
    note brought in later): take it from its stored vector."""
    missing = [pid for pid in pids if pid not in cosine]
    if missing:
        for hit in backend.retrieve(missing, with_vectors=True, with_payload=False):
            if hit.dense is not None:
                cosine[hit.id] = float(np.dot(qvec, hit.dense))


def settle_ties(hits: list[Hit]) -> list[Hit]:
    """Order equal scores by id: engines break ties differently, results must not differ.

    Scores are compared at 1e-6 so float noise between engines cannot reorder real ties.
    """
    return sorted(hits, key=lambda h: (-round(h.score, 6), h.id))


__all__ = ["ZTable", "fill_cosines", "fuse", "settle_ties", "zscore_columns"]
