"""An Evernote export (ENEX) read note by note: each ``<note>`` a document whose paragraphs
are notes (``amem.docsplit``), titled by its ``<title>``, dated by its ``<created>``, tagged
by its ``<tag>`` elements.

An ENEX file is XML: ``<en-export>`` holding ``<note>`` elements, each with its text as ENML
(XHTML, in a CDATA section of ``<content>``, read by ``amem.importhtml``) and its attachments
as base64 ``<resource>`` data, which is read past, never held: an export of photos is
gigabytes. The XML is parsed a chunk at a time (``xml.parsers.expat``); one note's text is
held at a time.

XML is a way into its reader: an entity declared to expand to ten copies of another, nine
deep, is a gigabyte from a kilobyte ("billion laughs"), and an external entity reads a local
file or a URL into the document. Evernote never declares an entity, so a file that declares
any (``<!ENTITY``) is refused before a note is read; no external entity or DTD is fetched.
"""

from __future__ import annotations

import re
from typing import Any, BinaryIO, Iterator
from xml.parsers import expat

from .docmeta import DocMeta, tags_of
from .docsplit import Warn, split_lines
from .errors import ValidationError
from .importhtml import HtmlLines
from .notes import MAX_ITEM_CHARS

#: bytes parsed at a time
CHUNK = 1 << 16
#: Evernote's time form: 20240301T120000Z
_ENEX_TIME = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")
#: elements of a note whose text is read
_FIELDS = frozenset({"title", "created", "tag", "content", "source-url"})


class _Note:
    def __init__(self, line: int) -> None:
        self.line = line
        self.content_line = line
        self.title = ""
        self.created = ""
        self.tags: list[str] = []
        self.content = ""
        self.source = ""


class _Export:
    """The expat handlers: notes completed so far, collected for the reader to take."""

    def __init__(self, parser: Any, name: str) -> None:
        self._parser = parser
        self._name = name
        self.done: list[_Note] = []
        self._note: _Note | None = None
        self._field: str | None = None
        self._text: list[str] = []
        self.root_seen = False

    def entity(self, name: str, *_: Any) -> None:
        raise ValidationError(
            f"{self._name} declares an XML entity ({name!r}), which an Evernote export never "
            "does: refused, nothing was imported (entity expansion and external entities are "
            "how an XML file attacks its reader)", field="format")

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if not self.root_seen:
            self.root_seen = True
            if tag != "en-export":
                raise ValidationError(f"{self._name} is XML but no Evernote export: its root "
                                      f"is <{tag}>, not <en-export>", field="format")
        if tag == "note":
            self._note = _Note(self._parser.CurrentLineNumber)
        elif self._note is not None and tag in _FIELDS:
            self._field, self._text = tag, []
            if tag == "content":
                self._note.content_line = self._parser.CurrentLineNumber

    def data(self, text: str) -> None:
        if self._field is not None:
            self._text.append(text)

    def end(self, tag: str) -> None:
        note = self._note
        if note is None:
            return
        if tag == "note":
            self.done.append(note)
            self._note = None
        elif tag == self._field:
            text = "".join(self._text)
            if tag == "title":
                note.title = " ".join(text.split())[:MAX_ITEM_CHARS].strip()
            elif tag == "created":
                note.created = _iso(text.strip())
            elif tag == "tag":
                note.tags.append(text)
            elif tag == "source-url":
                note.source = text.strip()
            else:
                note.content = text
            self._field, self._text = None, []


def _iso(stamp: str) -> str:
    """Evernote's ``20240301T120000Z`` as ISO 8601 (another form is left for the note's own
    check to name)."""
    found = _ENEX_TIME.match(stamp)
    if found is None:
        return stamp
    y, mo, d, h, mi, s = found.groups()
    return f"{y}-{mo}-{d}T{h}:{mi}:{s}Z"


def enex_notes(raw: BinaryIO, name: str, *, max_chars: int | None = None,
               warn: Warn | None = None) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line, item) pairs of every note's paragraphs, each numbered by its line in the file;
    a file that stops being XML part way is one bad place (the notes before it are read).

    Raises:
        ValidationError: the file declares an XML entity, or its root is no ``<en-export>``.
    """
    parser = expat.ParserCreate()
    export = _Export(parser, name)
    parser.EntityDeclHandler = export.entity
    # no external DTD or parameter entity is read: the export's DOCTYPE names one, by URL
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = export.start
    parser.EndElementHandler = export.end
    parser.CharacterDataHandler = export.data
    parser.buffer_text = True
    while True:
        chunk = raw.read(CHUNK)
        try:
            parser.Parse(chunk, not chunk)
        except expat.ExpatError as exc:
            yield from _items(export, max_chars, warn)
            yield exc.lineno, (f"not well-formed XML: {expat.ErrorString(exc.code)} (at line "
                               f"{exc.lineno}, column {exc.offset + 1}); nothing after it can "
                               "be read")
            return
        yield from _items(export, max_chars, warn)
        if not chunk:
            break
    if not export.root_seen:
        raise ValidationError(f"{name} is empty: no Evernote notes", field="format")


def _items(export: _Export, max_chars: int | None,
           warn: Warn | None) -> Iterator[tuple[int, dict[str, Any] | str]]:
    notes, export.done = export.done, []
    for note in notes:
        fields: dict[str, Any] = {}
        tags = tags_of(note.tags)
        if tags:
            fields["tags"] = tags
        if note.created:
            fields["event_time"] = note.created
        if note.source:
            fields["metadata"] = {"source_url": note.source[:256]}
        lines = HtmlLines([note.content], first_line=note.content_line)
        said = False
        for number, item in split_lines(lines, note.title, derive=not note.title,
                                        front=DocMeta(), max_chars=max_chars, warn=warn,
                                        tagged=False, block_lines=True):
            said = True
            yield number, {**item, **fields}
        if not said and note.title:  # a note of a title alone (its attachment left out)
            yield note.line, {"text": note.title, **fields}


__all__ = ["enex_notes"]
