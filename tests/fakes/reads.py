"""A text source that remembers the largest read asked of it: a streaming reader's tests hold
that it never read the whole file at once."""

from __future__ import annotations

import io


class LargestRead(io.StringIO):
    """``io.StringIO`` whose ``most`` is the longest text one ``read`` returned."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.most = 0

    def read(self, n: int | None = -1) -> str:
        got = super().read(n)
        self.most = max(self.most, len(got))
        return got
