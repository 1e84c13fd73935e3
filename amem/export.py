"""Export and re-import of whole stores: JSON lines with ids, history, heat and vectors.

An export keeps every note (active or not) with its vector and the embedder that made it, so
a store moves between backends (embedded engine, Qdrant server) without re-embedding. Loading
checks the whole file first, as an import does (``amem.importer``), then writes in batches. A
note already stored as the export has it is left as it is (``unchanged``: a rerun writes
nothing); one stored otherwise is written back as exported (``replaced``), its old terms taken
out of the BM25 statistics first, so they count each point once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from .errors import ValidationError
from .kernel import safejson
from .kernel.errors import InvalidArgumentError
from .backends.base import Match, Where
from .bm25 import payload_terms
from .importer import ImportRejected, ImportReport, Progress, check_batch, skip_line
from .notefields import check_metadata, parse_time
from .notes import Note, check_agent, check_id, check_text, point_id

if TYPE_CHECKING:
    from .index import NoteIndex
    from .store import MemoryStore

#: an export row's mark that its vector embeds the note's subjects (written since issue 29)
SUBJECTS_EMBEDDED = "subjects_embedded"
#: notes a load writes (and embeds, when their vectors cannot be reused) together
EXPORT_BATCH = 256


def export_store(store: "MemoryStore", out: TextIO, *, all_agents: bool = True,
                 with_vectors: bool = True, progress: Progress | None = None) -> int:
    """Write every note (active or not) as JSON lines, with its vector, for ``import_export``."""
    total = store.index.backend.count(None) if progress is not None else None
    written = 0
    for note, vector in store.iter_notes(all_agents=all_agents, include_inactive=True,
                                         with_vectors=with_vectors):
        out.write(export_line(store, note, vector))
        written += 1
        if progress is not None and written % 1000 == 0:
            progress(written, total)
    if progress is not None:
        progress(written, total)
    return written


def export_line(store: "MemoryStore", note: Note, vector: np.ndarray | None) -> str:
    """One note as an export's JSON line (with its end), read back by ``import_export``."""
    row: dict[str, Any] = {"note": note.to_payload()}
    if vector is not None:
        row["vector"] = [round(float(x), 7) for x in vector]
    row["embedder"] = store.embedder.model_id
    row[SUBJECTS_EMBEDDED] = True
    return json.dumps(row, ensure_ascii=False) + "\n"


def export_where(agent_id: str | None) -> Where | None:
    """The notes an export holds: every agent's (None), or one agent's, active or not."""
    return None if agent_id is None else Where(must=(Match("agent_id", agent_id),))


def export_page(store: "MemoryStore", *, cursor: str | None, limit: int, with_vectors: bool,
                agent_id: str | None = None) -> tuple[list[str], str | None]:
    """One page of an export (every agent's notes, or ``agent_id``'s; active or not) and the
    cursor of the next (None at the end): how a server that holds the store exports it.

    Pages follow the points' id order, so while writes go on each note is in exactly one page,
    a note acknowledged before the first page is in the export unless it was erased since, and
    one added meanwhile may or may not be (a copy of the engine's files, the alternative, lost
    acknowledged notes: docs/cli.md).
    """
    hits, nxt = store.index.backend.scroll(export_where(agent_id), limit=limit, offset=cursor,
                                           with_vectors=with_vectors)
    return [export_line(store, Note.from_payload(h.payload), h.dense if with_vectors else None)
            for h in hits], nxt


def import_export(store: "MemoryStore", source: TextIO, *, batch: int = 256) -> int:
    """Load an ``export_store`` stream (seekable: it is checked, then written); the count."""
    return _load_export(store, source, "export", batch=batch).created


def load_export(store: "MemoryStore", path: str | Path, *, batch: int | None = None,
                skip_invalid: bool = False, progress: Progress | None = None,
                keep_stored: bool = False) -> ImportReport:
    """Load an ``export_store`` file: notes keep ids, history and heat; vectors are reused when
    they come from the same embedder, re-embedded otherwise. Checked whole before writing.

    ``batch``: notes written (and embedded) together, a whole number of at least 1 (default
    ``EXPORT_BATCH``). The report counts a note as ``created`` (its point was free),
    ``unchanged`` (stored as the export has it: not written) or ``replaced``.

    ``keep_stored`` (a merge into a store in use, ``amem restore --merge``): a stored note is
    never written; one of the same id and text is ``kept`` as stored, one of another text is a
    clash, named in ``report.clashes`` ("agent/id").
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="path")
    check_batch(batch, f"the default ({EXPORT_BATCH})")
    with path.open("r", encoding="utf-8") as source:
        return _load_export(store, source, str(path), batch=batch or EXPORT_BATCH,
                            skip_invalid=skip_invalid, progress=progress, keep_stored=keep_stored)


def check_export(store: "MemoryStore", path: str | Path, *,
                 skip_invalid: bool = False) -> ImportReport:
    """``load_export``'s first pass alone: every line read and checked, nothing written.

    A restore runs it before it writes the backup's other parts, so a damaged notes file
    stops the restore before anything is written (``load_export`` checks again as it loads).
    Raises as ``load_export`` does; returns the check's report.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="path")
    with path.open("r", encoding="utf-8") as source:
        return _checked(store, source, str(path), skip_invalid=skip_invalid)


def _checked(store: "MemoryStore", source: TextIO, name: str, *,
             skip_invalid: bool) -> ImportReport:
    """The first pass over ``source`` from where it stands: every row checked, none written."""
    where = Path(name)
    check = ImportReport(path=name)
    try:
        for number, line in enumerate(source, start=1):
            check.last_line = number
            if line.strip():
                check.read += 1
                _export_row(store, line, number, check, where)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{name} is not UTF-8 text (after line {check.last_line}, byte "
                              f"{exc.start}); nothing was imported", field="file") from None
    if check.skipped and not skip_invalid:
        raise ImportRejected(where, check)
    return check


def _load_export(store: "MemoryStore", source: TextIO, name: str, *, batch: int,
                 skip_invalid: bool = False, progress: Progress | None = None,
                 keep_stored: bool = False) -> ImportReport:
    if not source.seekable():
        raise ValidationError("an export is read twice (checked, then written): give a file, "
                              "not a pipe", field="source")
    where = Path(name)
    start = source.tell()
    check = _checked(store, source, name, skip_invalid=skip_invalid)
    source.seek(start)
    # nothing is judged: each note keeps the supersession marks (and ``kept_against``) it was
    # exported with (the report said "deferred to nightly", as if a restore were judged again)
    report = ImportReport(path=name, supersede="as exported",
                          clashes=[] if keep_stored else None)
    started = time.perf_counter()
    rows: list[tuple[Note, np.ndarray | None]] = []

    def flush(done: int) -> None:
        index = store.index
        todo = _to_write(index, rows, report)
        missing = [i for i, (_, vec) in enumerate(todo) if vec is None]
        vectors: dict[int, np.ndarray] = {}
        if missing:  # one embedding call per batch, not one per note
            fresh = index.embed_passages([todo[i][0].embed_text() for i in missing])
            vectors = {i: fresh[n] for n, i in enumerate(missing)}
        # a reused vector keeps its stale mark (``_to_write``); the store's next write
        # re-embeds it
        if todo:
            index.write_points([index.make_point(note, vectors[i] if vec is None else vec,
                                                 stale=note.vector_stale)
                                for i, (note, vec) in enumerate(todo)])
        rows.clear()
        if progress is not None:
            progress(done, check.last_line)

    for number, line in enumerate(source, start=1):
        if not line.strip():
            continue
        report.read += 1
        row = _export_row(store, line, number, report, where)
        if row is not None:
            rows.append(row)
        if len(rows) >= batch:
            flush(number)
    flush(check.last_line)
    store.flush()
    report.seconds = time.perf_counter() - started
    return report


def _to_write(index: "NoteIndex", rows: list[tuple[Note, np.ndarray | None]],
              report: ImportReport) -> list[tuple[Note, np.ndarray | None]]:
    """The batch's notes to write, each point once, counted in ``report``: one whose point is
    free is created; one stored as the export has it is unchanged, and not written; one stored
    otherwise is replaced, its old terms taken out of the BM25 statistics here (``make_point``
    counts its new ones). One engine call per batch. (Each point used to be written and
    counted as new: a second load said "created" for every note and left the statistics
    twice the engine's until the next open.)"""
    points = [point_id(note.agent_id, note.id) for note, _ in rows]
    stored = {hit.id: hit.payload for hit in index.backend.retrieve(points)}
    current = {pid: Note.from_payload(payload) for pid, payload in stored.items()}
    todo: dict[str, tuple[Note, np.ndarray | None]] = {}
    for pid, (note, vec) in zip(points, rows):
        # the mark the point gets: a reused vector's, none for one embedded now
        note = note.copy(vector_stale=vec is not None and note.vector_stale)
        was = current.get(pid)
        if was == note:
            report.unchanged += 1
            continue
        if was is not None and report.clashes is not None:  # a merge never overwrites
            if was.content == note.content:
                report.kept += 1
            else:
                report.clashes.append(f"{note.agent_id}/{note.id}")
            continue
        if was is None:
            report.created += 1
        else:
            report.replaced += 1
        if pid in stored and pid not in todo:
            index.stats.remove(len(payload_terms(stored[pid])))
        current[pid], todo[pid] = note, (note, vec)  # a later line of the point's wins
    return list(todo.values())


def _export_row(store: "MemoryStore", line: str, number: int, report: ImportReport,
                path: Path) -> tuple[Note, np.ndarray | None] | None:
    """One export line as (note, reusable vector or None); a bad line is skipped in ``report``."""
    try:  # bad JSON, deep nesting, lone surrogates: one rule (amem.kernel.safejson); without
        # its line break, so a line cut short is reported where the JSON stops, not at column 1
        row = safejson.loads(line.rstrip("\r\n"), root="the line")
    except InvalidArgumentError as exc:
        skip_line(report, path, number, str(exc))
        return None
    try:
        return _export_note(store, row)
    except ValidationError as exc:
        skip_line(report, path, number, str(exc))
        return None


def _export_note(store: "MemoryStore", row: Any) -> tuple[Note, np.ndarray | None]:
    if not isinstance(row, dict) or not isinstance(row.get("note"), dict):
        raise ValidationError("each line must be an object with a 'note' object", field="note")
    payload = row["note"]
    check_text(payload.get("content"), field="note.content",
               max_chars=store.config.max_text_chars)
    check_id(payload.get("id"), field="note.id")
    check_agent(payload.get("agent_id"), field="note.agent_id")
    # the fields search filters on are checked as an add checks them (an expiry may have passed)
    check_metadata(payload.get("metadata"))
    for name in ("event_time", "expires_at"):
        if payload.get(name):
            parse_time(payload[name], field=f"note.{name}")
    try:
        note = Note.from_payload(payload)
    except TypeError as exc:
        raise ValidationError(f"note fields do not fit: {exc}", field="note") from None
    vector = row.get("vector")
    if row.get("embedder") != store.embedder.model_id or vector is None:
        return note, None  # another model's vector (or none): embedded again
    if (not isinstance(vector, list) or len(vector) != store.embedder.dim
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)):
        raise ValidationError(f"vector must be a list of {store.embedder.dim} numbers",
                              field="vector")
    vec = np.asarray(vector, dtype=np.float32)
    if not np.isfinite(vec).all():
        raise ValidationError("vector holds a NaN or infinite number", field="vector")
    if row.get(SUBJECTS_EMBEDDED) is not True and note.embed_text() != note.copy(
            subjects=[]).embed_text():
        # exported before subjects reached the vector: kept for now, re-embedded at the next
        # write (as a store of that age is at open, ``amem.upgrades.rank_subjects``)
        note.vector_stale = True
    return note, vec


__all__ = ["check_export", "export_store", "import_export", "load_export"]
