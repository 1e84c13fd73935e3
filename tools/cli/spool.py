"""``amem import -``: stdin kept in a private file for the import's two passes.

An import reads its file twice (checked whole, then written: ``amem.importer``), and a pipe
can be read once; so the piped bytes are copied to a file only the user can read (0600, in
the temporary folder: ``TMPDIR``), imported from there, and the file is removed however the
import ends (an error, Ctrl-C). Memory stays flat: the bytes are copied a chunk at a time.

A pipe has no name to tell its format by: a JSON array (``[``), JSON lines (``{``), an HTML
page (``<!DOCTYPE html`` or ``<html``) and an Evernote export (XML naming ``<en-export>``)
are told apart by how they open; anything else needs ``--format`` (a document read as notes
by mistake is worse than a question).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from amem.importarray import LIST_KEYS

#: bytes copied at a time
CHUNK = 1 << 20
#: how a stream's first character (after white space and a UTF-8 byte-order mark) says its format
_OPENERS = {ord("["): "json", ord("{"): "jsonl"}
#: an object opening with a list under one of the keys an import reads a list of notes from
_WRAPPED = re.compile(rb'\{\s*"(?:%s)"\s*:\s*\[' % "|".join(LIST_KEYS).encode())


@contextmanager
def spooled(source: int) -> Iterator[Path]:
    """A private file holding what the file descriptor ``source`` gives (stdin's: 0), removed
    when the block ends."""
    fd, name = tempfile.mkstemp(prefix="amem-import-", suffix=".stdin")  # 0600, ours alone
    path = Path(name)
    try:
        with os.fdopen(fd, "wb", buffering=0) as out:  # the chunks are big enough already
            # what the pipe has now, not a blocking wait for a whole chunk: a slow writer's
            # bytes land as they come
            while chunk := os.read(source, CHUNK):
                out.write(chunk)
        yield path
    finally:
        path.unlink(missing_ok=True)


def sniffed(path: Path) -> str | None:
    """``json``, ``jsonl``, ``html`` or ``enex`` by the first character the file holds, or
    None (can't tell).

    A ``{`` is JSON lines unless the object goes on past its first line (pretty-printed: one
    JSON document) or opens with a list of notes under a key that says so
    (``{"notes": [``, ``amem.importarray.LIST_KEYS``): then it is one JSON object, whose
    list the import reads, or whose keys it names."""
    with path.open("rb") as raw:
        head = raw.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    if head[:1] == b"{" and (head.split(b"\n", 1)[0].strip() == b"{"
                             or _WRAPPED.match(head) is not None):
        return "json"
    if b"<en-export" in head and head.startswith((b"<?xml", b"<!DOCTYPE en-export", b"<en-export")):
        return "enex"
    if head[:14].lower().startswith((b"<!doctype html", b"<html")):
        # a page says so first; a Markdown file may open with markup too (a README's
        # `<p align="center">`), and read as HTML its paragraphs would run together
        return "html"
    return _OPENERS.get(head[0]) if head else None


__all__ = ["spooled", "sniffed"]
