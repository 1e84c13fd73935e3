"""A crash seam around a real vector backend: writes fail from the n-th on, once armed."""

from __future__ import annotations

from typing import Any, Sequence

from amem.backends.base import Point


class InjectedCrash(RuntimeError):
    """Raised by ``FlakyBackend`` in place of a write (a process killed at that write)."""


class FlakyBackend:
    """A real backend that counts writes and, once armed, fails every write from the n-th on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes = 0
        self.fail_at: int | None = None

    def arm(self, fail_at: int | None) -> None:
        """Count writes from now; ``fail_at`` writes succeed, then each fails (None: never)."""
        self.writes, self.fail_at = 0, fail_at

    def _write(self) -> None:
        if self.fail_at is not None and self.writes >= self.fail_at:
            raise InjectedCrash(f"injected crash before write {self.writes}")
        self.writes += 1

    def upsert(self, points: Sequence[Point]) -> None:
        self._write()
        self.inner.upsert(points)

    def set_payload(self, point_id: str, payload: dict[str, Any]) -> None:
        self._write()
        self.inner.set_payload(point_id, payload)

    def update_point(self, point_id: str, payload: dict[str, Any], **parts: Any) -> bool:
        self._write()
        return bool(self.inner.update_point(point_id, payload, **parts))

    def delete(self, ids: Sequence[str]) -> None:
        self._write()
        self.inner.delete(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
