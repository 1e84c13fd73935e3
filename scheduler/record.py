"""The last-run record (an atomically replaced JSON file) and the cross-process run lock.

``<home>/nightly.json`` remembers which nightly *slot* (the scheduled fire time and its local
date) was last run and how it went, so that

* a host that slept through 02:30 runs the missed slot once when the scheduler starts, and a
  second process (or a second start) sees the slot as done;
* on a fall-back night whose 02:30 happens twice, the second firing finds the local date
  already served and does nothing;
* ``amem status`` can show the last run, the last success and the last error.

``<home>/nightly.lock`` is held with ``fcntl.flock`` for the length of a run: two processes
(the server and a standalone ``amem scheduler``), or two threads, never run the job at once.
The lock dies with its process, so a crashed run never blocks the next night.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path
from types import TracebackType
from typing import Any

log = logging.getLogger(__name__)

VERSION = 1


def read_record(path: Path) -> dict[str, Any]:
    """The record, or ``{}`` when there is none. A corrupt file is logged and treated as none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        log.warning("the nightly record %s is not valid JSON (%s); starting a new one", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Replace the record atomically: a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**record, "version": VERSION}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh, ensure_ascii=False, indent=1, sort_keys=True, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # some filesystems do not open directories; the rename is still atomic
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class RunLock:
    """A non-blocking exclusive ``flock`` on ``<home>/nightly.lock``, holding the owner's pid.

    ``acquire()`` returns False (and sets ``holder_pid`` when readable) if someone holds it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.holder_pid: int | None = None
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.holder_pid = _read_pid(fd)
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def lock_holder(path: Path) -> int | None:
    """The pid running the job now, or None when nobody holds the lock."""
    if not path.exists():
        return None
    probe = RunLock(path)
    if probe.acquire():
        probe.release()
        return None
    return probe.holder_pid or -1


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
