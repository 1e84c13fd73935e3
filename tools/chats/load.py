"""Load a chat app's export into lcm: each conversation its own conversation of the caller's agent.

1. The file is streamed (:mod:`amem.kernel.jsonstream`): one conversation in memory at a time.
2. Each conversation is converted (:mod:`tools.chats.chatgpt`, :mod:`tools.chats.claude`) and
   its messages checked as ingest checks them, so a bad one is named before anything is stored.
3. Unless ``skip_invalid``, a first pass reads the whole file and refuses it naming every bad
   conversation (as ``amem import`` refuses a file with bad lines); a second pass stores.
   With ``skip_invalid`` one pass stores the good conversations and reports the bad ones.
4. A conversation is stored under ``agent:<agent>:<app>:<its export id>``: every message has
   the export's id as its event id, so importing the same (or a newer) export again stores
   only what is new. The other branches go to ``<that key>:branches``, each after a marker
   naming the message it follows (:func:`tools.chats.tree.with_forks`); a marker new to a
   store that held its branch is moved before the branch (``LcmStore.place_before``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from amem.kernel.encoding import encoding_of
from amem.kernel.safejson import MAX_DEPTH
from lcm.errors import LcmValidationError, ReplayFloodError
from lcm.normalize import normalize_messages

from ..tenancy import PREFIX, agent_segment
from . import APPS, CONVERTERS, BadConversation, ExportedConversation, NotAnArray, StreamError, array_items, detect
from .model import check_nesting, describe

__all__ = ["BATCH", "ExportLimits", "ExportRejected", "IngestTarget", "Ingested", "LoadReport", "NoExportInZip",
           "PartlyStored", "UnsafeExport", "WrappedExport", "key_prefix", "load_export", "session_key", "sniff"]

#: messages per ingest call (one transaction each), as ``amem lcm ingest`` batches a file
BATCH = 500
#: bad conversations and warnings named in a report at most (a broken file of 10k must not fill memory)
MAX_SAID = 100
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_EXPORT_KEY = re.compile(r'^\s*\[\s*\{.*?"(mapping|chat_messages)"\s*:', re.DOTALL)
#: an export's array inside an object (what some tools save; some describe exports so)
_WRAPPED_KEY = re.compile(r'^\s*\{.*?"conversations"\s*:\s*\[\s*\{.*?"(mapping|chat_messages)"\s*:', re.DOTALL)


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


class WrappedExport(ValueError):
    """The file is an export's array of conversations inside an object (``{"conversations":
    [...]}``), which is not read: the message says how to give the array alone."""


class NoExportInZip(ValueError):
    """The file is a zip that holds no ``conversations.json`` (nor its shards): another app's
    zip, or part of an export. Not a JSON text that is no array (``NotAnArray``), which the
    sniff reads again as a wrapped export: a zip has nothing to read again."""


class UnsafeExport(ValueError):
    """The file is not one an app wrote but one made to harm its reader (a zip bomb, a member
    outside the archive); nothing was read from it, nothing stored."""


class Ingested(Protocol):
    """What loading reads of an ingest's answer (:class:`lcm.IngestResult`)."""

    @property
    def stored(self) -> int: ...

    @property
    def skipped_duplicates(self) -> int: ...


class IngestTarget(Protocol):
    """What loading needs of the conversation store: :meth:`lcm.LcmStore.ingest` and
    :meth:`lcm.LcmStore.place_before` (both engines)."""

    def ingest(self, session_key: str | None, messages: Sequence[Mapping[str, Any]], *,
               session_id: str | None = None, title: str | None = None) -> Ingested: ...

    def place_before(self, session_key: str, placements: Mapping[str, str]) -> int: ...


@dataclass
class LoadReport:
    """What a load read, stored and left out (``to_dict`` for ``--json``)."""

    path: str
    app: str
    conversations: int = 0
    #: conversations that got at least one new message
    conversations_stored: int = 0
    #: messages kept on the conversations' own lines (stored now or already there)
    messages: int = 0
    stored: int = 0
    skipped_duplicates: int = 0
    #: edited or regenerated branches off the line the user last saw, and their messages
    branches: int = 0
    branch_messages: int = 0
    #: fork markers stored before the branches' messages (one per fork), counted in ``stored``
    fork_points: int = 0
    #: markers new to a store that held their branches (imported before markers existed), which
    #: ingest stored last, moved before their branch's first message (``LcmStore.place_before``)
    fork_points_placed: int = 0
    #: messages left out, by reason ("empty", "reasoning", "internal", "unreadable")
    left_out: Counter[str] = field(default_factory=Counter)
    #: messages kept that the app does not show as one ("hidden", "tool_output")
    kept: Counter[str] = field(default_factory=Counter)
    #: images, audio, video and files stored as placeholders, by kind (the export has no bytes of them)
    placeholders: Counter[str] = field(default_factory=Counter)
    #: conversations without one message to store (nothing was said in them)
    empty_conversations: int = 0
    invalid: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: all the warnings (``warnings`` names the first ``MAX_SAID``)
    warning_count: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key in ("left_out", "kept", "placeholders"):
            data[key] = dict(sorted(getattr(self, key).items()))
        return data

    def error(self, text: str) -> None:
        """A conversation not stored: counted, and named while fewer than ``MAX_SAID`` are."""
        self.invalid += 1
        if len(self.errors) < MAX_SAID:
            self.errors.append(text)

    def warn(self, text: str) -> None:
        self.warning_count += 1
        if len(self.warnings) < MAX_SAID:
            self.warnings.append(text)


class ExportRejected(ValueError):
    """The export has conversations that cannot be read; nothing was stored."""

    def __init__(self, check: LoadReport) -> None:
        shown = "\n  ".join(check.errors[:20])
        more = check.invalid - min(20, len(check.errors))
        super().__init__(
            f"{check.path}: {check.invalid} of {check.conversations} conversations cannot be read; nothing "
            f"was stored (fix them, or pass --skip-invalid to store the rest):\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""))
        self.report = check


def session_key(agent_id: str, app: str, export_id: str) -> str:
    """The key a conversation of ``app``'s export is stored under, for ``agent_id``.

    A plain id (ChatGPT's and Claude's are UUIDs) is kept as it is, so a user can find the
    conversation by the id in the app's address bar; anything else is hashed, so the key holds
    no spaces or separators."""
    plain = export_id if _PLAIN_ID.fullmatch(export_id) else hashlib.sha256(export_id.encode()).hexdigest()[:32]
    return key_prefix(agent_id, app) + plain


def key_prefix(agent_id: str, app: str) -> str:
    """What every key of ``app``'s conversations for ``agent_id`` starts with."""
    return f"{PREFIX}{agent_segment(agent_id)}:{app}:"


@contextmanager
def _open(path: Path, limits: ExportLimits) -> Iterator[Iterator[tuple[str, io.TextIOWrapper]]]:
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


def _name(path: Path) -> str:
    """How errors name the export: the file, or the file inside the zip (its first shard)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = _members(archive)
        if members:
            return f"{path}:{members[0]}"
    return str(path)


def sniff(path: Path, limits: ExportLimits = ExportLimits()) -> str | None:
    """The app whose export ``path`` is (by its first conversation), or None: not an export
    (another transcript), or not readable JSON (then the transcript reader names the error).

    Raises:
        UnsafeExport: a zip made to harm its reader (:func:`_check_names`, :func:`_check_size`).
        WrappedExport: an export's array inside an object.
        NoExportInZip: a zip without a ``conversations.json`` or its shards.
    """
    try:
        with _open(path, limits) as texts:
            for name, text in texts:
                for item in array_items(text, name=name, max_item=limits.max_conversation_chars):
                    return detect(item.value)
    except StreamError as exc:
        if isinstance(exc, NotAnArray):
            with _open(path, limits) as texts:
                wrapped = _WRAPPED_KEY.search(next(texts)[1].read(1 << 16))
            if wrapped:  # named, not read as a transcript (that asked for a --session-key)
                app = next(a for a, key in APPS.items() if key == wrapped.group(1))
                raise WrappedExport(
                    f"{_name(path)} is a {'ChatGPT' if app == 'chatgpt' else 'Claude'} export's conversations inside "
                    "an object ({\"conversations\": [...]}), which amem lcm ingest does not read: give it the "
                    f"array alone, the conversations.json the app sent or one saved with: jq .conversations "
                    f"{path} > conversations.json") from None
            return None
        # the first conversation is not whole JSON (a download cut short): still an export,
        # by the key only its conversations have, so the load names the broken line (the
        # transcript reader asked for a --session-key instead)
        with _open(path, limits) as texts:
            found = _EXPORT_KEY.search(next(texts)[1].read(1 << 16))
        return next((app for app, key in APPS.items() if found and found.group(1) == key), None)
    except (UnicodeDecodeError, zipfile.BadZipFile, EOFError):
        return None  # not text, or a damaged zip: the transcript reader says what it is
    return None


def load_export(store: IngestTarget, path: Path, app: str, agent_id: str, *, skip_invalid: bool = False,
                progress: Callable[[str, int, int | None], None] | None = None,
                limits: ExportLimits = ExportLimits()) -> LoadReport:
    """Store every conversation of the export at ``path`` (written by ``app``) for ``agent_id``.

    ``progress(stage, done, total)`` is called after each conversation: stage ``check`` (the
    first pass, total unknown) then ``store`` (total known when the file was checked first).

    Raises:
        ExportRejected: some conversations cannot be read (a conversation nested deeper than
            ``limits.max_depth`` among them) and ``skip_invalid`` is off; nothing was stored.
        UnsafeExport: a zip made to harm its reader (a bomb, a member outside the archive);
            refused before a conversation is read, with ``skip_invalid`` too.
        StreamError: the file is not valid JSON from some line on, or a conversation is over
            ``limits.max_conversation_chars`` (with ``skip_invalid``, the conversations before
            it are stored; the error says how many).
        UnicodeDecodeError: the file is not text in its encoding.
        PartlyStored: the store failed (went away, locked); what was stored before is kept.

    A conversation the store refuses (a replay flood the check could not foresee) is counted
    and named like a bad one, and the others are stored.
    """
    started = time.perf_counter()
    total = None
    if not skip_invalid:
        check = _run(None, path, app, agent_id, progress, None, limits)
        if check.invalid:
            raise ExportRejected(check)
        total = check.conversations
    report = _run(store, path, app, agent_id, progress, total, limits)
    report.seconds = round(time.perf_counter() - started, 3)
    return report


class PartlyStored(Exception):
    """Storing stopped at a conversation (the store failed: it went away, or stayed locked);
    the conversations before it are stored, and running the same import again resumes."""

    def __init__(self, cause: Exception, where: str, report: LoadReport) -> None:
        super().__init__(f"{where}: {cause} The {report.conversations_stored} conversations stored before it "
                         f"are kept ({report.stored} messages); importing the file again stores the rest "
                         "(what is stored is taken as already there)")
        self.cause, self.report = cause, report


def _run(store: IngestTarget | None, path: Path, app: str, agent_id: str,
         progress: Callable[[str, int, int | None], None] | None, total: int | None,
         limits: ExportLimits) -> LoadReport:
    """One pass over the file: convert and check each conversation, and store it when ``store``."""
    report = LoadReport(_name(path), app)
    convert = CONVERTERS[app]
    now = "1970-01-01T00:00:00.000Z"  # checking only: a message without a time of its own is not stored here
    with _open(path, limits) as texts:
        for name, item in ((name, item) for name, text in texts
                           for item in array_items(text, name=name, max_item=limits.max_conversation_chars)):
            report.conversations += 1
            index = report.conversations  # counted across shards
            try:
                check_nesting(index, item.value, limits.max_depth)
                conv = convert(index, item.value)
                _check(conv, index, item.value, now)
            except BadConversation as exc:
                report.error(f"{name}:{item.line}: {exc}")
                continue
            for warning in conv.warnings:
                report.warn(warning)
            report.messages += len(conv.messages)
            report.branches += conv.branch_count
            report.branch_messages += len(conv.branches) - conv.fork_points
            report.fork_points += conv.fork_points
            report.left_out.update(conv.left_out)
            report.kept.update(conv.kept)
            report.placeholders.update(conv.placeholders)
            if not conv.messages and not conv.branches:
                report.empty_conversations += 1
            if store is not None:
                try:
                    _store(store, conv, agent_id, report, f"{name}:{item.line}")
                except BadConversation as exc:  # the store refused it (a replay flood): named, the rest go on
                    report.error(f"{name}:{item.line}: {describe(index, item.value)}: {exc}")
            if progress is not None:
                progress("check" if store is None else "store", report.conversations, total)
    return report


def _check(conv: ExportedConversation, index: int, obj: Any, now: str) -> None:
    """Refuse, as a bad conversation, what ingest would refuse (a bad time, a lone surrogate)."""
    for part in (conv.messages, conv.branches):
        try:
            normalize_messages(part, now)
        except LcmValidationError as exc:
            found = re.match(r"messages\[(\d+)\]", exc.field or "")
            node = part[int(found.group(1))].get("event_id") if found else None
            said = str(exc).replace(found.group(0), "the message", 1) if found else str(exc)
            raise BadConversation(f"{describe(index, obj)}: message {node!r}: {said}") from None


def _store(store: IngestTarget, conv: ExportedConversation, agent_id: str, report: LoadReport, where: str) -> None:
    key = session_key(agent_id, conv.source, conv.export_id)
    new = 0
    title = conv.title
    branch_title = f"{title} (edited and regenerated branches)" if title else "edited and regenerated branches"
    for into, messages, name in ((key, conv.messages, title), (f"{key}:branches", conv.branches, branch_title)):
        for start in range(0, len(messages), BATCH):
            try:
                res = _ingest(store, into, messages[start:start + BATCH], name, conv, report)
            except LcmValidationError as exc:
                report.conversations_stored += bool(new)
                # what the check could not see: the replay guard counts what is stored already
                # (the same words said more than its limit in one second, all given one time)
                raise BadConversation(f"the store refused it ({exc}); {new} of its messages were stored "
                                      "before that") from exc
            except Exception as exc:  # the store itself failed: stop, saying what is kept
                raise PartlyStored(exc, where, report) from exc
            report.stored += res.stored
            report.skipped_duplicates += res.skipped_duplicates
            new += res.stored
            if into != key:  # each import, stored now or before: one this fix came after is healed
                try:
                    _place_forks(store, into, messages[start:start + BATCH], report)
                except Exception as exc:  # the store failed: what is stored is kept, as above
                    raise PartlyStored(exc, where, report) from exc
    report.conversations_stored += bool(new)


def _place_forks(store: IngestTarget, key: str, batch: list[dict[str, Any]], report: LoadReport) -> None:
    """Each fork marker of ``batch`` before its branch's first message (its event id
    ``fork:<that id>``, :func:`tools.chats.tree.with_forks`): in place already when the two were
    stored together (nothing written); moved when the store held the branch before markers
    existed, where ingest stored the marker last."""
    forks = {m["event_id"]: m["event_id"].removeprefix("fork:") for m in batch
             if str(m.get("event_id", "")).startswith("fork:")}
    if forks:
        report.fork_points_placed += store.place_before(key, forks)


def _ingest(store: IngestTarget, key: str, batch: list[dict[str, Any]], title: str | None,
            conv: ExportedConversation, report: LoadReport) -> Ingested:
    """One batch; refused as a replay flood while it holds borrowed times, once more without them.

    A message the export gave no time takes its parent's (or the conversation's), so it sits
    where it was said; an old export without times gives every message one time, and four
    identical "continue" prompts in one second are what the replay guard refuses. Without the
    borrowed time such a message is stored at the import's time, which the guard does not
    count (its event id proves it a message of its own).
    """
    try:
        return store.ingest(key, batch, title=title)
    except ReplayFloodError:
        # only the repeated ones lose their borrowed time; the rest keep it
        said = Counter((m["role"], m["content"]) for m in batch if m.get("event_id") in conv.borrowed_times)
        borrowed = {m["event_id"] for m in batch
                    if m.get("event_id") in conv.borrowed_times and said[m["role"], m["content"]] > 1}
        if not borrowed:
            raise
    res = store.ingest(key, [{k: v for k, v in m.items() if k != "created_at"} if m.get("event_id") in borrowed
                             else m for m in batch], title=title)
    report.warn(f"{_said_conv(conv)}: {len(borrowed)} messages without a time of their own "
                "were stored at the import's time: given the time before them, identical ones fell in one "
                "second, which the replay guard refuses")
    return res


def _said_conv(conv: ExportedConversation) -> str:
    return f"conversation {conv.title!r} (id {conv.export_id})" if conv.title else f"conversation {conv.export_id}"
