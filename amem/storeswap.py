"""The store directory swap of ``amem reembed``, and finishing one a crash interrupted.

``reembed`` builds the new store beside the old (``store.reembed-new``), then swaps them with
two renames: ``store`` -> ``store.reembed-old``, ``store.reembed-new`` -> ``store``, and deletes
the old. A process killed between the two renames left no ``store``: the next command opened
a new, empty one there (``status``: 0 points, ``doctor``: ok), and the next ``reembed`` then
deleted ``store.reembed-old`` as a leftover, the only copy of the notes. Whoever opens the
store next finishes the swap instead (:func:`finish_interrupted_swap`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

from .kernel.files import flock_held

log = logging.getLogger(__name__)

__all__ = ["NEW", "OLD", "SPOOL", "abandoned_rebuild", "finish_interrupted_swap",
           "hold_spool", "remove_abandoned", "swap_paths"]

#: the names beside ``store`` during a rebuild
NEW, OLD = "store.reembed-new", "store.reembed-old"
#: every note's payload, one JSON line each, read back to build the new store
SPOOL = "store.reembed-spool.jsonl"


def swap_paths(path: Path) -> tuple[Path, Path]:
    """``(new, old)`` beside the store at ``path``."""
    return path.with_name(NEW), path.with_name(OLD)


def finish_interrupted_swap(path: Path) -> str | None:
    """When the store at ``path`` is missing while a swap's old store is there, put a store
    back in place; what was done (None: nothing to do).

    The new store is complete once the swap starts (the renames come after the last write),
    so it takes the store's place, as the interrupted run meant; without it the old store goes
    back. The old store is left for ``reembed`` to delete when the new one is in place.
    """
    new, old = swap_paths(path)
    if path.exists() or not old.is_dir():
        return None
    source = new if new.is_dir() else old
    try:
        source.rename(path)
    except FileNotFoundError:  # another process finished it first
        return None
    done = (f"finished an interrupted reembed: {source.name} is the store again"
            if source is new else f"an interrupted reembed left no new store: {old.name} is the store again")
    log.warning("%s (%s)", done, path)
    return done


def hold_spool(path: Path) -> int:
    """Create the spool beside the store at ``path`` (0600) and hold an exclusive ``flock`` on
    it; the descriptor. ``reembed`` holds it from before it creates ``store.reembed-new`` until
    the spool is gone, so leftovers whose spool nobody holds are provably abandoned.

    Raises ``BlockingIOError`` when another reembed holds it.
    """
    from .kernel.files import open_private

    fd = open_private(path.with_name(SPOOL), os.O_WRONLY | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def abandoned_rebuild(path: Path) -> list[Path]:
    """What a killed ``reembed`` left beside the store at ``path``: its half-built store, its
    spool (a copy of every note's text) and, once the swap was done, the old store; [] while a
    reembed runs (it holds the spool) or when nothing is left. A swap a kill interrupted
    (no store at ``path``) is ``finish_interrupted_swap``'s, at the next open: [] here too."""
    new, old = swap_paths(path)
    spool = path.with_name(SPOOL)
    if not path.is_dir():
        return []
    found = [p for p in (new, spool, old) if p.exists() or p.is_symlink()]
    if not found or (spool.exists() and flock_held(spool)):
        return []
    return found


def remove_abandoned(path: Path) -> list[Path]:
    """Delete what ``abandoned_rebuild`` finds (the store at ``path`` is whole and in use);
    the paths removed."""
    found = abandoned_rebuild(path)
    for leftover in found:
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
        else:
            leftover.unlink()
        log.warning("removed %s, left by an interrupted reembed", leftover)
    return found
