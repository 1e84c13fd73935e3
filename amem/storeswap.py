"""The store directory swap of ``amem reembed``, and finishing one a crash interrupted.

``reembed`` builds the new store beside the old (``store.reembed-new``), then swaps them with
two renames: ``store`` -> ``store.reembed-old``, ``store.reembed-new`` -> ``store``, and deletes
the old. A process killed between the two renames left no ``store``: the next command opened
a new, empty one there (``status``: 0 points, ``doctor``: ok), and the next ``reembed`` then
deleted ``store.reembed-old`` as a leftover, the only copy of the notes. Whoever opens the
store next finishes the swap instead (:func:`finish_interrupted_swap`).
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["NEW", "OLD", "finish_interrupted_swap", "swap_paths"]

#: the names beside ``store`` during a rebuild
NEW, OLD = "store.reembed-new", "store.reembed-old"


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
