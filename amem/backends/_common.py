"""Input checks and small conversions shared by every backend.

Each backend validates what it is handed before the engine sees it, so a bad id or vector
fails with a :class:`ValidationError` naming the field instead of an engine error string,
and nothing stored changes.
"""

from __future__ import annotations

import math
import operator
import re
import uuid
from typing import Any, Callable, Iterator, Sequence, cast

import numpy as np

from amem.backends.base import DENSE, SPARSE, HasId, Hit, Point, SparseVector, Where
from amem.errors import ValidationError

# Both engines (qdrant-edge and Qdrant's own RRF, local mode included) score a prefetch hit as
# 1 / (k + position) with position counted from 0, measured on literal data in our tests.
# Our contract is 1 / (k + rank) with rank from 1, so the engine gets k + 1.
RRF_RANK_BASE = 0


def engine_rrf_k(k: int) -> int:
    """The engine k that makes the engine's 1/(k' + position0) equal 1/(k + rank1)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValidationError(f"rrf k must be a non-negative integer, got {k!r}", field="k")
    return k + 1 - RRF_RANK_BASE


def rrf_weights(weights: Any, with_sparse: bool) -> list[float] | None:
    """The engine's per-prefetch weights for ``(dense, sparse)`` (None: unweighted)."""
    if weights is None:
        return None
    if not isinstance(weights, (tuple, list)) or len(weights) != 2 or not all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w > 0 for w in weights
    ):
        raise ValidationError(f"weights must be two positive numbers (dense, sparse), got {weights!r}",
                              field="weights")
    dense_w, sparse_w = float(weights[0]), float(weights[1])
    return [dense_w, sparse_w] if with_sparse else [dense_w]


def ties_by_id(hits: list[Hit]) -> list[Hit]:
    """``hits`` best first, equal scores in id order.

    RRF ties are common (rank 3 in one list scores the same from either list) and each engine
    breaks them its own way; ordering them by id makes every backend return the same order.
    """
    return sorted(hits, key=lambda h: (-h.score, h.id))


#: a UUID already in its canonical form (lower-case hex, hyphenated): taken as it is
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def check_id(point_id: Any, field: str = "id") -> str:
    """The canonical (lower-case, hyphenated) form of a UUID string id."""
    if not isinstance(point_id, str):
        raise ValidationError(f"{field} must be a UUID string, got {type(point_id).__name__}", field=field)
    # the ids a search passes back are the engine's own, canonical: a match is 0.3 us, the
    # parse below 2.5 us (a search checks ~40 ids)
    if _CANONICAL_UUID.fullmatch(point_id):
        return point_id
    try:
        return str(uuid.UUID(point_id))
    except ValueError:
        raise ValidationError(f"{field} is not a UUID: {point_id!r}", field=field) from None


def check_ids(ids: Sequence[str], field: str = "ids") -> list[str]:
    """Canonical UUID strings for ``ids``, order kept, duplicates dropped."""
    if isinstance(ids, str):
        raise ValidationError(f"{field} must be a sequence of ids, not one string", field=field)
    return list(dict.fromkeys(check_id(i, field) for i in ids))


def check_limit(limit: Any, field: str = "limit") -> int:
    """A positive integer limit."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValidationError(f"{field} must be a positive integer, got {limit!r}", field=field)
    return limit


def dense_list(vector: Any, dim: int, field: str = "dense") -> list[float]:
    """A finite, non-zero float vector of length ``dim`` as a plain list for the engine."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.ndim != 1 or arr.shape[0] != dim:
        raise ValidationError(f"{field} must be a vector of {dim} floats, got shape {arr.shape}", field=field)
    # One dot product screens NaN, infinities and the zero vector (this runs for every write).
    square = float(np.dot(arr, arr))
    if not math.isfinite(square):
        raise ValidationError(f"{field} holds NaN, infinite or overflowing values", field=field)
    if square == 0.0:
        # Cosine of a zero vector is undefined; the engine would store NaNs.
        raise ValidationError(f"{field} is the zero vector", field=field)
    return cast("list[float]", arr.tolist())


def sparse_lists(vector: Any, field: str = "sparse") -> tuple[list[int], list[float]]:
    """Indices and values of a :class:`SparseVector`, checked sorted, unique, uint32 and finite."""
    if not isinstance(vector, SparseVector):
        raise ValidationError(f"{field} must be a SparseVector, got {type(vector).__name__}", field=field)
    try:
        indices = [operator.index(i) for i in vector.indices]
        values = [float(v) for v in vector.values]
    except (TypeError, ValueError):
        raise ValidationError(f"{field} indices must be integers and values numbers", field=field) from None
    if len(indices) != len(values):
        raise ValidationError(
            f"{field} has {len(indices)} indices but {len(values)} values", field=field
        )
    if indices:
        if any(b <= a for a, b in zip(indices, indices[1:])):
            raise ValidationError(f"{field} indices must be sorted and unique", field=field)
        if indices[0] < 0 or indices[-1] >= 2**32:  # sorted: the ends bound the rest
            raise ValidationError(f"{field} indices must fit in uint32", field=field)
        if not math.isfinite(sum(values)):  # NaN or inf anywhere makes the sum non-finite
            raise ValidationError(f"{field} holds NaN or infinite values", field=field)
    return indices, values


def check_start(start: Any) -> float | None:
    """None, or a finite number where an ordered read begins (``times``)."""
    if start is None:
        return None
    if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start):
        raise ValidationError(f"start must be a finite number, got {start!r}", field="start")
    return float(start)


def payload_fields(fields: Any) -> bool | list[str]:
    """The engines' payload selector of ``fields``: None for the whole payload, else the
    named keys (a non-empty list of non-empty strings)."""
    if fields is None:
        return True
    if isinstance(fields, str) or not isinstance(fields, (list, tuple)) or not fields \
            or not all(isinstance(f, str) and f for f in fields):
        raise ValidationError(f"fields must be a non-empty list of payload keys, got {fields!r}",
                              field="fields")
    return list(fields)


def check_point(point: Any, dim: int) -> tuple[str, list[float], tuple[list[int], list[float]], dict[str, Any]]:
    """The checked parts of one point: id, dense list, sparse lists, payload."""
    if not isinstance(point, Point):
        raise ValidationError(f"expected a Point, got {type(point).__name__}", field="points")
    if not isinstance(point.payload, dict):
        raise ValidationError("payload must be a dict", field="payload")
    return (
        check_id(point.id),
        dense_list(point.dense, dim),
        sparse_lists(point.sparse),
        point.payload,
    )


def check_update(point_id: Any, payload: Any, dim: int, dense: Any, sparse: Any
                 ) -> tuple[str, dict[str, Any]]:
    """The checked id and the vectors (dense list, sparse lists) of an ``update_point`` call."""
    if not isinstance(payload, dict):
        raise ValidationError("payload must be a dict", field="payload")
    vectors: dict[str, Any] = {}
    if dense is not None:
        vectors[DENSE] = dense_list(dense, dim)
    if sparse is not None:
        vectors[SPARSE] = sparse_lists(sparse)
    return check_id(point_id), vectors


def point_where(point_id: str, where: Where | None) -> Where:
    """One point, and only while it matches ``where``."""
    if where is not None and not isinstance(where, Where):
        raise ValidationError("where must be a Where", field="where")
    return Where(must=(HasId((point_id,)),) + ((where,) if where is not None else ()))


def as_array(vector: Any) -> np.ndarray | None:
    """A float32 array from an engine's dense vector (None stays None)."""
    return None if vector is None else np.asarray(vector, dtype=np.float32)


def carried_cosines(query: np.ndarray, hits: Sequence[Hit], known: dict[str, float]) -> None:
    """The cosine of ``query`` to each hit carrying its vector, into ``known`` (a hit already
    there keeps its score: the ranking that holds it gave it; a hit carrying none is left to
    the engine).

    What the engine's cosine distance computes: stored vectors are unit length (the engine
    normalises them on write), the query is normalised here. Float32 sums in another order
    than the engine's differ in the 7th digit (1.2e-7 at most over a 10k-note store's 300
    questions), below the 1e-6 to which fusion rounds its scores."""
    carried = [h for h in hits if h.dense is not None and h.id not in known]
    if carried:
        unit = np.asarray(query, dtype=np.float32)
        unit = unit / max(float(np.linalg.norm(unit)), 1e-12)
        scores = np.stack([cast(np.ndarray, h.dense) for h in carried]) @ unit
        known.update(zip((h.id for h in carried), scores.tolist()))


def iterate_pages(scroll: Callable[..., tuple[list[Hit], str | None]], where: Where | None, *,
                  with_vectors: bool, batch: int) -> Iterator[Hit]:
    """Every point a backend's ``scroll`` yields for ``where``, following page offsets."""
    offset: str | None = None
    while True:
        page, offset = scroll(where, limit=batch, offset=offset, with_vectors=with_vectors)
        yield from page
        if offset is None:
            return
