"""How a file's bytes become text for the importers (``amem import``, ``amem lcm ingest``).

UTF-8, its byte-order mark dropped; a file that opens with a UTF-16 or UTF-32 byte-order mark
(Windows Notepad's "Unicode", PowerShell 5's ``>`` and ``Out-File``) is read in that encoding,
as every editor reads it. Anything else that is not UTF-8 (Latin-1, Windows-1252) is not
guessed: it is named at its line and byte, with the ``iconv`` command that converts it.

Lines are counted as the importers count them: Python's universal newlines, so a lone ``\\r``
(an old Mac file) ends a line as ``\\n`` and ``\\r\\n`` do.
"""

from __future__ import annotations

import codecs
from typing import BinaryIO

__all__ = ["encoding_of", "NotUtf8", "find_not_utf8"]

# UTF-32's little-endian mark starts with UTF-16's: it is looked for first
_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def encoding_of(head: bytes) -> str:
    """The codec to read a file opening with ``head`` (its first 4 bytes or more) in: the
    one its byte-order mark names (the codec drops the mark), else ``utf-8-sig``."""
    for mark, codec in _MARKS:
        if head.startswith(mark):
            return codec
    return "utf-8-sig"


class NotUtf8(ValueError):
    """Where a file stops being UTF-8: ``line`` (1-based), ``column`` (the byte's 1-based
    offset in its line), the ``byte``, and a sentence naming them with a fix."""

    def __init__(self, name: str, line: int, column: int, byte: int, legacy: bool) -> None:
        self.line, self.column, self.byte = line, column, byte
        hint = ("it reads as Windows-1252 / Latin-1: convert it with `iconv -f CP1252 -t UTF-8 "
                "FILE > NEW`" if legacy else "save it as UTF-8")
        super().__init__(f"{name}:{line}: not UTF-8 text (byte 0x{byte:02x}, byte {column} of "
                         f"the line); {hint}")


def find_not_utf8(handle: BinaryIO, name: str) -> NotUtf8 | None:
    """The first place ``handle`` (read from its start, UTF-8 expected) is not UTF-8, or None.

    Read line by line in binary, so a file of any size costs one line's memory; a UTF-8
    character never holds a ``\\n`` byte, so no character is cut between two reads.
    """
    number = 1
    for raw in handle:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            before = raw[:exc.start]
            line = number + _lone_cr(before)
            start = max(before.rfind(b"\r"), -1) + 1  # a lone \r before it began its line
            legacy = _is_cp1252(raw)
            return NotUtf8(name, line, exc.start - start + 1, raw[exc.start], legacy)
        number += raw.count(b"\n") + _lone_cr(raw)
    return None


def _lone_cr(raw: bytes) -> int:
    """Line breaks made by a ``\\r`` that no ``\\n`` follows (universal newlines count them)."""
    return raw.count(b"\r") - raw.count(b"\r\n")


def _is_cp1252(raw: bytes) -> bool:
    try:
        raw.decode("cp1252")
    except UnicodeDecodeError:
        return False
    return True
