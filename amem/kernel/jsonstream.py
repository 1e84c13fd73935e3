"""The items of one top-level JSON array, read from a text stream one at a time.

A chat app's ``conversations.json`` (``amem lcm ingest``) and a JSON array of notes
(``amem import``) are single arrays, often over 100 MB: ``json.load`` held the text, the
parsed tree and our converted items at once. Here only the item being read
(and the unread rest of one chunk) is in memory; each item is parsed by the standard decoder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["ArrayItem", "NotAnArray", "StreamError", "array_items"]

#: characters read at a time; an item larger than this is read by doubling the buffer, so its
#: failed partial parses cost at most about twice its size in all
CHUNK = 1 << 20
_SPACE = " \t\r\n"


class StreamError(ValueError):
    """The file stops being a JSON array at ``line`` (1-based): nothing after it can be read."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class NotAnArray(StreamError):
    """The text does not open with ``[``: it is no JSON array (then it is read another way)."""


class ArrayItem:
    """One item of the array: its place (1-based), the line it starts on, its value."""

    __slots__ = ("index", "line", "value")

    def __init__(self, index: int, line: int, value: Any) -> None:
        self.index, self.line, self.value = index, line, value


class _Buffer:
    """The unread text, and the line number of a mark in it (for errors and item lines)."""

    def __init__(self, source: TextIO, chunk: int) -> None:
        self.source = source
        self.chunk = chunk
        self.text = ""
        self.pos = 0
        self.eof = False
        # lines are counted from a mark that only moves forward: counted from the buffer's
        # start for every item, a chunk of many small items was scanned once per item
        self._mark = 0
        self._mark_line = 1

    def more(self, at_least: int = 0) -> bool:
        """Read on (at least ``at_least`` characters unless the stream ends); False at its end."""
        if self.eof:
            return False
        # drop what was read, so the buffer holds one item and a chunk, never the file
        if self.pos:
            self.line_at(self.pos)
            self.text, self.pos, self._mark = self.text[self.pos:], 0, 0
        got = self.source.read(max(at_least, self.chunk))
        if not got:
            self.eof = True
            return False
        self.text += got
        return True

    def skip_space(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in _SPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if not self.more():
                return ""

    def line_at(self, pos: int) -> int:
        """The line of ``text[pos]``; ``pos`` at or after the last position asked about."""
        if pos > self._mark:
            self._mark_line += self.text.count("\n", self._mark, pos)
            self._mark = pos
        return self._mark_line


def array_items(source: TextIO, *, name: str = "the file", chunk: int = CHUNK,
                max_item: int | None = None) -> Iterator[ArrayItem]:
    """Yield each item of the JSON array ``source`` holds, in order, reading ``chunk``
    characters at a time.

    ``max_item`` bounds the characters one item may take: an item is held whole while it is
    read, so one that never closes (a zip bomb's payload) would grow the buffer until memory
    ran out; past the bound it is refused instead (the buffer holds at most about twice it).

    Raises:
        NotAnArray: the text does not start with ``[`` (before anything is yielded).
        StreamError: the text is not valid JSON from some item on (its line named), or an
            item is over ``max_item``; the items before it were yielded.
    """
    buf = _Buffer(source, chunk)
    decoder = json.JSONDecoder()
    if buf.skip_space() != "[":
        raise NotAnArray(f"{name} is not a JSON array", buf.line_at(buf.pos))
    buf.pos += 1
    index = 0
    while True:
        ch = buf.skip_space()
        if not ch:
            _broken(buf, name, f"the text ends after item {index}, before the array's closing ']' "
                    "(a file cut short?)")
        if ch == "]":
            buf.pos += 1
            break
        if index:
            if ch != ",":
                _broken(buf, name, f"expected ',' or ']' after item {index}")
            buf.pos += 1
            buf.skip_space()
        start_line = buf.line_at(buf.pos)
        while True:
            try:
                value, end = decoder.raw_decode(buf.text, buf.pos)
                # a number or literal that ends where the buffer does may go on in the next
                # chunk (an object or array cannot: it parsed only with its closing bracket)
                if end < len(buf.text) or buf.eof or not buf.more():
                    break
                continue
            except json.JSONDecodeError as exc:
                # an item cut by the chunk's end reads as bad JSON too: read on (doubling, so
                # a 50 MB item costs a few parses, not one per chunk), and judge it at the end
                pending = len(buf.text) - buf.pos
                if max_item is not None and pending > max_item:
                    _broken(buf, name, f"item {index + 1} is over {max_item} characters and still not "
                            "whole; nothing past it was read")
                if not buf.more(pending if max_item is None else min(pending, max_item)):
                    _broken(buf, name, f"item {index + 1} is not valid JSON: {exc.msg}", exc.pos)
            except RecursionError:
                _broken(buf, name, f"item {index + 1} nests too deep to read")
        index += 1
        buf.pos = end
        yield ArrayItem(index, start_line, value)
    if buf.skip_space():
        _broken(buf, name, "text after the array's closing ']'")


def _broken(buf: _Buffer, name: str, why: str, pos: int | None = None) -> None:
    line = buf.line_at(buf.pos if pos is None else pos)
    raise StreamError(f"{name}:{line}: {why}", line)
