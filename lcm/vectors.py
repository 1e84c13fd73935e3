"""The embedder seam of lcm and the vector maths of semantic recall: int8 packing and top-k.

lcm does not import amem: :class:`TextEmbedder` has the very shape of amem's ``Embedder``
(``model_id``, ``dim``, ``embed(texts, kind)``), so the note store's embedder plugs in as it is.
numpy is imported on first use: opening a store or ingesting never pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TextEmbedder", "Kind", "pack", "unpack_scores", "top_k", "mean_of", "off_mean"]

Kind = Literal["query", "passage"]


@runtime_checkable
class TextEmbedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``model_id`` names the model and every setting that changes its vectors: lcm keeps it
    with each vector and never compares vectors of two models. ``kind`` lets an asymmetric
    model (e5's ``query:`` / ``passage:`` prefixes) encode the question and the stored text
    differently.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """A float32 array ``[len(texts), dim]`` of unit-length rows."""
        ...


def pack(vector: np.ndarray) -> tuple[float, bytes]:
    """One vector as ``(scale, int8 bytes)``: a quarter of float32's size.

    The scale is per vector (its largest magnitude over 127), so the rounding error is at
    most half a step of that vector's own range; cosines move by about 1e-3, far below the
    gaps between neighbours a ranking depends on.
    """
    import numpy as np

    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(v)):
        raise ValueError("the embedder returned a vector with NaN or infinite values")
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    if peak == 0.0:
        return 0.0, np.zeros(v.size, dtype=np.int8).tobytes()
    scale = peak / 127.0
    return scale, np.clip(np.rint(v / scale), -127, 127).astype(np.int8).tobytes()


def unpack_scores(blobs: Sequence[bytes], scales: Sequence[float], dim: int, query: np.ndarray) -> np.ndarray:
    """Dot products of ``query`` with packed vectors (cosines, for unit vectors), float32."""
    import numpy as np

    if not blobs:
        return np.zeros(0, dtype=np.float32)
    mat = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dim)
    # A product and a sum along each row, not a matrix-vector product: BLAS takes another path
    # for the last few rows of a matrix, so the same vector scored in batches cut elsewhere got
    # another last bit (583 of 4,096 rows differed), and tied rows changed places between a
    # scan in one batch and one in many (two engines, or two sizes). The row sum is the same
    # however the rows are batched, at about the same speed.
    raw = (mat.astype(np.float32) * np.asarray(query, dtype=np.float32).reshape(-1)).sum(axis=1)
    return np.asarray(raw * np.asarray(scales, dtype=np.float32), dtype=np.float32)


def mean_of(blobs: Sequence[bytes], scales: Sequence[float], dim: int) -> np.ndarray:
    """The mean of packed vectors, float64. One sum over every row at once: the same rows in
    the same order give the same bits on SQLite and PostgreSQL (a sum per batch would depend
    on where each engine's batches end)."""
    import numpy as np

    mat = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), dim)
    # the scales as float32 first, as unpack_scores reads them: PostgreSQL keeps a scale in a
    # float4 column, SQLite in a double, and their last bits must not reach the mean
    per_row = np.asarray(scales, dtype=np.float32).astype(np.float64).reshape(-1, 1)
    rows = mat.astype(np.float64) * per_row
    return np.asarray(rows.sum(axis=0) / len(blobs), dtype=np.float64)


def off_mean(query: np.ndarray, mean: np.ndarray, share: float) -> np.ndarray:
    """``query - share * mean`` at unit length, float32: the query moved off what every item
    of its scope shares (the speakers' names of a chat), so the ranking reads what the
    question asks beyond it (amem's step 1b does the same to its dense leg). The query is
    returned as it is when the result has no length."""
    import numpy as np

    moved = np.asarray(query, dtype=np.float64).reshape(-1) - share * mean
    norm = float(np.linalg.norm(moved))
    if share <= 0 or norm == 0.0:
        return np.asarray(query, dtype=np.float32)
    return np.asarray(moved / norm, dtype=np.float32)


def top_k(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of parallel ``ids`` / ``scores`` arrays, best first (ties: lower id first).

    ``argpartition`` keeps it linear in the batch: a scan merges each batch into its running
    best this way without sorting everything it has read. Rows tied with the k-th score are
    kept by lower id too (``argpartition`` alone keeps an arbitrary few of them), so the answer
    does not depend on how a scan was cut into batches: the same on every engine.
    """
    import numpy as np

    if k <= 0 or len(ids) == 0:
        return ids[:0], scores[:0]
    if len(ids) > k:
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)
        keep = np.concatenate([above, tied[np.argsort(ids[tied], kind="stable")][: k - len(above)]])
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))
    return ids[order], scores[order]
