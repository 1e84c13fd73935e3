"""``amem doctor``'s file check: every file and directory of the stores is its owner's only.

New files are created private (``amem.kernel.files``); a store made by an older version, or
copied with a wide umask, may still be readable by other users. ``wide_files`` finds each
such path (with its mode) under the data the runtime's settings name, and ``fix_files``
takes the group and other bits off them (``amem doctor --fix``).

The places checked are the ones amem writes, by name: the home directory itself (not what
else it holds), the embedded store, the models cache, ``server.json``, the nightly record and
lock, and lcm's database with its ``-wal`` / ``-shm``, its large-files directory and its event
log with the log's rotations. A directory that is not ours (the parent of a database the user
placed in ``~``) is never walked, nor a file someone else keeps beside ours.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amem.kernel.files import fix_modes, wide_modes
from lcm.pg.url import is_postgres_url

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["data_paths", "wide_files", "fix_files"]


#: what amem writes in its home directory, besides lcm's files (``scheduler.config`` names the
#: nightly record and lock, ``tools.remote`` the server record, ``amem.reembed`` its spool)
HOME_ENTRIES = ("store", "models", "server.json", "nightly.json", "nightly.lock",
                "nightly_refused.json", "nightly_runs.jsonl", "nightly_end.json",
                "store.reembed-spool.jsonl", "store.reembed-new", "store.reembed-old")


def data_paths(rt: "Runtime") -> list[Path]:
    """The files and directories amem writes under these settings (existing or not); the
    home directory is checked as an entry, each of the others with what it holds."""
    home = Path(rt.settings.amem.home).expanduser()
    paths = [home / name for name in HOME_ENTRIES]
    lcm = rt.settings.lcm
    url = rt.env.get("AMEM_LCM_URL", "").strip() or lcm.database_path
    if not is_postgres_url(url):
        db = Path(url).expanduser() if url else rt.lcm_path
        paths += [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"),
                  db.with_name(db.name + "-journal")]
        if not lcm.large_files_dir:
            paths.append(db.parent / "lcm-files")
        if lcm.log_file_enabled and not lcm.log_file:
            paths += _log_and_rotations(db.parent / "lcm-log.jsonl")
    if lcm.large_files_dir:
        paths.append(Path(lcm.large_files_dir).expanduser())
    if lcm.log_file_enabled and lcm.log_file:
        paths += _log_and_rotations(Path(lcm.log_file).expanduser())
    return list(dict.fromkeys(paths))


def _log_and_rotations(log: Path) -> list[Path]:
    """The log and its rotations (``lcm-log.2026-01-01.jsonl``, ``lcm-log.2026-01-01.1.jsonl``)."""
    rotated = sorted(log.parent.glob(f"{log.stem}.*{log.suffix}")) if log.parent.is_dir() else []
    return [log, *rotated]


def wide_files(rt: "Runtime") -> list[dict[str, Any]]:
    """Each path others may read or enter: ``{"path", "mode"}`` (mode as ``"0o755"``)."""
    found = [{"path": str(path), "mode": oct(mode)} for path, mode in _home_entry(rt)]
    return found + [{"path": str(path), "mode": oct(mode)}
                    for root in data_paths(rt) for path, mode in wide_modes(root)]


def fix_files(rt: "Runtime") -> list[dict[str, Any]]:
    """Make every wide path private: ``{"path", "was", "now"}`` for each one changed."""
    fixed = []
    for path, mode in _home_entry(rt):
        os.chmod(path, mode & ~0o077)
        fixed.append({"path": str(path), "was": oct(mode), "now": oct(mode & ~0o077)})
    return fixed + [{"path": str(path), "was": oct(old), "now": oct(new)}
                    for root in data_paths(rt) for path, old, new in fix_modes(root)]


def _home_entry(rt: "Runtime") -> list[tuple[Path, int]]:
    """The home directory itself when others may list or enter it (its own mode only)."""
    home = Path(rt.settings.amem.home).expanduser()
    try:
        st = home.lstat()
    except FileNotFoundError:
        return []
    mode = stat.S_IMODE(st.st_mode)
    return [(home, mode)] if stat.S_ISDIR(st.st_mode) and mode & 0o077 else []
