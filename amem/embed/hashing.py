"""A deterministic feature-hashing embedder: no model, instant, and similar texts get similar vectors.

It is the small real implementation of the ``Embedder`` seam that tests across the project use
(the house style forbids mocks of our own seams). It is also a usable last resort on a machine
where no model can be installed, though it only captures lexical overlap, not meaning.

Each text becomes a bag of features:

* lower-cased words (``\\w+`` runs, so CJK runs count as one word), weight 1;
* character trigrams of each word padded with ``<`` and ``>``, weight 0.5, so inflections,
  typos and unsegmented CJK/Japanese/Korean text still share features;
* every other non-space character (punctuation, emoji) on its own, weight 0.5.

Every feature is hashed with BLAKE2b (stable across processes and Python versions, unlike
``hash()``) to a bucket and a sign; signed buckets keep collisions from biasing cosine upwards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from amem.embed._common import check_positive_int, check_texts, empty
from amem.embed.base import Kind, l2_normalise
from amem.errors import ConfigError

__all__ = ["HashingEmbedder"]

_VERSION = 1
_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_WORD_WEIGHT = 1.0
_GRAM_WEIGHT = 0.5
_SYMBOL_WEIGHT = 0.5
# An empty or blank text has no features; it still needs a unit vector, and a fixed one keeps
# "no content" texts equal to each other and unlike any real text.
_EMPTY_FEATURE = "\x00empty"


@lru_cache(maxsize=200_000)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    sign = 1.0 if value >> 63 == 0 else -1.0
    return value % dim, sign


def _features(text: str) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for token in _TOKEN_RE.findall(text.lower()):
        if token[0].isalnum() or token[0] == "_":
            out.append(("w:" + token, _WORD_WEIGHT))
            padded = f"<{token}>"
            out.extend(("g:" + padded[i : i + 3], _GRAM_WEIGHT) for i in range(len(padded) - 2))
        else:
            out.append(("s:" + token, _SYMBOL_WEIGHT))
    return out


class HashingEmbedder:
    """Feature hashing of words, character trigrams and symbols into ``dim`` signed buckets.

    Symmetric: ``kind`` is checked but does not change the vector.

    Args:
        dim: number of buckets, i.e. the vector size. 64 is plenty for tests; a few hundred
            or more keeps collisions rare on real corpora.
    """

    def __init__(self, dim: int = 64) -> None:
        check_positive_int(dim, "dim")
        if dim < 2:
            raise ConfigError(f"dim must be at least 2, got {dim}", key="dim")
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"hashing-v{_VERSION}-d{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        """Return unit-length float32 rows, one per text, shape ``[len(texts), dim]``."""
        items = check_texts(texts, kind)
        if not items:
            return empty(self._dim)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            features = _features(text) or [(_EMPTY_FEATURE, 1.0)]
            for feature, weight in features:
                index, sign = _bucket(feature, self._dim)
                out[row, index] += sign * weight
            if not out[row].any():
                # Every feature cancelled out (rare, small dims): fall back to the fixed vector
                # so the row can still be normalised.
                index, sign = _bucket(_EMPTY_FEATURE, self._dim)
                out[row, index] = sign
        return l2_normalise(out)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"
