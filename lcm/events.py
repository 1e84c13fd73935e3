"""The JSON-lines operations log: one line per ingest, compaction, reset, retention run or failure.

This is a product record (what happened to which conversation, when), separate from Python
logging. It rotates daily: the first event of a new (UTC) day moves the file to
``<stem>.<YYYY-MM-DD><suffix>`` (``lcm-log.2025-01-01.jsonl``), named after the day its lines
start on. A file past ``max_bytes`` within a day rolls through ``<stem>.<day>.1<suffix>`` (the
newest) to ``.5`` (the oldest kept; a sixth is dropped), so a runaway day costs at most six
files. Rotated files older than ``retention_days`` (3 by default) are deleted at each rotation
and at the first event of a process (0 keeps them all). Time comes from the :class:`Clock` seam, so tests move days
without sleeping.

Several processes may append to one log (``amem serve`` and a CLI command): each reads the
day of the file's first line before rotating it, so a process whose notion of "today" is
stale never moves another's fresh file under yesterday's name.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from amem.kernel.clock import Clock
from amem.kernel.files import UnsafePathError, open_private, private_dir, refuse_symlink
from lcm.timeutil import iso

log = logging.getLogger(__name__)

__all__ = ["EventLog", "DEFAULT_RETENTION_DAYS"]

DEFAULT_RETENTION_DAYS = 3
#: size rotations kept per day (``.1`` newest .. ``.5`` oldest)
MAX_SIZE_ROTATIONS = 5


class EventLog:
    """Append-only JSON lines; a disabled log (``path=None``) accepts and drops events."""

    def __init__(self, path: str | Path | None, clock: Clock, max_bytes: int = 104857600,
                 retention_days: int = DEFAULT_RETENTION_DAYS) -> None:  # fmt: skip
        if isinstance(retention_days, bool) or not isinstance(retention_days, int) or retention_days < 0:
            raise ValueError(f"retention_days must be an integer >= 0; got {retention_days!r}")
        self.path = Path(path) if path else None
        self.clock = clock
        self.max_bytes = max_bytes
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._warned = False
        self._day: date | None = None  # the day this process last wrote on (None: not yet)

    def write(self, event: str, **fields: Any) -> None:
        if self.path is None:
            return
        now = self.clock.now()
        line = json.dumps({"ts": iso(now), "event": event, **fields}, ensure_ascii=False, default=str)
        with self._lock:
            try:
                private_dir(self.path.parent)
                refuse_symlink(self.path)  # before reading its first line or rotating it
                today = now.date()
                if self._day != today:
                    first = self._day is None
                    self._day = today
                    started = self._file_day()
                    if started is not None and started < today:
                        self._rotate(started)
                    elif first:
                        self.prune(today)
                if self.path.exists() and self.path.stat().st_size + len(line) > self.max_bytes:
                    self._roll(self._file_day() or today)
                # 0600, and never appended through a link planted at the log's name
                fd = open_private(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except (OSError, UnsafePathError) as exc:
                # The log must never break a write path; say so once.
                if not self._warned:
                    log.warning("lcm: cannot write event log %s: %s", self.path, exc)
                    self._warned = True

    # -- rotation -------------------------------------------------------------------------------
    def rotated_files(self) -> list[tuple[date, Path]]:
        """The rotated files of this log with the day each starts on, oldest first."""
        if self.path is None or not self.path.parent.exists():
            return []
        pattern = re.compile(rf"{re.escape(self.path.stem)}\.(\d{{4}}-\d{{2}}-\d{{2}})(?:\.(\d+))?"
                             rf"{re.escape(self.path.suffix)}\Z")  # fmt: skip
        found: list[tuple[date, int, Path]] = []
        for p in self.path.parent.iterdir():
            m = pattern.match(p.name)
            if m is None:
                continue
            try:
                day = date.fromisoformat(m.group(1))
            except ValueError:  # a name that only looks like a date: not ours
                continue
            found.append((day, int(m.group(2) or 0), p))
        return [(d, p) for d, _, p in sorted(found)]

    def prune(self, today: date) -> list[Path]:
        """Delete rotated files whose day is more than ``retention_days`` before ``today``."""
        if self.retention_days == 0:
            return []
        cutoff = today - timedelta(days=self.retention_days)
        gone = []
        for day, p in self.rotated_files():
            if day < cutoff and _ours(p):
                try:
                    p.unlink()
                    gone.append(p)
                except FileNotFoundError:  # another process pruned it first
                    pass
        return gone

    def _file_day(self) -> date | None:
        """The UTC day of the active file's first event (None: no file, or no readable first line)."""
        assert self.path is not None
        try:
            with self.path.open("r", encoding="utf-8", errors="replace") as fh:
                first = fh.readline(4096)
        except FileNotFoundError:
            return None
        if not first.strip():
            return None  # an empty file: nothing to move aside
        try:
            ts = json.loads(first)["ts"]
            return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).date()
        except (ValueError, KeyError, TypeError):
            # Not one of our lines (hand-edited, or cut by a crash): its modification day, so a
            # damaged file still rotates instead of growing forever.
            return datetime.fromtimestamp(self.path.stat().st_mtime, tz=self.clock.now().tzinfo).date()

    def _rotate(self, day: date) -> None:
        """The day is over: the file becomes ``<stem>.<day><suffix>`` (rolled like an oversized
        file when that name is taken, e.g. by a clock set back)."""
        assert self.path is not None
        target = self.path.with_name(f"{self.path.stem}.{day.isoformat()}{self.path.suffix}")
        if os.path.lexists(target):  # taken (a link planted at the name counts as taken)
            self._roll(day)
            return
        try:
            os.replace(self.path, target)
        except FileNotFoundError:  # another process rotated it a moment ago
            return
        self.prune(self.clock.now().date())

    def _roll(self, day: date) -> None:
        """The file is over ``max_bytes``: ``.4`` → ``.5`` (the old ``.5`` dropped) .. ``.1`` →
        ``.2``, then the file → ``.1``."""
        assert self.path is not None

        def numbered(n: int) -> Path:
            assert self.path is not None
            return self.path.with_name(f"{self.path.stem}.{day.isoformat()}.{n}{self.path.suffix}")

        oldest = numbered(MAX_SIZE_ROTATIONS)
        if oldest.exists() and _ours(oldest):
            oldest.unlink(missing_ok=True)
        for n in range(MAX_SIZE_ROTATIONS - 1, 0, -1):
            if numbered(n).exists():
                os.replace(numbered(n), numbered(n + 1))
        try:
            os.replace(self.path, numbered(1))
        except FileNotFoundError:  # another process rotated it a moment ago
            return
        self.prune(self.clock.now().date())


def _ours(path: Path) -> bool:
    """Whether a rotated file holds our lines (or nothing): a log pointed at a shared directory
    (``LCM_LOG_FILE``) must never delete another program's file that happens to share the name."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            first = fh.readline(4096)
    except OSError:
        return False
    if not first.strip():
        return True
    try:
        doc = json.loads(first)
    except ValueError:
        return False
    return isinstance(doc, dict) and "ts" in doc and "event" in doc
