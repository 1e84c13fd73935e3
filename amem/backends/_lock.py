"""An exclusive, advisory lock that makes one process the owner of an embedded store.

The embedded engine already refuses a second open of its WAL, but only with an opaque
``WouldBlock`` runtime error. Our own lock comes first so a second process learns who owns
the store and what to do instead, before the engine is touched at all.

``flock`` locks belong to the open file description, so a second open of the same store in
the *same* process is refused too; the kernel drops the lock when the holder dies, so a
crashed owner never leaves a stale lock behind (the pid left in the file is only a hint).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from pathlib import Path

from amem.errors import StoreLockedError
from amem.kernel.files import open_private

log = logging.getLogger(__name__)

LOCK_NAME = "LOCK"


def locked_message(store: Path, holder_pid: int | None) -> str:
    """The message a second opener sees: which store, who holds it, what to do instead."""
    if holder_pid == os.getpid():
        who = f"this process (pid {holder_pid}) already has it open; close that handle first"
    elif holder_pid is not None:
        who = f"process {holder_pid} owns it"
    else:
        who = "another process owns it"
    return (
        f"the embedded amem store at {store} is in use: {who}. An embedded store belongs to one "
        "process. Run `amem serve` in the owning process and connect through it, or move the "
        "store to a Qdrant server (set AMEM_QDRANT_URL) for shared access."
    )


class StoreLock:
    """Hold ``<store>/LOCK`` exclusively for the lifetime of one open store."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = store / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`StoreLockedError` naming the holder's pid."""
        # 0600, and never through a link: a LOCK planted as a symlink would make the truncate
        # below empty the link's target
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = read_holder(self.path)
            raise StoreLockedError(
                locked_message(self.store, holder), path=str(self.store), holder_pid=holder
            ) from None
        # Holding the lock: record our pid for the next would-be opener's error message.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.fsync(fd)
        self._fd = fd
        log.debug("locked %s (pid %d)", self.store, os.getpid())

    def release(self) -> None:
        """Drop the lock; a no-op when it is not held. The file stays (deleting it would race)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        log.debug("unlocked %s", self.store)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None


def read_holder(lock_path: Path) -> int | None:
    """The pid written by the current holder, or None when unreadable (a hint, not a proof)."""
    try:
        text = lock_path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
