"""A CSV table of notes (a spreadsheet's export, a notes app's table) read row by row for
``amem.importer``, each row a note, as a JSON line is read.

The header row names the columns: the note's text is the first of ``TEXT_COLUMNS`` present
(``text``, ``content``, ``note``, ...); ``tags``, ``keywords``, ``topics`` and ``subjects``
are lists in a cell (split at ``,``, ``;`` or ``|``), a ``title`` is the note's first subject,
``created`` (or ``event_time``, ``date``) is when it happened, and ``id``, ``timestamp``,
``category``, ``context``, ``note_type``, ``agent_id``, ``expires_at`` are the fields of the
same name. Every other column is kept, as metadata under the column's name: a cell the user
wrote is not dropped. An empty cell is no field.

A row is named as a spreadsheet numbers it (the header is row 1). The separator is the
header's most common of ``,``, ``;`` (Excel in much of Europe) and a tab. The stdlib ``csv``
module reads the rows, so a quoted cell may hold separators and line breaks.

A cell as long as a note may be is read whole, though the csv module refuses a field past its
limit (128 KiB by default), and that limit is one for the whole process: a server importing a
table must not change it for every other reader. So it is raised only while one row is read
and put back before the row is yielded (:func:`_row`), under a lock, so two imports in two
threads never restore each other's raised value. Another thread's csv read in the instant a
long row is parsed can see the raised limit; a suspended import leaves no trace.
"""

from __future__ import annotations

import csv
import itertools
import re
import threading
from typing import Any, Iterator, TextIO

from .docmeta import tags_of
from .errors import ValidationError
from .notefields import MAX_META_KEYS, META_KEY_RE

#: the columns a row's text may be in, the first present read
TEXT_COLUMNS = ("text", "content", "note", "body", "memory")
#: columns holding a list in one cell
_LISTS = ("tags", "keywords", "topics", "subjects")
#: columns naming when the note's fact happened
_WHEN = ("event_time", "created", "created_at", "date")
#: columns read as the note field of the same name
_FIELDS = ("id", "timestamp", "category", "context", "note_type", "agent_id", "expires_at")
_SPLIT = re.compile(r"[,;|]")
#: held while the process's csv field limit is raised (the module docstring)
_LIMIT_LOCK = threading.Lock()


def csv_notes(handle: TextIO, name: str, *,
              max_chars: int | None = None) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(row number, item) pairs of the table ``handle`` holds (opened with ``newline=""``);
    a bad row comes as why, a string.

    Raises:
        ValidationError: no header row, or none of its columns holds the text (the columns
            named), or more other columns than a note's metadata holds; before anything is
            yielded.
    """
    first = handle.readline()
    if not first.strip():
        raise ValidationError(f"{name} has no header row: a CSV import reads a table whose "
                              f"first row names its columns (one of them {TEXT_COLUMNS[0]!r})",
                              field="format")
    counts = {sep: first.count(sep) for sep in (",", ";", "\t")}
    sep = max(counts, key=lambda s: counts[s])
    # a cell as long as a note may be is read whole; a longer one is refused by the note's check
    limit = None if max_chars is None else max_chars + 1
    rows = csv.reader(itertools.chain([first], handle), delimiter=sep)
    header = [cell.strip() for cell in _row(rows, limit) or []]
    columns = _columns(header, name)
    number = 1
    try:
        while (row := _row(rows, limit)) is not None:
            number += 1
            if not any(cell.strip() for cell in row):
                continue  # a blank row, as a blank JSON line
            yield number, _item(row, header, columns)
    except csv.Error as exc:
        yield number + 1, (f"not readable as CSV: {exc} (at line {rows.line_num}); nothing "
                           "after it can be read")


def _row(rows: Iterator[list[str]], limit: int | None) -> list[str] | None:
    """The next row (``None`` after the last), read with the field limit at least ``limit``
    and the process's limit as it was once it is read (the module docstring)."""
    with _LIMIT_LOCK:
        before = csv.field_size_limit()
        raised = False
        if limit is not None and before < limit:
            csv.field_size_limit(limit)
            raised = True
        try:
            return next(rows, None)
        finally:
            if raised:
                csv.field_size_limit(before)


def _columns(header: list[str], name: str) -> dict[int, str]:
    """Column index -> the field it fills ("meta:KEY" for one kept as metadata)."""
    lower = [h.lower() for h in header]
    text = next((c for c in TEXT_COLUMNS if c in lower), None)
    if text is None:
        raise ValidationError(
            f"{name} has no text column: its header names {', '.join(repr(h) for h in header)}; "
            f"name the column holding each note's text {TEXT_COLUMNS[0]!r} (or "
            f"{', '.join(repr(c) for c in TEXT_COLUMNS[1:])})", field="format")
    out: dict[int, str] = {}
    taken: set[str] = set()
    for index, column in enumerate(lower):
        if column in taken or not column:
            field = f"meta:{_meta_key(header[index], index)}" if column else ""
        elif column == text:
            field = "text"
        elif column == "title":
            field = "title"
        elif column in _LISTS or column in _FIELDS:
            field = column
        elif column in _WHEN and "event_time" not in taken:
            field = "event_time"
        else:
            field = f"meta:{_meta_key(header[index], index)}"
        if field:
            out[index] = field
            taken.update({column, field})
    kept = [f for f in out.values() if f.startswith("meta:")]
    if len(kept) > MAX_META_KEYS:
        raise ValidationError(
            f"{name} has {len(kept)} columns besides a note's fields, each kept as metadata; "
            f"a note holds at most {MAX_META_KEYS}: remove the columns that are not about the "
            "notes", field="format")
    return out


def _meta_key(column: str, index: int) -> str:
    """A column's name as a metadata key: ``Source URL`` is ``Source_URL``."""
    key = re.sub(r"[^A-Za-z0-9_.:-]+", "_", column.strip()).strip("_")[:64]
    if not key or not META_KEY_RE.match(key):
        key = f"column_{index + 1}" if not key else f"_{key}"[:64]
    return key


def _item(row: list[str], header: list[str], columns: dict[int, str]) -> dict[str, Any] | str:
    """A row as a note's fields, or why it is none."""
    if len(row) > len(header):
        return (f"{len(row)} cells, and the header names {len(header)} columns (a separator "
                "inside a cell that is not quoted?)")
    item: dict[str, Any] = {}
    meta: dict[str, str] = {}
    title = ""
    for index, cell in enumerate(row):
        field = columns.get(index)
        value = cell.strip()
        if field is None or not value:
            continue
        if field.startswith("meta:"):
            meta[field[5:]] = value
        elif field == "title":
            title = value
        elif field == "tags":
            item["tags"] = tags_of(_SPLIT.split(value))
        elif field in _LISTS:
            item[field] = [part.strip() for part in _SPLIT.split(value) if part.strip()]
        else:
            item[field] = value
    if not isinstance(item.get("text"), str) or not item["text"].strip():
        return "the text cell is empty"
    if title:
        item["subjects"] = [title, *(s for s in item.get("subjects", []) if s != title)]
    if meta:
        item["metadata"] = meta
    return item


__all__ = ["TEXT_COLUMNS", "csv_notes"]
