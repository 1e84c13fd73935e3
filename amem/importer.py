"""Bulk import: JSONL, plain text or Markdown in, checked whole first, written in batches.

Both imports (a JSONL/text file here, and an ``amem export`` file in ``amem.export``) check the
whole file first in one streaming pass: a file with a bad line writes nothing and
``ImportRejected`` names every bad line (file:line: reason); ``skip_invalid`` imports the good
lines and reports the others. Then the file is read again and written in bounded batches, so
memory stays flat however long the file is.

Import is resumable and idempotent: a note without an id gets one derived from its agent and
content hash, so a run killed at any point and started again ends with exactly the unique
notes (already-stored ones dedup by hash, a half-written batch is simply written again). An
export keeps its ids, so a rerun writes the same points again.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TextIO

from .errors import ValidationError
from .kernel import safejson
from .kernel.errors import DiskFullError, InvalidArgumentError
from .notes import MAX_ITEM_CHARS, check_text, content_hash
from .write.bulk import AHEAD_CHUNKS

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: called after each batch with (lines done, lines total or None)
Progress = Callable[[int, "int | None"], None]
#: error messages an import keeps (every bad line is still counted and logged)
MAX_ERRORS = 100


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
    #: the number of the last line read (the progress total of the writing pass)
    last_line: int = 0
    #: older notes the imported notes superseded (``amem.write.bulk``)
    superseded: int = 0
    #: who judged supersession ("offline", an LLM label), or "deferred to nightly"
    supersede: str = "deferred to nightly"
    #: notes stating a change left to the nightly sweep (an LLM judges a bounded number)
    supersede_deferred: int = 0
    #: ids of expired, not yet swept notes an imported note of the same id replaced
    expired_replaced: int = 0

    @property
    def rate(self) -> float:
        return self.read / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "read": self.read, "created": self.created,
                "deduplicated": self.deduplicated, "folded": self.folded,
                "pending_merge": self.pending_merge, "skipped": self.skipped,
                "errors": self.errors, "warnings": self.warnings, "seconds": round(self.seconds, 3),
                "notes_per_second": round(self.rate, 1), "superseded": self.superseded,
                "supersede": self.supersede, "supersede_deferred": self.supersede_deferred,
                "expired_replaced": self.expired_replaced}


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".md", ".markdown", ".txt", ".text"):
        return "text"
    raise ValidationError(f"cannot tell the format of {path.name}: use .jsonl, .md or .txt, "
                          f"or pass format='jsonl'|'text'", field="format")


def read_items(path: Path, fmt: str, title: str | None = None
               ) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, item) pairs; an item that cannot be parsed comes as an error string.

    A text or Markdown document gives each of its notes its subjects (see ``_paragraphs``):
    ``title``, else its Markdown title, else the file's name ("" gives none), then the
    headings above the note.
    """
    with path.open("r", encoding="utf-8", errors="strict") as handle:
        if fmt == "jsonl":
            yield from _jsonl(handle)
        else:
            name = path.stem[:MAX_ITEM_CHARS].strip()
            yield from _paragraphs(handle, name if title is None else title,
                                   derive=title is None)


def _jsonl(handle: TextIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:  # bad JSON, deep nesting, lone surrogates: one rule (amem.kernel.safejson);
            # without its line break: a line cut short would otherwise be reported at the
            # position after the break (column 1) instead of where the JSON stops
            item = safejson.loads(line.rstrip("\r\n"), root="the line")
        except InvalidArgumentError as exc:
            yield number, str(exc)
            continue
        if not isinstance(item, dict):
            yield number, "each line must be a JSON object with a 'text' field"
            continue
        yield number, item


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")


def heading_text(line: str) -> str:
    """A Markdown heading's words: the opening and closing ``#`` runs taken off, at most
    ``MAX_ITEM_CHARS`` characters (a subject's limit)."""
    words = line.strip().lstrip("#").strip()
    words = re.sub(r"\s+#+$", "", words) if words.strip("#") else ""
    return words[:MAX_ITEM_CHARS].strip()


def _paragraphs(handle: TextIO, title: str, *, derive: bool
                ) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """One note per paragraph (blank-line separated); a Markdown heading starts a new one.

    A heading is no note of its own: it opens the paragraph after it, which it titles, even
    across a blank line. A heading with no paragraph after it is dropped. Every note gets the
    document's subjects: its title, then the headings it sits under (outermost first), so a
    paragraph that does not name what it is about is still found by a question that does
    (docs/retrieval-next.md, "Subjects reach ranking"). With ``derive``, a level-1 heading
    before the first paragraph is the document's title instead of ``title`` (the file name).
    """
    block: list[str] = []
    heading: str | None = None
    path: list[tuple[int, str]] = []  # (level, words) of the headings above the paragraph
    start = 0
    subjects: list[str] = []
    seen_text = False

    def item() -> dict[str, Any]:
        text = "".join(block).strip()
        return {"text": text, "subjects": subjects} if subjects else {"text": text}

    for number, line in enumerate(handle, start=1):
        mark = _HEADING.match(line)
        if not line.strip() or (mark and block):
            if block:
                yield start, item()
                block = []
            if not line.strip():
                continue
        if mark:
            heading = line.strip()
            level, words = len(mark.group(1)), heading_text(line)
            if derive and level == 1 and not seen_text and words:
                title, derive = words, False
            path = [(lv, w) for lv, w in path if lv < level] + ([(level, words)] if words else [])
            continue
        if not block:
            start, seen_text = number, True
            subjects = _distinct([title, *(w for _, w in path)])
            if heading:
                block.append(heading + "\n")  # the paragraph it titles
                heading = None
        block.append(line)
    if block:
        yield start, item()


def _distinct(names: list[str]) -> list[str]:
    """Non-empty names in order, each once whatever its case ("guide" and "Guide" are one)."""
    kept: dict[str, str] = {}
    for name in names:
        if name:
            kept.setdefault(name.casefold(), name)
    return list(kept.values())


def import_file(store: "MemoryStore", path: str | Path, *, fmt: str | None = None,
                enrich: bool = True, agent_id: str | None = None, batch: int | None = None,
                progress: Progress | None = None, skip_invalid: bool = False,
                supersede: bool = True, title: str | None = None) -> ImportReport:
    """Import one file into ``store``; see the module docstring for the guarantees.

    The whole file is checked first (one streaming pass): with a bad line nothing is written
    and ``ImportRejected`` lists the bad lines, unless ``skip_invalid`` imports the rest.
    Imported notes are judged for supersession as adds are (``amem.write.bulk``) unless
    ``supersede`` is false: then the report says ``"deferred to nightly"``.

    A text or Markdown document gives every note it makes its subjects: ``title`` (by default
    its level-1 heading before any paragraph, else the file's name; "" for none), then the
    Markdown headings the note sits under. A JSONL line keeps the subjects it gives.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"no such file: {path}", field="path")
    fmt = fmt or detect_format(path)
    if fmt not in ("jsonl", "text"):
        raise ValidationError("format must be 'jsonl' or 'text'", field="format")
    if title is not None and fmt == "jsonl":
        raise ValidationError("a title is for a text or Markdown document; a JSONL line gives "
                              "its own subjects", field="title")
    if title:
        check_text(title, field="title", max_chars=MAX_ITEM_CHARS)
    size = batch or store.config.embed_batch
    check = ImportReport(path=str(path))
    try:
        for number, item in read_items(path, fmt, title):
            check.read += 1
            check.last_line = number
            _checked(store, item, enrich, agent_id, check, path, number)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path} is not UTF-8 text (byte {exc.start} of a line after "
                              f"line {check.last_line}); nothing was imported",
                              field="file") from None
    total = check.last_line
    if check.skipped and not skip_invalid:
        raise ImportRejected(path, check)
    report = ImportReport(path=str(path))
    if supersede and enrich:  # the --no-enrich fast path skips the check, as add does
        report.supersede = store.superseder.judge.label
    started = time.perf_counter()
    pending: list[dict[str, Any]] = []
    lines: list[int] = []
    last_line = 0

    def flush() -> None:
        if not pending:
            return
        try:
            done = store.bulk.add_batch(pending, enrich=enrich, agent_id=agent_id, batch=size,
                                        supersede=supersede)
        except DiskFullError as exc:
            # Said with what is safe: the batches before this one are stored, and a re-run
            # stores only the rest (an imported line keeps its id: ``_with_stable_id``).
            raise DiskFullError(
                f"{exc} The import stopped at line {lines[0] if lines else last_line} of {path}: "
                f"the lines before it are stored ({report.created} notes created), perhaps a few "
                "after it too; once there is "
                "room, run the same import again and it stores only the rest.",
                path=exc.path, needed=exc.needed, free=exc.free) from exc
        report.superseded += len(done.superseded)
        report.supersede_deferred += done.deferred
        report.expired_replaced += len(done.expired_replaced)
        for number, result in zip(lines, done.results):
            if result.status == "rejected":
                skip_line(report, path, number, "; ".join(result.warnings))
            else:
                setattr(report, result.status, getattr(report, result.status) + 1)
        pending.clear()
        lines.clear()
        if progress is not None:
            progress(last_line, total)

    # Notes changed by folds and evolutions get their new vector every so many batches and
    # at the end, not after every batch (see Writer.deferred_reembed).
    with store.writer.deferred_reembed() as problems:
        for number, item in read_items(path, fmt, title):
            report.read += 1
            last_line = number
            checked = _checked(store, item, enrich, agent_id, report, path, number)
            if checked is None:
                continue
            pending.append(checked)
            lines.append(number)
            if len(pending) >= size * AHEAD_CHUNKS:  # chunks of ``size`` inside, embedded ahead
                flush()
        flush()
    report.warnings.extend(problems)
    store.flush()
    report.seconds = time.perf_counter() - started
    return report


def _checked(store: "MemoryStore", item: dict[str, Any] | str, enrich: bool,
             agent_id: str | None, report: ImportReport, path: Path,
             number: int) -> dict[str, Any] | None:
    """The item ready to write, or None (the line is recorded as skipped in ``report``)."""
    if isinstance(item, str):
        skip_line(report, path, number, item)
        return None
    try:
        item = _with_stable_id(item)
        store.writer.draft(item, enrich=enrich, agent_id=agent_id)  # validate only
    except ValidationError as exc:
        skip_line(report, path, number, str(exc))
        return None
    return item


def _with_stable_id(item: dict[str, Any]) -> dict[str, Any]:
    """Give an id-less item an id derived from its content, so re-runs write the same point."""
    if "id" in item or not isinstance(item.get("text"), str):
        return item
    # Point ids already include the agent, so the content hash alone is a stable note id.
    return {**item, "id": f"imp-{content_hash(item['text'])[:24]}"}


def skip_line(report: ImportReport, path: Path, number: int, why: str) -> None:
    report.skipped += 1
    message = f"{path}:{number}: {why}"
    if len(report.errors) < MAX_ERRORS:  # a bad file of a million lines must not fill memory
        report.errors.append(message)
    # The report (or ImportRejected) carries the line to the caller, who shows it once; a
    # warning per line here printed each bad line twice in the CLI (two passes, two streams).
    log.debug("import: skipped %s", message)


class ImportRejected(ValidationError):
    """The file has bad lines; nothing was written. ``errors`` holds the first ``MAX_ERRORS``."""

    def __init__(self, path: Path, check: ImportReport) -> None:
        shown = "\n  ".join(check.errors[:20])
        more = check.skipped - min(20, len(check.errors))
        super().__init__(
            f"{path}: {check.skipped} of {check.read} lines are invalid; nothing was imported "
            f"(fix them, or pass --skip-invalid to import the rest):\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""), field="file")
        self.errors = list(check.errors)
        self.invalid = check.skipped


__all__ = ["ImportRejected", "ImportReport", "MAX_ERRORS", "Progress", "detect_format",
           "import_file", "read_items", "skip_line"]
