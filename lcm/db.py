"""The SQLite handle of lcm: one connection, one lock, WAL, and the one atomic() for writes."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amem.kernel.errors import DiskFullError
from amem.kernel.files import precreate_private, private_dir
from lcm.conn import Handle
from lcm.errors import ForkedStoreError, StoreBusyError, StoreClosedError, UnsupportedOnEngineError, not_writable, read_only

log = logging.getLogger(__name__)

__all__ = ["Database", "sqlite_only"]

#: WAL pages between automatic checkpoints (SQLite's default is 1,000)
WAL_CHECKPOINT_PAGES = 10_000


class Database:
    """A single SQLite connection guarded by a re-entrant lock.

    One connection plus a lock (rather than a connection per thread) keeps ``":memory:"``
    databases shareable between threads and makes every operation see its own writes.
    Other processes are handled by WAL and ``busy_timeout``; writes take the write lock
    up front (``BEGIN IMMEDIATE``) so two writers queue instead of failing on upgrade.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 30000) -> None:
        self.is_memory = str(path) == ":memory:"
        # "~/..." means the home directory, as everywhere else in amem (sqlite would create a
        # literal "./~" directory).
        self.path = str(path) if self.is_memory else str(Path(path).expanduser())
        if not self.is_memory:
            # 0700 directories and a 0600 database file before SQLite opens it: SQLite gives
            # the -wal and -shm files the mode of their database file, whatever the umask.
            private_dir(Path(self.path).parent)
            precreate_private(self.path)
        self._conn = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=busy_timeout_ms / 1000
        )
        self._conn.row_factory = sqlite3.Row
        self.lock = threading.RLock()
        self._depth = 0
        self._closed = False
        #: the process that opened the connection: a forked child must open its own
        self._pid = os.getpid()
        c = self._conn
        # auto_vacuum must be chosen before the first table exists; retention relies on it.
        if not c.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone():
            c.execute("PRAGMA auto_vacuum = INCREMENTAL")
        mode = c.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if not self.is_memory and str(mode).lower() != "wal":
            log.warning("lcm: SQLite refused WAL mode (got %s) for %s", mode, self.path)
        c.execute("PRAGMA synchronous = NORMAL")
        # Copy the WAL back into the database every ~40 MB instead of SQLite's ~4 MB: ingest
        # rewrites the same hot index pages in every batch, and a checkpoint copies each page
        # once however often it changed, so fewer checkpoints copy (and sync) far less
        # (benchmarks/RESULTS.md). A killed process still loses no committed transaction (the
        # WAL holds it); on a power loss synchronous = NORMAL may roll back what was committed
        # since the last checkpoint's sync, as before, a window now up to ~40 MB of WAL.
        c.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        c.execute("PRAGMA foreign_keys = ON")
        c.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")

    #: what a failed statement raises (lcm.conn.Handle.errors)
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    @property
    def conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosedError(f"the conversation store {self.path} is closed")
        if self._pid != os.getpid():
            raise ForkedStoreError(f"the conversation store {self.path} was opened by process {self._pid}, "
                                   "before this one was forked from it: open an LcmStore in this process "
                                   "(several processes may share the file)", owner_pid=self._pid)
        return self._conn

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE outside, SAVEPOINT when nested; rollback on error."""
        with self.lock:
            conn = self.conn
            if self._depth == 0:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    busy = self._busy(exc)
                    if busy is not None:
                        raise busy from exc
                    raise
                self._depth = 1
                try:
                    yield conn
                except BaseException as exc:
                    if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                        conn.execute("ROLLBACK")
                    named = self._named(exc)
                    if named is not None:
                        raise named from exc
                    raise
                else:
                    try:
                        conn.execute("COMMIT")
                    except sqlite3.Error as exc:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        named = self._named(exc)
                        if named is not None:
                            raise named from exc
                        raise
                finally:
                    self._depth = 0
            else:
                name = f"sp{self._depth}"
                conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield conn
                except BaseException:
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                    raise
                else:
                    conn.execute(f"RELEASE {name}")
                finally:
                    self._depth -= 1

    def _named(self, exc: BaseException) -> Exception | None:
        """A failed write's SQLite error as the named one a caller can act on: the disk full,
        or a file this user may not write (it reached callers as "unexpected OperationalError:
        attempt to write a readonly database")."""
        if isinstance(exc, sqlite3.Error) and read_only(exc):
            return not_writable(self.path, exc)
        return self._disk_full(exc)

    def _disk_full(self, exc: BaseException) -> DiskFullError | None:
        """``exc`` as ``disk_full`` naming the database when it is SQLite's "disk is full"."""
        if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return DiskFullError(f"the disk holding {self.path} is full: the write was rolled back, "
                                 "nothing of it is stored; free some space and retry", path=self.path)
        return None

    def _busy(self, exc: sqlite3.OperationalError) -> StoreBusyError | None:
        """``exc`` as ``store_locked`` naming the database when another process held its write
        lock through the whole busy wait (SQLite's "database is locked")."""
        if getattr(exc, "sqlite_errorcode", None) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            return None
        wait = int(self._conn.execute("PRAGMA busy_timeout").fetchone()[0]) / 1000
        return StoreBusyError(f"the conversation store {self.path} is busy: another process held its "
                              f"write lock through the {wait:g} s wait; nothing was written, retry "
                              "when it is done", path=self.path)

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock for a group of reads so they see one consistent state."""
        with self.lock:
            yield self.conn

    def held(self) -> bool:
        """True when this thread holds the handle's lock (inside ``reading``, ``atomic`` or
        ``snapshot``): another thread's read would wait for it (:class:`lcm.conn.Handle`)."""
        # RLock has no public owner test; _is_owned is what threading.Condition itself calls.
        # Without it, say held: the caller then reads in its own thread, which is always safe.
        is_owned = getattr(self.lock, "_is_owned", None)
        return True if is_owned is None else bool(is_owned())

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every read inside sees the database as it was when it began,
        while other processes go on writing (WAL keeps the pages it reads). For reads only; it
        holds this handle's lock, so this process's other threads wait until it ends."""
        with self.lock:
            if self._depth:
                raise sqlite3.ProgrammingError("lcm: a read snapshot cannot start inside a write transaction")
            conn = self.conn
            conn.execute("BEGIN")
            try:
                # A deferred transaction takes its snapshot at its first read: take it here, so
                # the snapshot is the state at entry whatever the caller reads first.
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                yield conn
            finally:
                conn.execute("ROLLBACK")  # it wrote nothing

    def query(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()

    def one(self, sql: str, params: Any = ()) -> sqlite3.Row | None:
        with self.lock:
            row: sqlite3.Row | None = self.conn.execute(sql, params).fetchone()
            return row

    def scalar(self, sql: str, params: Any = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def close(self) -> None:
        with self.lock:
            if not self._closed:
                self._closed = True
                if self._pid == os.getpid():  # a forked child's copy is the parent's to close
                    self._conn.close()


def sqlite_only(db: Handle, operation: str) -> Database:
    """``db`` as the SQLite handle, for a step only SQLite has (FTS5, ``PRAGMA``, its file).

    The PostgreSQL store swaps in its own part for each such step; reaching one with another
    engine's handle is refused by name rather than failing on a missing method.
    """
    if not isinstance(db, Database):
        raise UnsupportedOnEngineError(f"lcm: {operation} is SQLite's own step and this store's database is "
                                       f"{type(db).__name__}", operation=operation,
                                       engine=str(getattr(db, "engine", type(db).__name__)))  # fmt: skip
    return db
