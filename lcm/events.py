"""The JSON-lines operations log: one line per ingest, compaction, reset or retention run.

This is a product record (what happened to which conversation, when), separate from
Python logging; it rotates by size through ``.1`` to ``.5``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from lcm.seams import Clock
from lcm.timeutil import iso

log = logging.getLogger(__name__)

__all__ = ["EventLog"]

_KEEP = 5


class EventLog:
    """Append-only JSON lines; a disabled log (``path=None``) accepts and drops events."""

    def __init__(self, path: str | Path | None, clock: Clock, max_bytes: int = 104857600) -> None:
        self.path = Path(path) if path else None
        self.clock = clock
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._warned = False

    def write(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"ts": iso(self.clock.now()), "event": event, **fields}, ensure_ascii=False, default=str)
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if self.path.exists() and self.path.stat().st_size + len(line) > self.max_bytes:
                    self._rotate()
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except OSError as exc:
                # The log must never break a write path; say so once.
                if not self._warned:
                    log.warning("lcm: cannot write event log %s: %s", self.path, exc)
                    self._warned = True

    def _rotate(self) -> None:
        assert self.path is not None
        for i in range(_KEEP - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
