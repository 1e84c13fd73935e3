"""Small real embedders for tests: the hashing embedder, recording or failing on cue.

They implement the ``Embedder`` seam themselves (no patching of amem's code): a test sees
every text the store asks to embed, or makes the encoder die at a chosen call.
"""

from __future__ import annotations

from typing import Any, Collection

from amem.embed.hashing import HashingEmbedder


class RecordingEmbedder(HashingEmbedder):
    """The hashing embedder, recording every passage text and every passage call."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__(dim)
        self.passages: list[str] = []
        self.calls: list[list[str]] = []

    def embed(self, texts: Any, kind: str = "passage") -> Any:
        if kind == "passage":
            self.passages.extend(texts)
            self.calls.append(list(texts))
        return super().embed(texts, kind=kind)


class EncoderDied(RuntimeError):
    """What ``FailingEmbedder`` raises."""


class FailingEmbedder(RecordingEmbedder):
    """Raises ``EncoderDied`` on the passage calls numbered in ``fail_on`` (1-based)."""

    def __init__(self, fail_on: Collection[int], dim: int = 256) -> None:
        super().__init__(dim)
        self.fail_on = set(fail_on)
        self._count = 0

    def embed(self, texts: Any, kind: str = "passage") -> Any:
        if kind == "passage":
            self._count += 1
            if self._count in self.fail_on:
                raise EncoderDied(f"passage call {self._count} failed on purpose")
        return super().embed(texts, kind=kind)
