"""Where an export's conversations are: the file, or the zip the app sent (its
``conversations.json``, or the shards a large export is split into), opened as text streams
after the checks that refuse a file made to harm its reader; and :func:`sniff`, which app wrote it.

Nothing here stores or converts: :mod:`tools.chats.load` reads what :func:`open_texts` opens.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from amem.kernel.encoding import encoding_of
from amem.kernel.safejson import MAX_DEPTH

from amem.kernel.jsonstream import ArrayItem, NoListKey, list_items

from . import APPS, NotAnArray, StreamError, detect

__all__ = ["WRAPPER_KEYS", "ExportLimits", "NoExportInZip", "UnsafeExport", "conversation_items", "export_name",
           "open_texts", "sniff"]

#: the keys an object wraps an export's array under, read as that array: ``{"conversations":
#: [...]}`` is what some tools save and what the unofficial ChatGPT export specification says
#: some exports are (no other wrapper of a ChatGPT or Claude export is known)
WRAPPER_KEYS = ("conversations",)
#: the opening of an export (bare, or wrapped) whose first conversation is not whole JSON
_EXPORT_KEY = re.compile(r'^\s*(?:\{.*?"conversations"\s*:\s*)?\[\s*\{.*?"(mapping|chat_messages)"\s*:', re.DOTALL)


@dataclass(frozen=True)
class ExportLimits:
    """What a file must keep within to be read at all: a hostile file (a zip bomb, a zip made
    to be unpacked outside its folder, JSON nested to overflow a parser) is refused before
    anything is stored, naming which limit it broke.

    A real export stays far inside each: the largest conversations.json seen are a few GB,
    deflate to about a tenth, nest under 20 levels, and hold no conversation of 10 MB.
    """

    #: bytes the zip's conversations.json may unpack to (it is streamed, never held: this
    #: bounds the time a load takes, not its memory)
    max_unzipped: int = 8 << 30
    #: unpacked bytes per compressed byte, for a member over ``ratio_floor`` (JSON deflates
    #: 5-20 to 1; deflate's own ceiling, which bombs use, is about 1,000)
    max_ratio: int = 200
    ratio_floor: int = 16 << 20
    #: characters one conversation may take in the file (one is held whole while it is read)
    max_conversation_chars: int = 128 << 20
    #: levels of objects and arrays (the rule for untrusted JSON, ``amem.kernel.safejson``)
    max_depth: int = MAX_DEPTH


class NoExportInZip(ValueError):
    """The file is a zip that holds no ``conversations.json`` (nor its shards): another app's
    zip, or part of an export. Not a JSON text that is no export (``NotAnArray``), which the
    transcript reader reads again: a zip has nothing to read again."""


class UnsafeExport(ValueError):
    """The file is not one an app wrote but one made to harm its reader (a zip bomb, a member
    outside the archive); nothing was read from it, nothing stored."""


@contextmanager
def open_texts(path: Path, limits: ExportLimits) -> Iterator[Iterator[tuple[str, io.TextIOWrapper]]]:
    """The export's texts, each with how errors name it: the file, or the ``conversations.json``
    inside the zip the app sent, or its shards (``conversations-000.json``, ...) one after
    another (read from the zip as a stream, never unpacked to disk or memory; checked first,
    :func:`_check_names`, :func:`_check_size`)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            _check_names(path, archive)
            members = _members(archive)
            if not members:
                raise NoExportInZip(f"{path} is a zip without a conversations.json (nor its shards, "
                                    "conversations-000.json, ...): amem lcm ingest reads the zip a "
                                    "ChatGPT or Claude data export sends, or its conversations.json")
            for member in members:
                _check_size(path, archive.getinfo(member), limits)
            yield _zip_texts(path, archive, members)
        return
    with path.open("rb") as raw:
        head = raw.read(4)
        raw.seek(0)
        # utf-8-sig drops a byte-order mark; UTF-16 or UTF-32 are read as what their mark says
        with io.TextIOWrapper(raw, encoding=encoding_of(head)) as text:
            yield iter([(str(path), text)])


def _zip_texts(path: Path, archive: zipfile.ZipFile, members: list[str]) -> Iterator[tuple[str, io.TextIOWrapper]]:
    """Each member's text in turn, open only while it is read."""
    for member in members:
        with archive.open(member) as raw:
            head = raw.read(4)
        with archive.open(member) as raw, io.TextIOWrapper(raw, encoding=encoding_of(head)) as text:
            yield f"{path}:{member}", text


def _check_names(path: Path, archive: zipfile.ZipFile) -> None:
    """Refuse a zip with a member named outside the archive (an absolute path, a drive, a
    ``..``): made to be unpacked where it should not be. This reader unpacks nothing, but no
    app sends such a zip, so it is no export.

    Raises:
        UnsafeExport: naming the member.
    """
    for name in archive.namelist():
        plain = name.replace("\\", "/")
        if plain.startswith("/") or re.match(r"[A-Za-z]:", plain) or ".." in plain.split("/"):
            raise UnsafeExport(f"{path}: its member {name!r} points outside the archive (an absolute path, a "
                               "drive or '..'): not a zip a chat app sent; nothing was stored")


def _check_size(path: Path, member: zipfile.ZipInfo, limits: ExportLimits) -> None:
    """Refuse a conversations.json declared larger than the limits, or far smaller packed than
    unpacked (a zip bomb). The declared size is what :mod:`zipfile` reads to: data that
    inflates past it is cut there and fails its CRC, so it bounds what is read.

    Raises:
        UnsafeExport: naming the sizes and the limit.
    """
    size, packed = member.file_size, max(member.compress_size, 1)
    if size > limits.max_unzipped:
        raise UnsafeExport(f"{path}: its {member.filename} unpacks to {_size(size)}; the limit is "
                           f"{_size(limits.max_unzipped)}; nothing was stored")
    if size > limits.ratio_floor and size > limits.max_ratio * packed:
        raise UnsafeExport(f"{path}: its {member.filename} unpacks to {_size(size)} from {_size(packed)} (a ratio "
                           f"of {size // packed} to 1, over {limits.max_ratio}): a zip bomb, not an export; "
                           "nothing was stored")


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


#: a shard of a large ChatGPT export: exports since 2026 split conversations.json into
#: conversations-000.json, conversations-001.json, ... (listed in export_manifest.json)
_SHARD = re.compile(r"conversations-(\d+)\.json")


def _members(archive: zipfile.ZipFile) -> list[str]:
    """The zip's ``conversations.json`` (at its top, or the shallowest one in a folder), else
    its shards in their numbers' order, in the shallowest folder that holds any."""
    names = archive.namelist()
    found = [n for n in names if n.rsplit("/", 1)[-1] == "conversations.json"]
    if found:
        return [min(found, key=lambda n: (n.count("/"), n))]
    shards = [n for n in names if _SHARD.fullmatch(n.rsplit("/", 1)[-1])]
    if not shards:
        return []
    top = min(n.rsplit("/", 1)[0] if "/" in n else "" for n in shards)
    here = [n for n in shards if (n.rsplit("/", 1)[0] if "/" in n else "") == top]
    return sorted(here, key=lambda n: int(_SHARD.fullmatch(n.rsplit("/", 1)[-1]).group(1)))  # type: ignore[union-attr]


def export_name(path: Path) -> str:
    """How errors name the export: the file, or the file inside the zip (its first shard)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = _members(archive)
        if members:
            return f"{path}:{members[0]}"
    return str(path)


def conversation_items(text: io.TextIOWrapper, name: str, limits: ExportLimits) -> Iterator[ArrayItem]:
    """The conversations of one text: its array, or the array an object holds under a key of
    ``WRAPPER_KEYS`` (the object's other members read past, each within the limit a
    conversation has).

    Raises:
        NotAnArray: the text is neither (before anything is yielded).
        StreamError: as :func:`amem.kernel.jsonstream.array_items`.
    """
    try:
        _key, items = list_items(text, WRAPPER_KEYS, name=name, max_item=limits.max_conversation_chars)
    except NoListKey as exc:  # worded for notes there
        raise NotAnArray(f"{name} is a JSON object without an array of conversations under "
                         f"{', '.join(repr(k) for k in WRAPPER_KEYS)}", exc.line) from None
    return items


def sniff(path: Path, limits: ExportLimits = ExportLimits()) -> str | None:
    """The app whose export ``path`` is (by its first conversation), or None: not an export
    (another transcript), or not readable JSON (then the transcript reader names the error).
    The export may be wrapped in an object (``WRAPPER_KEYS``).

    Raises:
        UnsafeExport: a zip made to harm its reader (:func:`_check_names`, :func:`_check_size`).
        NoExportInZip: a zip without a ``conversations.json`` or its shards.
    """
    try:
        with open_texts(path, limits) as texts:
            for name, text in texts:
                for item in conversation_items(text, name, limits):
                    return detect(item.value)
    except NotAnArray:
        return None
    except StreamError:
        # the first conversation is not whole JSON (a download cut short): still an export,
        # by the key only its conversations have, so the load names the broken line (the
        # transcript reader asked for a --session-key instead)
        with open_texts(path, limits) as texts:
            found = _EXPORT_KEY.search(next(texts)[1].read(1 << 16))
        return next((app for app, key in APPS.items() if found and found.group(1) == key), None)
    except (UnicodeDecodeError, zipfile.BadZipFile, EOFError):
        return None  # not text, or a damaged zip: the transcript reader says what it is
    return None
