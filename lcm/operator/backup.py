"""A whole SQLite conversation store copied while it is in use: one consistent snapshot.

``cp lcm.db`` is not a backup of a store in use: in WAL mode the latest transactions live in
``lcm.db-wal`` until a checkpoint copies them back, so the database file alone can miss
hours of conversation (a store a server had written for a while copied as 4 KB: its tables
and every message were still in the log), and a copy of both files taken while a writer
commits can pair a database with a log of another moment. SQLite's online backup
(``sqlite3.Connection.backup``) reads the store inside one read transaction, which in WAL
mode never blocks the writers, and writes every page as of that instant.

:func:`backup_sqlite` writes that snapshot to a temporary sibling of ``out`` (0600), switches
it to a rollback journal (one self-contained file, no ``-wal`` beside it), checks it
(``PRAGMA quick_check``), fsyncs it and renames it over ``out``: a backup cut short leaves no
file at the name. Large files (``largeFilesDir``) are not in the database: they are written
once and never changed, so a plain copy of that directory taken after the backup holds every
file the backup names.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from amem.kernel.files import precreate_private, private_dir, refuse_symlink

__all__ = ["BackupReport", "backup_sqlite"]


@dataclass(frozen=True)
class BackupReport:
    """What :func:`backup_sqlite` wrote."""

    source: str
    path: str
    bytes: int
    pages: int


def backup_sqlite(source: str | Path, out: str | Path) -> BackupReport:
    """Copy the SQLite database ``source`` (in use or not) to ``out`` as one snapshot.

    Raises ``FileNotFoundError`` when ``source`` is not there (nothing is created), and
    ``sqlite3.DatabaseError`` when the copy fails its check (``out`` is then left as it was).
    """
    source, out = Path(source).expanduser(), Path(out).expanduser()
    if not source.is_file():
        raise FileNotFoundError(f"no conversation store at {source}")
    private_dir(out.parent)
    refuse_symlink(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # left by a killed backup of this pid
    precreate_private(tmp)
    try:
        src = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)  # every page in one step: one read transaction, one instant
                dst.execute("PRAGMA journal_mode = DELETE")
                check = dst.execute("PRAGMA quick_check").fetchone()[0]
                if check != "ok":
                    raise sqlite3.DatabaseError(f"the copy of {source} fails its check: {check}")
                pages = int(dst.execute("PRAGMA page_count").fetchone()[0])
            finally:
                dst.close()
        finally:
            src.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BackupReport(str(source), str(out), out.stat().st_size, pages)
