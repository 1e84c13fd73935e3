"""Load a chat app's export into lcm: each conversation its own conversation of the caller's agent.

1. The file, the zip the app sent or the folder it was unzipped into is opened by
   :mod:`tools.chats.source` (its other files counted, unknown ones named) and streamed
   (:mod:`amem.kernel.jsonstream`): one conversation in memory at a time.
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

What a load did is a :class:`tools.chats.report.LoadReport`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from lcm.errors import LcmValidationError, ReplayFloodError
from lcm.normalize import normalize_messages

from ..tenancy import PREFIX, agent_segment
from . import CONVERTERS, BadConversation, ExportedConversation
from .model import check_nesting, describe
# the names callers import from here: the load's report and errors, where the export is
from .report import MAX_SAID, ExportRejected, LoadReport, PartlyStored
from .source import ExportLimits, NoExportFound, UnsafeExport, conversation_items, open_texts, sniff

__all__ = ["BATCH", "MAX_SAID", "ExportLimits", "ExportRejected", "IngestTarget", "Ingested", "LoadReport", "NoExportFound",
           "PartlyStored", "UnsafeExport", "key_prefix", "load_export", "session_key", "sniff"]

#: messages per ingest call (one transaction each), as ``amem lcm ingest`` batches a file
BATCH = 500
_PLAIN_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


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

    def place_before(self, session_key: str, placements: Mapping[str, str]) -> Placed: ...


class Placed(Protocol):
    """What loading reads of a placement's answer (:class:`lcm.reorder.Placed`)."""

    @property
    def moved(self) -> int: ...

    @property
    def after_summary(self) -> tuple[str, ...]: ...


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


def load_export(store: IngestTarget, path: Path, app: str, agent_id: str, *, skip_invalid: bool = False,
                progress: Callable[[str, int, int | None], None] | None = None,
                limits: ExportLimits = ExportLimits()) -> LoadReport:
    """Store every conversation of the export at ``path`` (written by ``app``) for ``agent_id``:
    its ``conversations.json`` (bare, or wrapped as ``{"conversations": [...]}``), the zip the app
    sent, or the folder a user unzipped that into, read as the zip is.

    ``progress(stage, done, total)`` is called after each conversation: stage ``check`` (the
    first pass, total unknown) then ``store`` (total known when the file was checked first).

    Raises:
        ExportRejected: some conversations cannot be read (a conversation nested deeper than
            ``limits.max_depth`` among them) and ``skip_invalid`` is off; nothing was stored.
        NoExportFound: a zip or folder without a ``conversations.json`` or its shards.
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


def _run(store: IngestTarget | None, path: Path, app: str, agent_id: str,
         progress: Callable[[str, int, int | None], None] | None, total: int | None,
         limits: ExportLimits) -> LoadReport:
    """One pass over the file: convert and check each conversation, and store it when ``store``."""
    convert = CONVERTERS[app]
    now = "1970-01-01T00:00:00.000Z"  # checking only: a message without a time of its own is not stored here
    with open_texts(path, limits) as (contents, texts):
        report = LoadReport(contents.read[0], app, parts=contents.read[:MAX_SAID])
        report.files_left_out.update(why for _, why in contents.left_out)
        report.parts_missing = len(contents.missing)
        for warning in contents.warnings():
            report.warn(warning)
        for name, item in ((name, item) for name, text in texts
                           for item in conversation_items(text, name, limits)):
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
                    _place_forks(store, into, messages[start:start + BATCH], report, conv)
                except Exception as exc:  # the store failed: what is stored is kept, as above
                    raise PartlyStored(exc, where, report) from exc
    report.conversations_stored += bool(new)


def _place_forks(store: IngestTarget, key: str, batch: list[dict[str, Any]], report: LoadReport,
                 conv: ExportedConversation) -> None:
    """Each fork marker of ``batch`` before its branch's first message (its event id
    ``fork:<that id>``, :func:`tools.chats.tree.with_forks`): in place already when the two were
    stored together (nothing written); moved when the store held the branch before markers
    existed, where ingest stored the marker last. A marker whose branch's first message a
    summary already holds follows that summary in the context (a summary is one item there):
    counted and warned about, as nothing here can put it inside the summary."""
    forks = {m["event_id"]: m["event_id"].removeprefix("fork:") for m in batch
             if str(m.get("event_id", "")).startswith("fork:")}
    if not forks:
        return
    placed = store.place_before(key, forks)
    report.fork_points_placed += placed.moved
    if placed.after_summary:
        report.fork_points_after_summary += len(placed.after_summary)
        shown = ", ".join(placed.after_summary[:5]) + (", ..." if len(placed.after_summary) > 5 else "")
        report.warn(f"{_said_conv(conv)}: {len(placed.after_summary)} fork "
                    f"{'marker' if len(placed.after_summary) == 1 else 'markers'} ({shown}) "
                    f"{'stands' if len(placed.after_summary) == 1 else 'stand'} after the summary that holds "
                    "its branch's first message in the context (browsing has it before that message); its text "
                    "names that message")


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
