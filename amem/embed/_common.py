"""Input checks and batching shared by every embedder in this package."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
