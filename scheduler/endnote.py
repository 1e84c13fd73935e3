"""The run's end note: a small file reserved when a run starts, its end written into it in place.

The record (``nightly.json``) and the run history (``nightly_runs.jsonl``) are each replaced
atomically: every write is a new file, which a full disk refuses. A run that finished when
neither could be written left the record saying ``running``: ``amem status`` called it
``interrupted`` and the next start ran the night again. ``nightly_end.json`` is written at the
start of each run (when the record is written, so the disk takes writes) at its full size,
:data:`RESERVED` bytes, and kept open; the run's end overwrites those bytes through the open
descriptor, which takes no new space and no new directory entry. ``record.load_settled`` reads
it back like the history's newest line.

A filesystem that copies on write (btrfs, ZFS) may refuse even the overwrite on a full disk;
so may a read-only one. Then the run's report says the next start cannot know the night ran.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from amem.kernel.errors import UnsafePathError
from amem.kernel.files import open_private, private_dir

__all__ = ["EndNote", "RESERVED", "read_end_note"]

log = logging.getLogger(__name__)

#: the note's size: one filesystem block, many times a run entry (``job.run_entry``, ~400 bytes)
RESERVED = 4096


def _padded(entry: dict[str, Any]) -> bytes:
    """``entry`` as JSON padded with spaces to :data:`RESERVED` bytes (JSON ignores them)."""
    data = json.dumps(entry, sort_keys=True, default=str).encode("utf-8")
    if len(data) > RESERVED:  # never for a run entry; a note that does not fit is refused
        raise ValueError(f"a run's end note of {len(data)} bytes does not fit in {RESERVED}")
    return data + b" " * (RESERVED - len(data))


class EndNote:
    """``<home>/nightly_end.json`` for one run: :meth:`reserve` at its start, :meth:`write`
    at its end, :meth:`close` after. Its failures are returned, never raised: the note is a
    fallback, and the run goes on without it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._problem: str | None = None

    def reserve(self, started_at: str) -> None:
        """Write the note at its full size saying the run that started at ``started_at`` is
        running (so a killed run is never taken for a finished one), and keep it open."""
        try:
            private_dir(self.path.parent)
            fd = open_private(self.path, os.O_RDWR | os.O_CREAT)  # 0600, never through a link
        except (OSError, UnsafePathError) as exc:  # a planted link: refused, the run goes on
            self._problem = f"could not be opened ({exc})"
            log.warning("the nightly end note %s %s", self.path, self._problem)
            return
        try:
            os.pwrite(fd, _padded({"status": "running", "started_at": started_at}), 0)
            os.ftruncate(fd, RESERVED)  # an older, longer file: nothing of it is left behind
        except OSError as exc:
            os.close(fd)
            self._problem = f"could not be reserved ({exc})"
            log.warning("the nightly end note %s %s", self.path, self._problem)
            return
        self._fd = fd

    def write(self, entry: dict[str, Any]) -> str | None:
        """Overwrite the note with the run's ``entry``; None when it is on disk under its
        name, else why not (a note replaced or removed since the start is not: a reader would
        never see it)."""
        fd = self._fd
        if fd is None:
            return self._problem or "was not reserved"
        try:
            os.pwrite(fd, _padded(entry), 0)
            held, named = os.fstat(fd), os.stat(self.path, follow_symlinks=False)
        except OSError as exc:
            return f"could not be written ({exc})"
        if held.st_nlink == 0 or (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            return "was removed or replaced since the run started"
        return None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def read_end_note(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The note's entry (None when there is none) and, when it cannot be read or is not an
    entry, why."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot be read ({exc})"
    try:
        entry = json.loads(text)
    except ValueError as exc:
        return None, f"is not valid JSON ({exc})"
    if not isinstance(entry, dict):
        return None, f"is a JSON {type(entry).__name__}, not an object"
    return entry, None
