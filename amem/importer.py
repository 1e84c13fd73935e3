"""Bulk import and export: JSONL, plain text or Markdown in; JSONL exports between backends.

Import is resumable and idempotent: a note without an id gets one derived from its agent and
content hash, so a run killed at any point and started again ends with exactly the unique
notes (already-stored ones dedup by hash, a half-written batch is simply written again).
A bad line is reported with file and line number and skipped.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

import numpy as np

from .errors import ValidationError
from .notes import Note, content_hash

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: called after each batch with (lines done, lines total or None)
Progress = Callable[[int, "int | None"], None]


@dataclass
class ImportReport:
    """What an import did, line by line where it matters."""

    path: str
    read: int = 0
    created: int = 0
    deduplicated: int = 0
    folded: int = 0
    pending_merge: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    #: degraded but not lost: notes whose new vector could not be computed yet
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.read / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "read": self.read, "created": self.created,
                "deduplicated": self.deduplicated, "folded": self.folded,
                "pending_merge": self.pending_merge, "skipped": self.skipped,
                "errors": self.errors, "warnings": self.warnings, "seconds": round(self.seconds, 3),
                "notes_per_second": round(self.rate, 1)}


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".md", ".markdown", ".txt", ".text"):
        return "text"
    raise ValidationError(f"cannot tell the format of {path.name}: use .jsonl, .md or .txt, "
                          f"or pass format='jsonl'|'text'", field="format")


def read_items(path: Path, fmt: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, item) pairs; an item that cannot be parsed comes as an error string."""
    with path.open("r", encoding="utf-8", errors="strict") as handle:
        if fmt == "jsonl":
            yield from _jsonl(handle)
        else:
            yield from _paragraphs(handle)


def _jsonl(handle: TextIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON: {exc.msg} at column {exc.colno}"
            continue
        if not isinstance(item, dict):
            yield number, "each line must be a JSON object with a 'text' field"
            continue
        yield number, item


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def _paragraphs(handle: TextIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """One note per paragraph (blank-line separated); a Markdown heading starts a new one."""
    block: list[str] = []
    start = 0
    for number, line in enumerate(handle, start=1):
        if not line.strip() or (_HEADING.match(line) and block):
            if block:
                yield start, {"text": "".join(block).strip()}
                block = []
            if not line.strip():
                continue
        if not block:
            start = number
        block.append(line)
    if block:
        yield start, {"text": "".join(block).strip()}


def import_file(store: "MemoryStore", path: str | Path, *, fmt: str | None = None,
                enrich: bool = True, agent_id: str | None = None, batch: int | None = None,
                progress: Progress | None = None) -> ImportReport:
    """Import one file into ``store``; see the module docstring for the guarantees."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="path")
    fmt = fmt or detect_format(path)
    if fmt not in ("jsonl", "text"):
        raise ValidationError("format must be 'jsonl' or 'text'", field="format")
    total = _count_lines(path)
    report = ImportReport(path=str(path))
    size = batch or store.config.embed_batch
    started = time.perf_counter()
    pending: list[dict[str, Any]] = []
    lines: list[int] = []
    last_line = 0

    def flush() -> None:
        if not pending:
            return
        results = store.writer.add_many(pending, enrich=enrich, agent_id=agent_id, batch=size)
        for number, result in zip(lines, results):
            if result.status == "rejected":
                _skip(report, path, number, "; ".join(result.warnings))
            else:
                setattr(report, result.status, getattr(report, result.status) + 1)
        pending.clear()
        lines.clear()
        if progress is not None:
            progress(last_line, total)

    # Notes changed by folds and evolutions get their new vector every so many batches and
    # at the end, not after every batch (see Writer.deferred_reembed).
    with store.writer.deferred_reembed() as problems:
        for number, item in read_items(path, fmt):
            report.read += 1
            last_line = number
            if isinstance(item, str):
                _skip(report, path, number, item)
                continue
            try:
                item = _with_stable_id(item)
                store.writer.draft(item, enrich=enrich, agent_id=agent_id)  # validate only
            except ValidationError as exc:
                _skip(report, path, number, str(exc))
                continue
            pending.append(item)
            lines.append(number)
            if len(pending) >= size:
                flush()
        flush()
    report.warnings.extend(problems)
    store.flush()
    report.seconds = time.perf_counter() - started
    return report


def _with_stable_id(item: dict[str, Any]) -> dict[str, Any]:
    """Give an id-less item an id derived from its content, so re-runs write the same point."""
    if "id" in item or not isinstance(item.get("text"), str):
        return item
    # Point ids already include the agent, so the content hash alone is a stable note id.
    return {**item, "id": f"imp-{content_hash(item['text'])[:24]}"}


def _skip(report: ImportReport, path: Path, number: int, why: str) -> None:
    report.skipped += 1
    message = f"{path}:{number}: {why}"
    report.errors.append(message)
    log.warning("import: skipped %s", message)


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


# ---------------------------------------------------------------------------- export / move


def export_store(store: "MemoryStore", out: TextIO, *, all_agents: bool = True,
                 with_vectors: bool = True) -> int:
    """Write every note (active or not) as JSON lines, with its vector, for ``import_export``."""
    written = 0
    for note, vector in store.iter_notes(all_agents=all_agents, include_inactive=True,
                                         with_vectors=with_vectors):
        row: dict[str, Any] = {"note": note.to_payload()}
        if vector is not None:
            row["vector"] = [round(float(x), 7) for x in vector]
        row["embedder"] = store.embedder.model_id
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        written += 1
    return written


def import_export(store: "MemoryStore", source: TextIO, *, batch: int = 256) -> int:
    """Load an ``export_store`` file: notes keep ids, history and heat; vectors are reused when
    they come from the same embedder, re-embedded otherwise."""
    points = []
    count = 0
    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            note = Note.from_payload(row["note"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValidationError(f"export line {number} is not a note: {exc}", field="export") from None
        vector = row.get("vector")
        same_model = row.get("embedder") == store.embedder.model_id and vector is not None
        vec = (np.asarray(vector, dtype=np.float32) if same_model
               else store.embed_passages([note.embed_text()])[0])
        # a reused vector keeps its stale mark; the store's next write re-embeds it
        points.append(store.make_point(note, vec, stale=same_model and note.vector_stale))
        count += 1
        if len(points) >= batch:
            store.write_points(points)
            points = []
    if points:
        store.write_points(points)
    store.flush()
    return count


__all__ = ["ImportReport", "import_file", "export_store", "import_export"]
