"""``amem reembed``: rebuild every vector of an embedded store with another embedder.

A store records the ``model_id`` and ``dim`` of the embedder that made its vectors and refuses
to open with another one, so switching models means rebuilding. The old store is read straight
from the engine (no old embedder needed, so this also rescues a store whose model is gone):

1. every note (of every agent, active or not) is spooled to a JSON-lines file beside the store;
2. a new store is built in ``<home>/store.reembed-new`` with the new embedder, in batches,
   with fresh BM25 statistics; the new store's metadata records the new model;
3. the directories are swapped (``store`` -> ``store.reembed-old`` -> deleted).

A crash before step 3 leaves the old store untouched (the half-built one is discarded on the
next run). The run holds a ``flock`` on its spool from before the new store exists until the
spool is gone, so what a killed run left is known abandoned: ``amem doctor`` reports it (the
spool holds every note's text) and ``amem doctor --fix`` deletes it
(``storeswap.abandoned_rebuild``). Server backends are not rebuilt in place: export, then import into a new collection.

The CLI command is ``amem reembed`` (``tools.cli.notes``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from .backends import EdgeBackend
from .config import AmemConfig
from .embed.base import Embedder
from .errors import ConfigError, ValidationError
from .index import NoteIndex
from .kernel.files import open_private
from .notes import Note
from .storeswap import SPOOL, finish_interrupted_swap, hold_spool, swap_paths

log = logging.getLogger(__name__)

Progress = Callable[[int, "int | None"], None]


@dataclass(frozen=True)
class ReembedReport:
    """What a rebuild did."""

    path: str
    old_embedder: str
    new_embedder: str
    old_dim: int
    new_dim: int
    notes: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reembed(config: AmemConfig, embedder: Embedder, *, batch: int | None = None,
            progress: Progress | None = None) -> ReembedReport:
    """Rebuild the embedded store of ``config`` with ``embedder``; see the module docstring."""
    if config.backend != "edge":
        raise ConfigError("reembed rebuilds embedded stores only; for a Qdrant server run "
                          "`amem export`, then import into a new collection with the new "
                          "embedder (`amem import --from-export`)", key="backend")
    path = Path(config.store_path)
    finish_interrupted_swap(path)  # before the leftovers go: the old one may be the only copy
    if not path.is_dir():
        raise ValidationError(f"there is no store at {path} to rebuild", field="home")
    started = time.perf_counter()
    spool = path.with_name(SPOOL)
    new_path, old_path = swap_paths(path)
    old = EdgeBackend(path)  # takes the store's lock: nobody else may write meanwhile
    try:
        # Held until the spool is gone, from before the new store exists: leftovers whose
        # spool nobody holds are a killed run's (``storeswap.abandoned_rebuild``).
        guard = hold_spool(path)
    except BaseException:
        old.close()
        raise
    try:
        for leftover in (new_path, old_path):
            if leftover.exists():
                log.warning("reembed: removing %s left by an interrupted run", leftover)
                shutil.rmtree(leftover)
        meta, done = _rebuild(old, spool, new_path, config, embedder, batch, progress)
        path.rename(old_path)
        new_path.rename(path)
        shutil.rmtree(old_path)
        spool.unlink()
    finally:
        os.close(guard)
    report = ReembedReport(path=str(path), old_embedder=str(meta.get("embedder")),
                           new_embedder=embedder.model_id, old_dim=int(meta.get("dim") or 0),
                           new_dim=embedder.dim, notes=done,
                           seconds=round(time.perf_counter() - started, 3))
    log.info("reembed: %s", report)
    return report


def _rebuild(old: EdgeBackend, spool: Path, new_path: Path, config: AmemConfig,
             embedder: Embedder, batch: int | None, progress: Progress | None
             ) -> tuple[dict[str, Any], int]:
    """Spool every note of ``old``, build the new store from the spool; (old meta, notes
    written). Closes ``old`` (its lock) once the new store is built."""
    from .store import MemoryStore  # the new store is opened as any store is (upgrades included)

    try:
        meta = old.read_meta()
        total = 0
        # every note's text: 0600, and never written through a link planted at its name
        with os.fdopen(open_private(spool, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w",
                       encoding="utf-8") as out:
            for hit in old.iterate(None):
                out.write(json.dumps(hit.payload, ensure_ascii=False) + "\n")
                total += 1
        new = MemoryStore(new_path, config=config, embedder=embedder)
        try:
            size = batch or config.embed_batch
            done = 0
            chunk: list[Note] = []
            with spool.open("r", encoding="utf-8") as rows:
                for line in rows:
                    chunk.append(Note.from_payload(json.loads(line)))
                    if len(chunk) >= size:
                        done += _write(new.index, chunk)
                        chunk = []
                        if progress:
                            progress(done, total)
            done += _write(new.index, chunk)
            if progress:
                progress(done, total)
        finally:
            new.close()
    finally:
        old.close()
    return meta, done


def _write(index: NoteIndex, notes: list[Note]) -> int:
    """Embed ``notes`` with the new embedder and write them with fresh BM25 statistics."""
    if not notes:
        return 0
    vectors = index.embed_passages([n.embed_text() for n in notes])
    index.write_points([index.make_point(n, v) for n, v in zip(notes, vectors)])
    return len(notes)


__all__ = ["Progress", "ReembedReport", "reembed"]
