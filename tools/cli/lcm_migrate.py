"""Copies of the SQLite conversation store: ``amem lcm migrate --to URL`` onto a PostgreSQL
server, ``amem lcm backup OUT`` into one file (``lcm.operator.backup``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import Cmd, runtime
from .output import CliError, emit, kv_text, usage_error

if TYPE_CHECKING:
    from .common import Subparsers

__all__ = ["register", "cmd_lcm_backup", "cmd_lcm_migrate"]


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register ``lcm migrate`` under ``amem lcm``."""
    p = cmd("migrate", cmd_lcm_migrate, "copy the SQLite conversation store into an empty PostgreSQL "
            "database (one snapshot of the source, ids unchanged, verified, one transaction)", into=lsub)
    p.add_argument("--to", required=True, metavar="URL", help="postgresql://user@host/db (must hold no conversations)")
    p.add_argument("--replace-nul", action="store_true",
                   help="copy each NUL character (U+0000, which PostgreSQL text cannot hold) as U+FFFD; without it "
                        "a store holding one is refused before anything is copied, naming the messages")
    p = cmd("backup", cmd_lcm_backup, "copy the SQLite conversation store into one file while it "
            "is in use (one consistent snapshot, checked; `cp lcm.db` misses what is still in "
            "lcm.db-wal)", into=lsub)
    p.add_argument("out", help="the backup file (replaced only when the copy is whole)")


def cmd_lcm_backup(args: argparse.Namespace) -> int:
    from lcm.operator.backup import backup_sqlite
    from lcm.pg.db import PgDatabase

    with runtime(args) as rt:
        store = rt.lcm
        if isinstance(store.db, PgDatabase) or store.db.is_memory:
            raise CliError("this host's conversation store is not a SQLite file (a PostgreSQL "
                           "server: back it up with pg_dump; an in-memory store: nothing to "
                           "back up)", code="invalid_argument")
        report = backup_sqlite(store.db.path, args.out)
        files = str(store.files.base_dir)
    data = {"source": report.source, "path": report.path, "bytes": report.bytes,
            "pages": report.pages, "large_files_dir": files,
            "large_files": "not in the backup: copy that directory after it (its files are "
                           "written once, never changed)",
            "restore": "stop every process using the store, remove lcm.db-wal and lcm.db-shm "
                       "beside it, then copy the backup over lcm.db"}
    emit(args, data, lambda: kv_text(data))
    return 0


def cmd_lcm_migrate(args: argparse.Namespace) -> int:
    from lcm.pg.copy import copy_sqlite_to_postgres
    from lcm.pg.db import PgDatabase, is_postgres_url

    if not is_postgres_url(args.to):
        raise usage_error(f"--to must be a postgresql:// URL; got {args.to!r}", "to")
    with runtime(args) as rt:
        store = rt.lcm
        if isinstance(store.db, PgDatabase):
            raise CliError("this host's conversation store is already on PostgreSQL; migrate copies a SQLite "
                           "store (unset LCM_DATABASE_PATH to name the local file)", code="invalid_argument")  # fmt: skip
        destination = PgDatabase(args.to)
        try:
            report = copy_sqlite_to_postgres(store.db, destination, replace_nul=args.replace_nul)
        finally:
            destination.close()
    # The copy is verified before it commits (a mismatch raises, nothing kept); what is left to
    # show is damage the source already had, copied as it was.
    data = {"source": report.source, "destination": report.destination, "rows": report.rows,
            "verified": report.checks, "carried_from_source": report.carried, "nul_replaced": report.nul_replaced,
            "next": "point every host at it: LCM_DATABASE_PATH=<the URL> (large files stay in largeFilesDir)"}  # fmt: skip
    emit(args, data, lambda: kv_text(data))
    return 0
