"""``amem doctor``'s file check: every file and directory of the stores is its owner's only.

New files are created private (``amem.kernel.files``); a store made by an older version, or
copied with a wide umask, may still be readable by other users. ``wide_files`` finds each
such path (with its mode) under the data the runtime's settings name, and ``fix_files``
takes the group and other bits off them (``amem doctor --fix``).

The places checked are the ones amem writes: the home directory (the embedded store, the
models cache, ``server.json``, the nightly record), and lcm's database with its ``-wal`` /
``-shm``, its large-files directory and its event log with the log's rotations. A directory
that is not ours (the parent of a database the user placed in ``~``) is never walked.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from amem.kernel.files import fix_modes, wide_modes

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["data_paths", "wide_files", "fix_files"]


def data_paths(rt: "Runtime") -> list[Path]:
    """The files and directories amem writes under these settings (existing or not)."""
    home = Path(rt.settings.amem.home).expanduser()
    paths = [home]
    lcm = rt.settings.lcm
    url = rt.env.get("AMEM_LCM_URL", "").strip() or lcm.database_path
    if not url.startswith(("postgresql://", "postgres://")):
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
    # a path inside the home is walked with it; listing it twice would report it twice
    unique = [p for p in dict.fromkeys(paths) if p == home or not _inside(p, home)]
    return unique


def _log_and_rotations(log: Path) -> list[Path]:
    """The log and its rotations (``lcm-log.2026-01-01.jsonl``, ``lcm-log.2026-01-01.1.jsonl``)."""
    rotated = sorted(log.parent.glob(f"{log.stem}.*{log.suffix}")) if log.parent.is_dir() else []
    return [log, *rotated]


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def wide_files(rt: "Runtime") -> list[dict[str, Any]]:
    """Each path others may read or enter: ``{"path", "mode"}`` (mode as ``"0o755"``)."""
    return [{"path": str(path), "mode": oct(mode)}
            for root in data_paths(rt) for path, mode in wide_modes(root)]


def fix_files(rt: "Runtime") -> list[dict[str, Any]]:
    """Make every wide path private: ``{"path", "was", "now"}`` for each one changed."""
    return [{"path": str(path), "was": oct(old), "now": oct(new)}
            for root in data_paths(rt) for path, old, new in fix_modes(root)]
