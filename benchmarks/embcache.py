"""An embedder wrapper that remembers vectors, in memory and optionally on disk, for benchmarks.

The slow part of every retrieval benchmark is the model: the default embedder runs about 15
turns a second on one core. Runs that change ranking, linking or tokenisation embed the same
texts again and again, so the vectors are kept per ``(kind, text)`` and, with ``path``, saved
to one ``.npz`` file per model (``<dir>/<model_id with / as _>.alone.npz``). Same ``model_id``,
same vectors: the file is keyed by the model id, so another model never reads it.

Each text missing from the cache is embedded alone, never with the other texts of the call.
The default embedder scales its int8 activations per batch (``amem.embed.e5_onnx``), so a
text's vector moves a little with the texts it is batched with; a cache filled by whichever
run came first then handed each later run the vectors of that run's batches, and the figures
of one command depended on what had filled the cache before it. Measured (LoCoMo dev,
``python -m benchmarks.retrieval locomo --cache DIR``, the former cache): from an empty cache
store R@10 / MRR / multi-hop 0.806 / 0.605 / 0.524 and the dense baseline 0.534; the same
command after an ``--enrich offline --links`` run had filled the cache 0.800 / 0.607 / 0.512
and 0.553. Embedded alone, a text has one vector whatever ran before, so any two runs that
share a cache compare like with like (a run without a cache still embeds as the store does,
in its batches). The ``.alone`` name keeps the former files, filled the other way, unread.

How far that batch noise moves a figure is itself measurable: ``realization`` k > 0 embeds
each passage beside one fixed companion text (``COMPANIONS[k - 1]``; its activations share
the text's int8 scale and its length pads it), which gives every text another vector as valid
as its own (cosine >= 0.996 to the vector alone on LoCoMo's turns), still independent of what
ran before. Queries stay alone in every realization, as a search embeds them. A gain that
does not hold across realizations is the embedder's noise, not the ranking's (LoCoMo dev:
the dense baseline's R@10 reads 0.531 alone and 0.531-0.549 beside the three companions).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np


#: the texts a passage is embedded beside in realizations 1, 2, 3: ordinary sentences of
#: different lengths, about nothing a benchmark asks
COMPANIONS = (
    "The weather report for the coastal towns says light rain in the morning and clear skies later.",
    "Remember to water the plants, pay the electricity bill and call the dentist before Friday afternoon.",
    "A short note.",
)
#: the realizations a cache can give: 0 (alone), then one per companion
REALIZATIONS = range(len(COMPANIONS) + 1)


def _key(kind: str, text: str) -> str:
    return hashlib.sha1(f"{kind}\0{text}".encode("utf-8")).hexdigest()


class CachedEmbedder:
    """``inner`` with a per-text cache; ``save()`` writes new vectors to ``cache_dir``.

    ``realization`` 0 embeds each text alone; k in 1..3 each passage beside ``COMPANIONS[k-1]``
    (module docstring), with a cache file of its own.
    """

    def __init__(self, inner: Any, cache_dir: Path | None = None, realization: int = 0) -> None:
        if realization not in REALIZATIONS:
            raise ValueError(f"realization must be 0..{REALIZATIONS[-1]}, not {realization}")
        self._companion = COMPANIONS[realization - 1] if realization else None
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        if hasattr(inner, "cosine_baseline"):
            self.cosine_baseline = inner.cosine_baseline
        self._cache: dict[str, np.ndarray] = {}
        name = str(self.model_id).replace("/", "_")
        suffix = f".with{realization}.npz" if realization else ".alone.npz"
        self._file = Path(cache_dir) / (name + suffix) if cache_dir is not None else None
        self._dirty = False
        if self._file is not None and self._file.exists():
            with np.load(self._file) as data:  # written whole by one process (os.replace)
                keys, vecs = data["keys"], data["vectors"]
            self._cache = {str(k): v for k, v in zip(keys, vecs)}

    def __len__(self) -> int:
        """Texts whose vectors are kept (read from the cache file or embedded since)."""
        return len(self._cache)

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        keys = [_key(kind, t) for t in texts]
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, texts) if k not in self._cache))
        for k, text in missing:  # never with the call's other texts (module docstring)
            batch = [text] if self._companion is None or kind == "query" else [text, self._companion]
            self._cache[k] = np.asarray(self.inner.embed(batch, kind=kind)[0], dtype=np.float32)
            self._dirty = True
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[k] for k in keys])

    def save(self) -> None:
        """Write the cache file when new vectors were computed (no-op without a directory)."""
        if self._file is None or not self._dirty:
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        if self._file.exists():  # keep what a parallel run saved meanwhile
            with np.load(self._file) as data:
                for key, vec in zip(data["keys"], data["vectors"]):
                    self._cache.setdefault(str(key), vec)
        keys = np.array(list(self._cache), dtype="U40")
        vecs = np.stack(list(self._cache.values())) if self._cache else np.zeros((0, self.dim))
        # one temporary file per process: parallel runs share the cache directory
        tmp = self._file.with_name(f"{self._file.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=keys, vectors=vecs)
        tmp.replace(self._file)
        self._dirty = False
