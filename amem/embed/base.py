"""The embedder seam: what the store needs from a text encoder."""

from __future__ import annotations

from typing import Literal, Protocol, Sequence, runtime_checkable

import numpy as np

Kind = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``model_id`` names the model *and* every setting that changes its vectors (the store records
    it and refuses to mix vectors of two models). ``kind`` lets asymmetric models (e5's
    ``query:``/``passage:`` prefixes) encode the two sides differently; symmetric models ignore it.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return a float32 array of shape ``[len(texts), dim]`` with unit-length rows."""
        ...


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length (zero rows stay zero) and return float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(vectors / norms, dtype=np.float32)
