"""Bulk import: JSONL, plain text or Markdown in, checked whole first, written in batches.

Both imports (a JSONL/text file here, and an ``amem export`` file in ``amem.export``) check the
whole file first in one streaming pass: a file with a bad line writes nothing and
``ImportRejected`` names every bad line (file:line: reason); ``skip_invalid`` imports the good
lines and reports the others. A bad line is one the writer would refuse: a field it rejects,
or (checked a batch of lines at a time) an id that an earlier line gives another text, or that
a stored note holds with another text. Then the file is read again and written in bounded
batches, so memory stays flat however long the file is (but for the check's record of the ids
lines give themselves, a few hundred bytes each).

Import is resumable and idempotent: a note without an id gets one derived from its agent,
content hash and subjects, so a run killed at any point and started again ends with exactly
the unique notes (already-stored ones dedup by hash, a half-written batch is simply written
again). An export keeps its ids, so a rerun finds its notes stored and leaves them be
(``amem.export``).

The stages: a file's items are read by ``amem.importread``; the whole-file check is
``amem.importcheck``; the writing pass is ``import_file``, here; what both passes record and
raise is ``amem.importreport``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .docsplit import Warn, heading_text
from .errors import AmemError, ValidationError
from .importcheck import IdClashes, check_whole, draft_line, with_stable_id
# the first pass's limits and helper, as this module had them (``__all__`` leaves them out)
from .importcheck import ID_LOOKUP as ID_LOOKUP, TEXT_ELSEWHERE as TEXT_ELSEWHERE
from .importcheck import _text_elsewhere as _text_elsewhere
from .importread import DOCUMENTS, FORMATS, detect_format, file_title, read_items, unit
from .importreport import MAX_ERRORS, MAX_WARNINGS, ImportRejected, ImportReport, place, skip_line
from .importtitle import FileTitle
from .kernel.errors import DiskFullError
from .notes import MAX_ITEM_CHARS, Note, check_text
from .write.bulk import AHEAD_CHUNKS, check_batch

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: called after each batch with (lines done, lines total or None)
Progress = Callable[[int, "int | None"], None]
#: a note's warning the report says as a count instead (``supersede_deferred``), not per line
_COUNTED = ("supersede check deferred to the nightly sweep",)


def _stored_now(store: "MemoryStore", agent_id: str | None, before: int) -> str:
    """The exact active-note count after a stopped import, read back from the engine."""
    try:
        after = store.count(agent_id=agent_id)
    except AmemError as exc:  # the message still says what is safe without it
        return f"the count could not be read back: {exc}"
    return f"the store now holds {after:,} active notes of this agent, {before:,} before the import"


def import_file(store: "MemoryStore", path: str | Path, *, fmt: str | None = None,
                enrich: bool = True, agent_id: str | None = None, batch: int | None = None,
                progress: Progress | None = None, skip_invalid: bool = False,
                supersede: bool = True, title: str | None = None,
                flush_at_end: bool = True, source: str | None = None,
                gained: set[str] | None = None,
                titled: set[tuple[str, str]] | None = None,
                kept_out: set[str] | None = None) -> ImportReport:
    """Import one file into ``store``; see the module docstring for the guarantees.

    The whole file is checked first (one streaming pass): with a bad line nothing is written
    and ``ImportRejected`` lists the bad lines, unless ``skip_invalid`` imports the rest.
    Imported notes are judged for supersession as adds are (``amem.write.bulk``) unless
    ``supersede`` is false: then the report says ``"deferred to nightly"``. ``batch`` is the
    number of notes embedded together (at least 1; default: the store's ``embed_batch``).

    A text or Markdown document gives every note it makes its subjects: ``title`` (by default
    its level-1 heading before any paragraph, else the file's name; "" for none), then the
    Markdown headings the note sits under. A JSONL line keeps the subjects it gives.

    ``source`` is what the report and its errors call the file when it is no file of the
    user's (``"stdin"``, spooled to ``path`` by the CLI); such a document has no file name
    to be titled by. A JSON array's notes are numbered by their place in it ("item 3").

    ``flush_at_end=False`` leaves the engine's flush to the caller (``amem.importdir`` imports many
    files and flushes once: a flush costs ~0.2 s, a small file's import a few ms).

    ``gained`` holds the ids of notes already counted in ``tags_added`` (this file's are added
    to it): a folder's import passes one set to all its files, so a note two files retag is
    counted once, as one file counts a note two of its lines retag. ``titled`` does the same
    for ``title_added``: (agent, id) of notes already counted as gaining a file-name title,
    and ``kept_out`` for ``tags_kept_removed``.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="path")
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(map(repr, FORMATS))}",
                              field="format")
    if title is not None and fmt not in DOCUMENTS:
        raise ValidationError("a title is for a text, Markdown or HTML document; a JSONL line (a "
                              "JSON array's item, a CSV row, an Evernote note) gives its own "
                              "subjects", field="title")
    # what the report calls the file and its notes: "notes.json item 3", "stdin:7"
    shown = Path(source) if source is not None else path
    per = unit(fmt)
    if title:
        check_text(title, field="title", max_chars=MAX_ITEM_CHARS)
    check_batch(batch, f"the store's embed_batch ({store.config.embed_batch})")
    size = batch or store.config.embed_batch
    max_chars = store.config.max_text_chars
    # with skip_invalid the writer's own id check skips a clashing line, so none is looked up
    check = check_whole(store, path, fmt, title, enrich, agent_id, max_chars=max_chars,
                        ids=None if skip_invalid else IdClashes(store.index, per),
                        source=source)
    total = check.last_line
    if check.skipped and not skip_invalid:
        raise ImportRejected(shown, check, per)
    report = ImportReport(path=str(shown))
    # counted again if the disk fills: the batches written ahead of the one refused are
    # stored but not yet in the report, so only the engine can say how many notes landed
    before = store.count(agent_id=agent_id)
    if supersede and enrich:  # the --no-enrich fast path skips the check, as add does
        report.supersede = store.superseder.judge.label
    started = time.perf_counter()
    pending: list[dict[str, Any]] = []
    notes: list[Note] = []  # pending's notes as drafted (their hashes and subjects)
    lines: list[int] = []
    # a document titled by its file's name alone: renamed, it is still the notes it was
    named = (FileTitle(store.index, file_title(path), titled)
             if fmt in DOCUMENTS and title is None and source is None and file_title(path)
             else None)
    last_line = 0
    warned = 0  # line warnings said, kept or not
    gained = set() if gained is None else gained  # notes that gained tags (each counted once)
    kept_out = set() if kept_out is None else kept_out  # notes whose removed tags stayed out

    def warn(number: int, message: str) -> None:
        # said once, in the writing pass; the caller shows the report (the CLI on stderr), so
        # a log warning here would print each one twice
        nonlocal warned
        warned += 1
        if warned <= MAX_WARNINGS:  # a huge import's warnings must not fill memory
            report.warnings.append(f"{place(shown, per, number)}: {message}")
        log.debug("import: %s: %s", place(shown, per, number), message)

    def flush() -> None:
        if not pending:
            return
        items = named.untitled(pending, notes) if named is not None else pending
        try:
            done = store.bulk.add_batch(items, enrich=enrich, agent_id=agent_id, batch=size,
                                        supersede=supersede)
        except DiskFullError as exc:
            # Said with what is safe: the batches before this one are stored, and a re-run
            # stores only the rest (an imported line keeps its id:
            # ``amem.importcheck.with_stable_id``).
            raise DiskFullError(
                f"{exc} The import stopped at {per} {lines[0] if lines else last_line} of "
                f"{shown}: the {per}s before it are stored, and some after it may be too "
                f"({_stored_now(store, agent_id, before)}); once there is room, run the same "
                "import again and it stores only the rest.",
                path=exc.path, needed=exc.needed, free=exc.free) from exc
        report.superseded += len(done.superseded)
        report.supersede_deferred += done.deferred
        report.expired_replaced += len(done.expired_replaced)
        for number, result, given, written, note in zip(lines, done.results, pending, items,
                                                         notes):
            if result.status == "rejected":
                skip_line(report, shown, number, "; ".join(result.warnings), unit=per)
                continue
            setattr(report, result.status, getattr(report, result.status) + 1)
            if named is not None and written is not given and result.status == "deduplicated":
                named.went_into(note.agent_id, result.id)
            if result.tags_added and result.id not in gained:
                gained.add(result.id)
                report.tags_added += 1
                if len(report.tags_added_to) < MAX_WARNINGS:
                    report.tags_added_to.append(result.id)
            if result.tags_kept_removed and result.id not in kept_out:
                kept_out.add(result.id)
                report.tags_kept_removed += 1
                if len(report.tags_kept_removed_from) < MAX_WARNINGS:
                    report.tags_kept_removed_from.append(result.id)
            for message in result.warnings:  # what of the line was not stored as given
                if not message.startswith(_COUNTED):
                    warn(number, message)
        pending.clear()
        notes.clear()
        lines.clear()
        if progress is not None:
            progress(last_line, total)

    # Notes changed by folds and evolutions get their new vector every so many batches and
    # at the end, not after every batch (see Writer.deferred_reembed).
    def found(key: str) -> None:  # a JSON object's list of notes was read from this key
        report.json_key = key

    with store.writer.deferred_reembed() as problems:
        for number, item in read_items(path, fmt, title, max_chars=max_chars, warn=warn,
                                       source=source, found=found):
            report.read += 1
            last_line = number
            drafted = draft_line(store, item, enrich, agent_id)
            if isinstance(drafted, str):
                skip_line(report, shown, number, drafted, unit=per)
                continue
            pending.append(drafted[0])
            notes.append(drafted[1])
            lines.append(number)
            if len(pending) >= size * AHEAD_CHUNKS:  # chunks of ``size`` inside, embedded ahead
                flush()
        flush()
        if named is not None:  # the whole document seen: was it stored before, renamed?
            named.add()
            report.title_added = named.added
    report.warnings.extend(problems)
    if warned > MAX_WARNINGS:
        report.warnings.append(f"... and {warned - MAX_WARNINGS} more line warnings")
    if flush_at_end:
        store.flush()
    report.seconds = time.perf_counter() - started
    return report


# the first pass's functions by the names this module gave them before they moved to
# amem.importcheck
_check_whole, _IdClashes, _drafted = check_whole, IdClashes, draft_line
_with_stable_id = with_stable_id

# heading_text lives in amem.docsplit, the report and its error in amem.importreport; named
# here too, where callers first found them
__all__ = ["FORMATS", "ImportRejected", "ImportReport", "MAX_ERRORS", "MAX_WARNINGS", "Progress", "Warn",
           "check_batch", "detect_format", "heading_text", "import_file", "place",
           "read_items", "skip_line", "unit"]
