"""What an import reads: a file's format (by its extension) and its items, one a line, an
array's item or a document's paragraph, each with the number the report names it by.

``read_items`` is the one reader both of ``amem.importer``'s passes use (the whole-file check,
then the writing pass), so both see the same items; a line or item that cannot be parsed comes
as why, a string, for the report. Besides JSON and documents, it reads a CSV table
(``amem.importcsv``), an HTML page (``amem.importhtml``) and an Evernote export
(``amem.importenex``); a zip is named with what to do instead.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from .docmeta import DocMeta
from .docsplit import Warn, split_document, split_lines
from .errors import ValidationError
from .importarray import array_notes
from .importcsv import csv_notes
from .importenex import enex_notes
from .importhtml import HtmlLines, chunks_of
from .kernel import safejson
from .kernel.encoding import encoding_of
from .kernel.errors import InvalidArgumentError
from .notes import MAX_ITEM_CHARS

#: what a file can hold: JSON lines, a JSON array of notes (``amem.importarray``), a document
FORMATS = ("jsonl", "json", "text", "csv", "html", "enex")
#: the formats that are one document, titled by ``--title``, else their own title or file name
DOCUMENTS = ("text", "html")


#: files users bring from other apps that an import does not read, and what to do instead
NOT_READ = {
    ".zip": "a zip archive (a Notion or Obsidian export?): unzip it and import its folder "
            "(`amem import FOLDER`); a ChatGPT or Claude data export's zip goes to "
            "`amem lcm ingest`",
}


def detect_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in NOT_READ:
        raise ValidationError(f"{path.name} is {NOT_READ[suffix]}", field="format")
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix in (".html", ".htm"):
        return "html"
    if suffix == ".enex":
        return "enex"
    if suffix in (".md", ".markdown", ".txt", ".text"):
        return "text"
    raise ValidationError(f"cannot tell the format of {path.name}: use .jsonl, .json, .csv, .md, "
                          f".txt, .html or .enex, or pass format= one of {', '.join(FORMATS)}",
                          field="format")


def unit(fmt: str) -> str:
    """What a format's notes are numbered by in the report: a JSON array's by their place in
    it (a one-line array has one line), a table's by its row (a cell may hold line breaks),
    the others by line."""
    return {"json": "item", "csv": "row"}.get(fmt, "line")


def read_items(path: Path, fmt: str, title: str | None = None, *, max_chars: int | None = None,
               warn: Warn | None = None, source: str | None = None,
               found: Callable[[str], None] | None = None
               ) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line number, item) pairs (a JSON array's: item number); an item that cannot be parsed
    comes as an error string.

    A text or Markdown document gives each of its notes its subjects (``amem.docsplit``):
    ``title``, else its Markdown title, else the file's name ("" gives none), then the
    headings above the note. With ``max_chars`` (a note's limit), a paragraph that a fenced
    code block makes longer is cut around it, and ``warn`` is told of it. ``source`` names
    what ``path`` holds when it is no file of the user's (stdin, spooled): a stream has no
    file name to title a document by. ``found`` is told the key a JSON object's list of
    notes was read from (``amem.importarray``).
    """
    # utf-8-sig: a byte-order mark (Notepad writes one) is no part of the first line, so a
    # "# Title" there stays a heading and a JSONL line stays JSON; a UTF-16 or UTF-32 mark
    # (Notepad's "Unicode", PowerShell's `>`) says the file is in that encoding
    shown = str(path) if source is None else source
    if fmt == "enex":  # XML says its own encoding: the parser reads the bytes
        with path.open("rb") as raw:
            yield from enex_notes(raw, shown, max_chars=max_chars, warn=warn)
        return
    with path.open("rb") as raw:
        codec = encoding_of(raw.read(4))
    # a table's reader splits its own lines: a quoted cell's line break is no row's end
    with path.open("r", encoding=codec, errors="strict",
                   newline="" if fmt == "csv" else None) as handle:
        if fmt == "csv":
            yield from csv_notes(handle, str(path) if source is None else source,
                                 max_chars=max_chars)
        elif fmt == "jsonl":
            yield from _jsonl(handle)
        elif fmt == "json":
            yield from array_notes(handle, str(path) if source is None else source,
                                   piped=source is not None, found=found)
        else:
            name = "" if source is not None else file_title(path)
            if fmt == "html":
                yield from _page(handle, name if title is None else title,
                                 derive=title is None, max_chars=max_chars, warn=warn)
                return
            yield from split_document(handle, name if title is None else title,
                                      derive=title is None, max_chars=max_chars, warn=warn)


def _page(handle: TextIO, title: str, *, derive: bool, max_chars: int | None,
          warn: Warn | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """An HTML page's notes: its ``<title>`` is its title (read with the head, before its
    first line of text), else a level-1 heading before any paragraph, else ``title``."""
    page = HtmlLines(chunks_of(handle))
    lines = iter(page)
    first = next(lines, None)
    if first is None:
        return
    front = DocMeta(title=page.title[:MAX_ITEM_CHARS].strip())
    yield from split_lines(itertools.chain([first], lines), title, derive=derive, front=front,
                           max_chars=max_chars, warn=warn, tagged=False, block_lines=True)


def file_title(path: Path) -> str:
    """The title a document without one gets: its file's name, as text, a subject's length."""
    return readable_name(path.stem)[:MAX_ITEM_CHARS].strip()


def readable_name(name: str) -> str:
    """A file name as text: the bytes of a name that is not UTF-8 (Python keeps them as lone
    surrogates, ``os.fsdecode``) each read as U+FFFD, as a file manager shows them; a lone
    surrogate in a subject or an id's key is no text, and hashing it crashed the import."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _jsonl(handle: TextIO) -> Iterator[tuple[int, dict[str, Any] | str]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:  # bad JSON, deep nesting, lone surrogates: one rule (amem.kernel.safejson);
            # without its line break: a line cut short would otherwise be reported at the
            # position after the break (column 1) instead of where the JSON stops
            item = safejson.loads(line.rstrip("\r\n"), root="the line")
        except InvalidArgumentError as exc:
            yield number, str(exc) + _why_not_json(line)
            continue
        if not isinstance(item, dict):
            yield number, ("each line must be a JSON object with a 'text' field" + (
                f"; this line is a JSON array of {len(item)} items (a file that is one array "
                "of notes is read as one with --format json, or named .json)"
                if isinstance(item, list) else ""))
            continue
        yield number, item


def _why_not_json(line: str) -> str:
    """What a line that is not JSON most likely is, when it is a common slip: a trailing comma
    (a JSON array's lines pasted as JSON lines) or a comment ("Extra data at column 34" and
    "Expecting value at column 1" name neither)."""
    text = line.strip()
    if text.startswith(("//", "#")):
        return " (a comment line: JSON lines have no comments)"
    if text.endswith(","):
        try:
            json.loads(text[:-1])
        except ValueError:
            return ""
        return " (a comma after the object: JSON lines end without one)"
    if not line.endswith("\n"):  # only a file's last line has no line end
        return (" (the file's last line, with no line end: cut short when its writer stopped? "
                "--skip-invalid imports the lines before it)")
    return ""


__all__ = ["DOCUMENTS", "FORMATS", "NOT_READ", "detect_format", "file_title", "read_items", "readable_name",
           "unit"]
