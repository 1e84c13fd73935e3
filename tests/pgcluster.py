"""A throwaway PostgreSQL cluster for the tests: initdb in a temporary directory, a free port, stop.

The PostgreSQL tests of lcm never skip in CI, so a missing server is a clear failure here,
not a skip. ``AMEM_TEST_PG_URL`` points the tests at a server someone already runs instead
(it must allow ``CREATE DATABASE``); otherwise the newest ``/usr/lib/postgresql/*/bin`` is
used. As root (CI) the cluster runs as the ``postgres`` user, since the server refuses to
run as root; as anyone else it runs as that user.

The cluster trades durability for speed (``fsync=off``): it lives for one test session.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PgCluster", "PgClusterError", "find_pg_bin", "start_cluster"]

#: the role and database every cluster has; trust authentication, so no password
_SUPERUSER = "postgres"


class PgClusterError(RuntimeError):
    """The test cluster could not be found, started or stopped; the message says which step."""


def find_pg_bin(candidates: Sequence[str] | None = None) -> Path:
    """The ``bin`` directory of the newest installed PostgreSQL (the one holding ``initdb``)."""
    found = list(candidates) if candidates is not None else glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found += [p for p in [shutil.which("initdb")] if p and candidates is None]
    usable = [Path(p).parent for p in found if os.access(p, os.X_OK)]
    if not usable:
        raise PgClusterError(
            "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb and no initdb on PATH): "
            "install the Debian package `postgresql` (apt-get install -y postgresql), or set AMEM_TEST_PG_URL "
            "to a server the tests may create databases on"
        )

    def version(bin_dir: Path) -> tuple[int, ...]:
        try:
            return tuple(int(x) for x in bin_dir.parent.name.split("."))
        except ValueError:
            return (0,)

    return max(usable, key=version)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgCluster:
    """A running test cluster (or an external server); ``stop()`` is safe to call twice."""

    url: str  # the maintenance database's URL
    host: str
    port: int
    root: Path | None  # the temporary directory holding the data, None for an external server
    bin_dir: Path | None
    as_user: str | None  # the OS user the server runs as when we are root

    def database_url(self, name: str) -> str:
        return f"postgresql://{_SUPERUSER}@{self.host}:{self.port}/{name}"

    def create_database(self, prefix: str = "lcm_test") -> str:
        """A fresh, empty database (one per test keeps tests independent); returns its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.root is None or self.bin_dir is None or not self.root.exists():
            return
        try:
            _run(self, [str(self.bin_dir / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(self.root / "data")], "pg_ctl stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _run(cluster: PgCluster | None, argv: list[str], step: str, as_user: str | None = None) -> None:
    user = as_user if cluster is None else cluster.as_user
    cmd = ["runuser", "-u", user, "--", *argv] if user else argv
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise PgClusterError(f"{step} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")


def start_cluster(bin_dir: Path | None = None, external_url: str | None = None) -> PgCluster:
    """Start a cluster in a new temporary directory on a free 127.0.0.1 port (and a unix socket)."""
    if external_url:
        from urllib.parse import urlsplit

        parts = urlsplit(external_url)
        return PgCluster(external_url, parts.hostname or "127.0.0.1", parts.port or 5432, None, None, None)
    bin_dir = bin_dir or find_pg_bin()
    as_user = None
    root = Path(tempfile.mkdtemp(prefix="amem-pg-"))
    if os.geteuid() == 0:
        # the server refuses to run as root; the directory must belong to the user it runs as
        as_user = _SUPERUSER
        shutil.chown(root, user=as_user)
    data, port = root / "data", _free_port()
    cluster = PgCluster(f"postgresql://{_SUPERUSER}@127.0.0.1:{port}/postgres", "127.0.0.1", port, root, bin_dir, as_user)
    try:
        # C.UTF-8, not C: pg_trgm and lower() treat non-ASCII letters (CJK) as letters only
        # under a UTF-8 character class; no sync, since the cluster is thrown away.
        _run(cluster, [str(bin_dir / "initdb"), "-D", str(data), "-U", _SUPERUSER, "-A", "trust",
                       "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], "initdb")  # fmt: skip
        opts = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60")  # fmt: skip
        _run(cluster, [str(bin_dir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(data),
                       "-l", str(root / "server.log"), "-o", opts], "pg_ctl start")  # fmt: skip
    except BaseException:
        log_file = root / "server.log"
        detail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
        try:
            cluster.stop()
        except PgClusterError:
            pass  # the server never came up; the start error below is the one to report
        shutil.rmtree(root, ignore_errors=True)
        if detail:
            raise PgClusterError(f"the test PostgreSQL cluster did not start; server log:\n{detail}") from None
        raise
    return cluster
