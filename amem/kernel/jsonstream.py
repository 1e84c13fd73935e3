"""The items of one top-level JSON array, read from a text stream one at a time.

A chat app's ``conversations.json`` (``amem lcm ingest``) and a JSON array of notes
(``amem import``) are single arrays, often over 100 MB: ``json.load`` held the text, the
parsed tree and our converted items at once. Here only the item being read
(and the unread rest of one chunk) is in memory; each item is parsed by the standard decoder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NoReturn, TextIO

__all__ = ["ArrayItem", "NoListKey", "NotAnArray", "StreamError", "array_items", "list_items"]

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
    if buf.skip_space() != "[":
        raise NotAnArray(f"{name} is not a JSON array", buf.line_at(buf.pos))
    yield from _array(buf, name, max_item)
    if buf.skip_space():
        _broken(buf, name, "text after the array's closing ']'")


class NoListKey(NotAnArray):
    """The text is a JSON object none of whose wanted keys holds an array; ``members`` is
    each of its keys with what its value is ("a list of 3", "a string")."""

    def __init__(self, message: str, line: int, members: list[tuple[str, str]]) -> None:
        super().__init__(message, line)
        self.members = members


def list_items(source: TextIO, under: tuple[str, ...], *, name: str = "the file",
               chunk: int = CHUNK, max_item: int | None = None) -> tuple[str | None, Iterator[ArrayItem]]:
    """The items of the array ``source`` holds, or of the array a top-level object holds
    under the first of its keys that is one of ``under`` (``{"notes": [...]}``, what many
    apps write): (that key or None, the items). The object's other members are read past
    (each parsed whole: they are its metadata), before the list and after it.

    ``max_item`` bounds an item as ``array_items`` does, and each of the object's other
    members too: a member is held whole while it is read, as an item is.

    Raises:
        NotAnArray: the text is neither an array nor an object (``NoListKey``: an object
            without such a list, its members named), before anything is returned.
        StreamError: as ``array_items``, from the items' iteration.
    """
    buf = _Buffer(source, chunk)
    opener = buf.skip_space()
    if opener == "[":
        return None, _whole(buf, name, _array(buf, name, max_item), max_item=max_item)
    if opener != "{":
        raise NotAnArray(f"{name} is not a JSON array", buf.line_at(buf.pos))
    buf.pos += 1
    members: list[tuple[str, str]] = []
    while True:
        key = _member_key(buf, name, first=not members)
        if key is None:
            raise NoListKey(f"{name} is a JSON object without a list of notes",
                            buf.line_at(buf.pos), members)
        if key in under and buf.skip_space() == "[":
            return key, _whole(buf, name, _array(buf, name, max_item), closing="}", max_item=max_item)
        value = _decode(buf, name, f"the value of {key!r}", max_size=max_item)
        members.append((key, _kind(value)))


def _member_key(buf: _Buffer, name: str, *, first: bool) -> str | None:
    """The next member's key of the object being read, its ':' read past; None at its '}'."""
    ch = buf.skip_space()
    if ch == "}":
        buf.pos += 1
        return None
    if not first:
        if ch != ",":
            _broken(buf, name, "expected ',' or '}' between the object's members")
        buf.pos += 1
        buf.skip_space()
    key = _decode(buf, name, "a key")
    if not isinstance(key, str):
        _broken(buf, name, "an object's key must be a string")
    if buf.skip_space() != ":":
        _broken(buf, name, f"expected ':' after the key {key!r}")
    buf.pos += 1
    buf.skip_space()
    return str(key)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return {dict: "an object", str: "a string", bool: "true or false",
            type(None): "null"}.get(type(value), "a number")


def _whole(buf: _Buffer, name: str, items: Iterator[ArrayItem],
           closing: str = "", max_item: int | None = None) -> Iterator[ArrayItem]:
    """``items``, then the rest of the text checked: an object's other members up to its
    ``closing`` brace (each at most ``max_item`` characters), and nothing after."""
    yield from items
    if closing:
        while _member_key(buf, name, first=False) is not None:
            _decode(buf, name, "a value", max_size=max_item)
    if buf.skip_space():
        _broken(buf, name, "text after the JSON's end")


def _array(buf: _Buffer, name: str, max_item: int | None = None) -> Iterator[ArrayItem]:
    """The items of the array whose ``[`` ``buf`` is at, up to its closing ``]`` (each at
    most ``max_item`` characters, see ``array_items``)."""
    buf.pos += 1
    index = 0
    while True:
        ch = buf.skip_space()
        if not ch:
            _broken(buf, name, f"the text ends after item {index}, before the array's closing ']' "
                    "(a file cut short?)")
        if ch == "]":
            buf.pos += 1
            return
        if index:
            if ch != ",":
                _broken(buf, name, f"expected ',' or ']' after item {index}")
            buf.pos += 1
            buf.skip_space()
        start_line = buf.line_at(buf.pos)
        value = _decode(buf, name, f"item {index + 1}", max_size=max_item)
        index += 1
        yield ArrayItem(index, start_line, value)


_DECODER = json.JSONDecoder()


def _decode(buf: _Buffer, name: str, what: str, *, max_size: int | None = None) -> Any:
    """The JSON value at the buffer's position, read on as far as it takes (refused past
    ``max_size`` characters still not whole); the position moved past it."""
    while True:
        try:
            value, end = _DECODER.raw_decode(buf.text, buf.pos)
            # a number or literal that ends where the buffer does may go on in the next
            # chunk (an object or array cannot: it parsed only with its closing bracket)
            if end < len(buf.text) or buf.eof or not buf.more():
                break
            continue
        except json.JSONDecodeError as exc:
            # a value cut by the chunk's end reads as bad JSON too: read on (doubling, so
            # a 50 MB item costs a few parses, not one per chunk), and judge it at the end
            pending = len(buf.text) - buf.pos
            if max_size is not None and pending > max_size:
                _broken(buf, name, f"{what} is over {max_size} characters and still not "
                        "whole; nothing past it was read")
            if not buf.more(pending if max_size is None else min(pending, max_size)):
                _broken(buf, name, f"{what} is not valid JSON: {exc.msg}", exc.pos)
        except RecursionError:
            _broken(buf, name, f"{what} nests too deep to read")
    buf.pos = end
    return value


def _broken(buf: _Buffer, name: str, why: str, pos: int | None = None) -> NoReturn:
    line = buf.line_at(buf.pos if pos is None else pos)
    raise StreamError(f"{name}:{line}: {why}", line)
