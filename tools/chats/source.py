"""Where an export's conversations are: the file, the zip the app sent, or the folder a user
unzipped it into (its ``conversations.json``, or the shards a large export is split into:
:mod:`tools.chats.parts`), opened as text streams after the checks that refuse a file made to
harm its reader, bare or wrapped in an object (``WRAPPER_KEYS``); and :func:`sniff`, which app
wrote it.

Nothing here stores or converts: :mod:`tools.chats.load` reads what :func:`open_texts` opens.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from amem.kernel.encoding import encoding_of
from amem.kernel.jsonstream import ArrayItem, NoListKey, list_items
from amem.kernel.safejson import MAX_DEPTH

from . import APPS, NotAnArray, StreamError, detect
from .parts import MANIFEST, find_parts, is_sharded, listed_parts

__all__ = ["WRAPPER_KEYS", "Contents", "ExportLimits", "NoExportFound", "UnsafeExport", "conversation_items",
           "no_export_in_folder", "open_texts", "sniff"]

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


class NoExportFound(ValueError):
    """The file is a zip, or a folder, that holds no ``conversations.json`` (nor its shards):
    another app's, or part of an export. Not a JSON text that is no export (``NotAnArray``),
    which the transcript reader reads again: a zip or a folder has nothing to read again."""


class UnsafeExport(ValueError):
    """The file is not one an app wrote but one made to harm its reader (a zip bomb, a member
    outside the archive); nothing was read from it, nothing stored."""


@dataclass
class Contents:
    """What an export holds, each file as errors name it: ``read``, the files of its
    conversations in the order they are read; ``left_out``, every other one with what it is
    (a key of :data:`tools.chats.parts.LEFT_OUT`)."""

    read: list[str]
    left_out: list[tuple[str, str]]
    #: what holds the export: "file", "zip" or "folder"
    kind: str = "file"
    #: shards the export's manifest lists that it does not hold (a copy of some of its parts)
    missing: list[str] = field(default_factory=list)
    #: what is said of a manifest that could not be checked against, if one could not
    manifest_unread: str | None = None

    def warnings(self) -> list[str]:
        """What is said of each file left out that no export holds, or that is another's, and
        of each part the manifest lists and the export lacks."""
        theirs = self.read[0] + (", ..." if len(self.read) > 1 else "") if self.read else ""
        said = {"other_export": f"another export's conversations (this export's are {theirs}); not read: give "
                                "it on its own",
                "unknown": "not a file of a ChatGPT or Claude export; not read"}
        lost = [f"{name}: listed in {MANIFEST} but not in the {self.kind}: its "
                "conversations were not read (put it beside the others and load again; nothing is stored twice)"
                for name in self.missing]
        unread = [self.manifest_unread] if self.manifest_unread else []
        return [f"{name}: {said[why]}" for name, why in self.left_out if why in said] + lost + unread


@contextmanager
def open_texts(path: Path, limits: ExportLimits) -> Iterator[tuple[Contents, Iterator[tuple[str, io.TextIOWrapper]]]]:
    """What the export holds, and its texts, each with how errors name it: the file; or the
    ``conversations.json`` inside the zip the app sent, or its shards
    (``conversations-000.json``, ...) one after another, read from the zip as a stream, never
    unpacked to disk or memory (checked first, :func:`_check_names`, :func:`_check_size`); or
    the same of the folder a user unzipped it into (:func:`tools.chats.parts.find_parts`).

    Raises:
        NoExportFound: a zip or a folder without a ``conversations.json`` or its shards.
        UnsafeExport: a zip made to harm its reader.
    """
    if path.is_dir():
        names, odd = _folder_files(path)
        parts = find_parts(names, odd)
        if not parts.read:
            raise NoExportFound(f"{path} is a folder without a conversations.json (nor its shards, "
                                f"conversations-000.json, ...){_READS}")
        contents = Contents([str(path / n) for n in parts.read], [(str(path / n), why) for n, why in parts.left_out],
                            "folder")
        if is_sharded(parts):
            _check_manifest(contents, parts.read, set(names), lambda n: str(path / n),
                            lambda n: (path / n).read_bytes() if (path / n).is_file()
                            and (path / n).stat().st_size <= _MANIFEST_MAX else None)
        yield contents, _folder_texts(path, parts.read)
        return
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            _check_names(path, archive)
            parts = find_parts(archive.namelist())
            if not parts.read:
                raise NoExportFound(f"{path} is a zip without a conversations.json (nor its shards, "
                                    f"conversations-000.json, ...){_READS}")
            for member in parts.read:
                _check_size(path, archive.getinfo(member), limits)
            contents = Contents([f"{path}:{n}" for n in parts.read],
                                [(f"{path}:{n}", why) for n, why in parts.left_out], "zip")
            if is_sharded(parts):
                members = set(archive.namelist())
                _check_manifest(contents, parts.read, members, lambda n: f"{path}:{n}",
                                lambda n: archive.read(n) if n in members
                                and archive.getinfo(n).file_size <= _MANIFEST_MAX else None)
            yield contents, _zip_texts(path, archive, parts.read)
        return
    with path.open("rb") as raw:
        head = raw.read(4)
        raw.seek(0)
        # utf-8-sig drops a byte-order mark; UTF-16 or UTF-32 are read as what their mark says
        with io.TextIOWrapper(raw, encoding=encoding_of(head)) as text:
            yield Contents([str(path)], []), iter([(str(path), text)])


#: bytes a manifest may take to be read (a real one lists a few dozen names)
_MANIFEST_MAX = 1 << 20


def _check_manifest(contents: Contents, read: list[str], names: set[str], shown: Callable[[str], str],
                    load: Callable[[str], bytes | None]) -> None:
    """Name each shard the manifest beside the shards lists and the export lacks (into
    ``contents.missing``), or say the manifest could not be checked against; no manifest,
    nothing said (exports before 2026 have none)."""
    folder = read[0].rsplit("/", 1)[0] + "/" if "/" in read[0] else ""
    where = folder + MANIFEST
    if where not in names:
        return
    try:
        raw = load(where)
        listed = listed_parts(json.loads(raw)) if raw is not None else None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the parser
        listed = None
    if listed is None:
        contents.manifest_unread = (f"{shown(where)}: no list of the conversations' parts where this reader looks "
                                    "(logical_files, conversations.json, files); the parts found were read, none "
                                    "checked against it")
        return
    contents.missing.extend(shown(folder + n) for n in listed if folder + n not in names)


_READS = (": amem lcm ingest reads a ChatGPT or Claude data export's zip, the folder it was unzipped into, or its "
          "conversations.json")


def _folder_files(root: Path) -> tuple[list[str], set[str]]:
    """The files under ``root``, ``/``-separated from it, and those of them that are no regular
    file (a broken link, a pipe; and a link to a folder, not followed: it may lead back up). A
    hidden folder (``.git``) is one entry, not walked."""
    found: list[str] = []
    odd: set[str] = set()
    for top, dirs, files in os.walk(root, followlinks=False):
        here = Path(top).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        for name in sorted(dirs):
            if name.startswith(".") or (Path(top) / name).is_symlink():
                found.append(prefix + name)
                if (Path(top) / name).is_symlink():
                    odd.add(prefix + name)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(top) / d).is_symlink())
        for name in files:
            found.append(prefix + name)
            if not (Path(top) / name).is_file():
                odd.add(prefix + name)
    return found, odd


def _folder_texts(root: Path, parts: list[str]) -> Iterator[tuple[str, io.TextIOWrapper]]:
    """Each part's text in turn, open only while it is read."""
    for part in parts:
        with (root / part).open("rb") as raw:
            head = raw.read(4)
            raw.seek(0)
            with io.TextIOWrapper(raw, encoding=encoding_of(head)) as text:
                yield str(root / part), text


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
        NoExportFound: a zip or a folder without a ``conversations.json`` or its shards.
    """
    try:
        with open_texts(path, limits) as (_contents, texts):
            for name, text in texts:
                for item in conversation_items(text, name, limits):
                    return detect(item.value)
    except NotAnArray:
        return None
    except StreamError:
        # the first conversation is not whole JSON (a download cut short): still an export,
        # by the key only its conversations have, so the load names the broken line (the
        # transcript reader asked for a --session-key instead)
        with open_texts(path, limits) as (_contents, texts):
            found = _EXPORT_KEY.search(next(texts)[1].read(1 << 16))
        return next((app for app, key in APPS.items() if found and found.group(1) == key), None)
    except (UnicodeDecodeError, zipfile.BadZipFile, EOFError):
        return None  # not text, or a damaged zip: the transcript reader says what it is
    return None


def no_export_in_folder(path: Path, limits: ExportLimits = ExportLimits()) -> str:
    """Why the folder ``path``, which :func:`sniff` found no export in, is none: a folder is
    read as an unzipped export only (no transcript is a folder), so this is the error to give.

    Raises:
        NoExportFound: it holds no ``conversations.json`` nor shards at all.
    """
    with open_texts(path, limits) as (contents, texts):
        parts = ", ".join(Path(p).relative_to(path).as_posix() for p in contents.read[:3])
        parts += ", ..." if len(contents.read) > 3 else ""
        try:
            if not any(True for name, text in texts for _ in conversation_items(text, name, limits)):
                why = "holds no conversation"
            else:
                why = "is no ChatGPT or Claude export (its first item has no mapping nor chat_messages)"
        except StreamError as exc:
            why = f"is not an export's JSON: {exc}"
    return f"{path}: a folder is read as an unzipped ChatGPT or Claude export; its {parts} {why}"

