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

from amem.errors import BackendError, StoreLockedError
from amem.kernel.files import open_private

log = logging.getLogger(__name__)

LOCK_NAME = "LOCK"


#: the longest command line a busy message quotes
_COMMAND_CHARS = 160


def locked_message(store: Path, holder_pid: int | None, command: str | None = None) -> str:
    """The message a second opener sees: which store, who holds it (its command line when
    known), what to do instead."""
    if holder_pid == os.getpid():
        return (f"the embedded amem store at {store} is in use: this process (pid {holder_pid}) "
                "already has it open; close that handle first.")
    who = ("another process owns it" if holder_pid is None
           else f"process {holder_pid} owns it" if command is None
           else f"process {holder_pid} ({command}) owns it")
    if command is not None and " scheduler" in command:
        # the nightly maintenance: it ends by itself, and a server would not share it either
        return (f"the embedded amem store at {store} is in use: {who}, the scheduled maintenance "
                "run; it releases the store when it finishes. Retry then.")
    if command is not None and _one_shot(command):
        # `amem import` and the like end by themselves: sharing the store through a server
        # (the advice below) is not what someone who runs one command now needs
        return (f"the embedded amem store at {store} is in use: {who}, a command that releases "
                "the store when it finishes. Run this again then.")
    return (
        f"the embedded amem store at {store} is in use: {who}. An embedded store belongs to one "
        "process. Run `amem serve` in the owning process and connect through it, or move the "
        "store to a Qdrant server (set AMEM_QDRANT_URL) for shared access."
    )


#: the common options of ``amem`` that take a value (``amem --home DIR import ...``)
_VALUED_OPTIONS = frozenset({"--config", "--home", "--agent", "--embedder"})


def amem_subcommand(command: str) -> str | None:
    """The ``amem`` command word of a process's command line (``import`` of ``amem --home D
    import notes.jsonl``), or None when it is not an ``amem`` command. A note's text that says
    "serve" (``amem add we serve tea``) is not taken for the word."""
    words = command.split()
    for at, word in enumerate(words[:3]):
        if Path(word).name == "amem" or (word == "tools.cli" and at and words[at - 1] == "-m"):
            rest = words[at + 1:]
            break
    else:
        return None
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word in _VALUED_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def _one_shot(command: str) -> bool:
    """Whether ``command`` is an ``amem`` command that ends by itself (not a server)."""
    word = amem_subcommand(command)
    return word is not None and word not in ("serve", "ui")


def process_command(pid: int | None, proc: Path = Path("/proc")) -> str | None:
    """The command line of process ``pid`` as a busy message quotes it (None: unknown, as
    outside Linux). A ``python -c`` child's code is left out: its arguments say what it does."""
    if pid is None:
        return None
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    if not args:
        return None
    if "-c" in args[:3]:
        at = args.index("-c")
        args = args[:at + 1] + ["..."] + args[at + 2:]
    text = " ".join(args)
    return text if len(text) <= _COMMAND_CHARS else text[:_COMMAND_CHARS - 3] + "..."


def owner_message(path: Path, exc: OSError) -> str:
    """The error for a store file this user may not open: whose it is and what to do (it said
    "Permission denied: .../LOCK", or called the store "not an amem edge store")."""
    try:
        import pwd

        owner = pwd.getpwuid(path.stat().st_uid).pw_name if path.exists() else None
    except (OSError, KeyError, ImportError):
        owner = None
    whose = f" (it belongs to {owner})" if owner else ""
    return (f"{path} cannot be opened by this user{whose}: {exc.strerror or exc}. Every command "
            "takes the store's lock and may write, reads included, so the store's directory and "
            "files must be writable by the user running amem: run it as their owner, `chown -R` "
            "them back (files written through sudo), or copy a read-only store somewhere "
            "writable to read it")
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
        try:
            fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        except PermissionError as exc:  # a read-only or foreign-owned data directory
            raise BackendError(owner_message(self.path, exc)) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = read_holder(self.path)
            raise StoreLockedError(
                locked_message(self.store, holder, process_command(holder)),
                path=str(self.store), holder_pid=holder,
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
