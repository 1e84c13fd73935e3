"""An embedder that loads its model on the first ``embed`` call, not when it is built.

``amem list``, ``get``, ``status`` and ``doctor`` open the store (which checks the embedder's
``model_id`` and ``dim`` against the store) but never encode a text; loading e5 costs them
about a second each. For presets whose identity is known without loading the model, the CLI
and the server build this wrapper instead.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from amem.embed.base import Embedder, Kind
from amem.errors import BackendError


class LazyEmbedder:
    """``model_id`` and ``dim`` declared up front; the real embedder is built on first use.

    The declared identity is checked against the built embedder, so a wrong declaration is a
    clear error at the first ``embed`` rather than vectors of another model in the store. The
    wrapped presets carry no ``calibration``/``cosine_baseline`` of their own (the similarity
    table has them by ``model_id``): both read ``None`` here without loading anything.
    """

    calibration = None
    cosine_baseline = None

    def __init__(self, model_id: str, dim: int, build: Callable[[], Embedder]) -> None:
        self._model_id, self._dim, self._build = model_id, dim, build
        self._inner: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def loaded(self) -> bool:
        """Whether the model has been built (by an ``embed`` call)."""
        return self._inner is not None

    def embedder(self) -> Embedder:
        """The real embedder, built on the first call."""
        if self._inner is None:
            with self._lock:
                if self._inner is None:
                    inner = self._build()
                    declared = (self._model_id, self._dim, None, None)
                    if (inner.model_id, inner.dim, getattr(inner, "calibration", None),
                            getattr(inner, "cosine_baseline", None)) != declared:
                        raise BackendError(
                            f"embedder declared as {self._model_id} ({self._dim} dims) built "
                            f"{inner.model_id} ({inner.dim} dims)")
                    self._inner = inner
        return self._inner

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        return self.embedder().embed(texts, kind)

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the seam (tokenize, threads, ...) is the real embedder's.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.embedder(), name)
