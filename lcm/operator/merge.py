"""A backed-up SQLite conversation store merged into a store in use: nothing stored is changed.

``amem restore DIR --merge`` brings a backup's conversations into a home that already holds
some (a user who started using amem on the new machine before moving the old one over). A
copy of the backup's ``lcm.db`` over the target would lose the target's own conversations, so
the backup's messages are written through ingest's own step (:func:`lcm.ingest.store_messages`)
with each message as it was stored: its stable event key, its time, role, text and speaker.
What is already stored is left out first: the same event key in the conversation is the same
message; a message without one is matched by its time, role, text and speaker, each stored
copy matching one backed-up copy (two "ok"s of one instant in the backup stay two, where
ingest's re-send rules would take them for one). So a merge run twice adds nothing the second
time.

Which conversation a backed-up one goes into, in this order:

1. the target's conversation with the same session key, session id, creation time and first
   message (the same conversation, when both homes hold a copy of it; a time alone is a
   millisecond, which two homes can share);
2. for an active one with a session key, the target's active conversation of that key (the key
   exists: it gets only what is new);
3. otherwise a new conversation with the backed-up one's key, id, title, times and state
   (archived ones stay archived).

In a conversation both homes hold, the backup's messages take their places by time among the
target's: a message's position is its sequence number (``seq``, what browsing and paging read)
and, while it is raw in the context, its context item's ordinal (what the model is given). Both
are renumbered within the conversation, each side's own order kept and a tie in time going to
the target's message first; nothing else points at a sequence number or an ordinal (summaries,
context items and large files name a message by its id, which no merge changes). A message
older than what a summary here already covers cannot go inside that summary: it is placed
raw just after it (its context's message items stay in time order), counted in
``older_than_summaries`` and named by ``amem lcm doctor`` (``context_out_of_time_order``, a
finding, not damage) until compaction summarizes it with the raw messages around it.

The target may be SQLite or PostgreSQL: every step above is the shared SQL of
:class:`lcm.conn.Connection`; only the rows' own writing is the engine's (a :class:`MergeWriter`:
ingest's step, and on PostgreSQL ingest's advisory locks, since other hosts may write the same
conversations meanwhile, ``lcm.pg.merge``). What the target cannot hold (on PostgreSQL: a NUL,
a large file without a shared ``largeFilesDir``, a text whose words its full-text index cannot
take) is refused by :func:`check_backup` before anything is written (``lcm.operator.mergecheck``).

Summaries are not copied: they are derived from the messages, and a summary of the backup's
conversation would not cover a conversation the target extended; compaction builds them again.
Messages whose text was a large file get that file's text back (from the backup's ``lcm-files``)
and are stored into the target's own large-file directory as ingest would store them.

:func:`check_backup` reads the whole backup before anything is written (the database's
``quick_check``, its tables, every large file it names, whole: UTF-8 text of the size its record
gives); :func:`merge_backup` writes in one transaction, so a killed merge leaves the target's
database as it was (a large file it wrote whole before the kill is named by no row: ``amem lcm
doctor --clean`` lists it as an orphan; one cut short in its writing leaves a ``.tmp`` beside it,
which ``amem lcm doctor`` names once it is an hour old, ``leftover_temp_files``, and ``--clean
--apply`` deletes). Each merged
conversation raises the audit event ``lcm.merge.conversation`` (PEP 578) once its rows are
written, uncommitted: the kill test's fault point (tests/tools/test_restore_merge_kill.py).
"""

from __future__ import annotations

import heapq
import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from lcm.config import LcmConfig
from lcm.conn import Connection, Row
from lcm.errors import LcmValidationError
from lcm.ingest import store_messages
from lcm.largefiles import LargeFileStore
from lcm.models import _Dict
from lcm.normalize import NormalizedMessage
from lcm.operator.mergecheck import CONVERSATION_COLS, check_backup, file_text, on_postgres, reading
from lcm.ops import older_than_summaries
from lcm.reorder import renumber

if TYPE_CHECKING:
    from lcm.store import LcmStore

__all__ = ["MergeReport", "MergeWriter", "check_backup", "merge_backup"]


@dataclass
class MergeReport(_Dict):
    """What :func:`merge_backup` did."""

    #: the backup's conversations read
    conversations_read: int = 0
    #: of them, written as new conversations of the target
    conversations_created: int = 0
    #: of them, merged into a conversation the target already held
    conversations_merged: int = 0
    #: merged conversations whose messages were renumbered to read in time order
    conversations_reordered: int = 0
    messages_read: int = 0
    messages_added: int = 0
    #: messages the target already held (the same event key, or the same time, role and text)
    messages_skipped: int = 0
    #: messages added older than what a summary here covers: raw after it until compaction
    older_than_summaries: int = 0
    #: the backup's summaries, not copied (compaction builds the merged conversations' own)
    summaries_not_copied: int = 0
    large_files_added: int = 0
    notes: list[str] = field(default_factory=list)


class MergeWriter(Protocol):
    """What a merge needs of the target's engine: its locks against concurrent ingest (taken
    in the merge's transaction) and ingest's own step for the rows."""

    def enter_session(self, c: Connection, session_key: str | None, session_id: str | None) -> None:
        """Before looking for (or creating) the session's conversation."""
        ...

    def enter_conversation(self, c: Connection, conversation_id: int) -> None:
        """Before writing into the conversation or renumbering it."""
        ...

    def store(self, c: Connection, conversation_id: int, batch: list[NormalizedMessage],
              now_iso: str) -> tuple[list[int], list[str]]:
        """Store ``batch`` (checked against what is stored) as ingest would: (message ids,
        large-file ids)."""
        ...


class _SqliteWriter:
    """SQLite's: the write transaction holds the whole database, so no lock of its own."""

    def __init__(self, config: LcmConfig, files: LargeFileStore) -> None:
        self.config = config
        self.files = files

    def enter_session(self, c: Connection, session_key: str | None, session_id: str | None) -> None:
        pass

    def enter_conversation(self, c: Connection, conversation_id: int) -> None:
        pass

    def store(self, c: Connection, conversation_id: int, batch: list[NormalizedMessage],
              now_iso: str) -> tuple[list[int], list[str]]:
        ids, _, file_ids = store_messages(cast(sqlite3.Connection, c), conversation_id, batch, self.config,
                                          self.files, now_iso, trigram_max_pending=0, known_new=True)
        return ids, file_ids


def _writer(store: LcmStore) -> MergeWriter:
    """The target engine's writer (PostgreSQL's loaded only for a PostgreSQL store)."""
    if not on_postgres(store):
        return _SqliteWriter(store.config, store.files)
    from lcm.pg.merge import PgMergeWriter

    return PgMergeWriter(store.config, store.files)


def merge_backup(store: LcmStore, db: Path, files_dir: Path | None, now_iso: str, *,
                 checked: bool = False) -> MergeReport:
    """Merge the backup at ``db`` (large files under ``files_dir``) into ``store``, one
    transaction. It raises on what :func:`check_backup` names; ``checked``: the caller ran
    that check already (``amem restore`` does, before it writes anything else), so the whole
    backup is not read through SQLite's check a second time."""
    problems = [] if checked else check_backup(db, files_dir, store)
    if problems:
        raise LcmValidationError("; ".join(problems), field="backup")
    report = MergeReport()
    files = LargeFileStore(files_dir) if files_dir is not None else None
    writer = _writer(store)
    with reading(db) as src, store.db.atomic() as c:
        paths = {r["file_id"]: r["storage_path"] for r in src.execute("SELECT file_id, storage_path FROM large_files")}
        report.summaries_not_copied = _count(src, "summaries")
        for conv in src.execute("SELECT * FROM conversations ORDER BY id").fetchall():
            report.conversations_read += 1
            writer.enter_session(c, conv["session_key"], conv["session_id"])
            target, held = _target_conversation(c, conv, _first(src, conv["id"]), report)
            writer.enter_conversation(c, target)
            batch = [_message(src_row, files, paths) for src_row in
                     src.execute("SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq", (conv["id"],))]
            report.messages_read += len(batch)
            fresh = _not_stored(c, target, batch)
            report.messages_skipped += len(batch) - len(fresh)
            ids, file_ids = writer.store(c, target, fresh, now_iso)
            report.messages_added += len(ids)
            report.large_files_added += len(file_ids)
            if held and ids:
                report.conversations_reordered += _in_time_order(c, target, set(ids))
                report.older_than_summaries += _older_added(c, target, set(ids))
            # an audit event (PEP 578; nothing when no hook listens): a conversation's rows written,
            # not committed, the point tests/tools/test_restore_merge_kill.py kills a merge at
            sys.audit("lcm.merge.conversation", target, len(ids))
    if report.summaries_not_copied:
        report.notes.append(f"{report.summaries_not_copied} summaries of the backup were not copied: compaction "
                            "summarizes the merged conversations again")
    if report.older_than_summaries:
        report.notes.append(f"{report.older_than_summaries} merged messages are older than what a summary here covers: "
                            "they are read raw just after it until compaction summarizes them (amem lcm doctor: "
                            "context_out_of_time_order)")
    return report


def _in_time_order(c: Connection, conversation_id: int, added: set[int]) -> int:
    """Renumber the conversation's messages (``seq``) and its context's message items so the
    ``added`` ones sit by time among the others (the module's rules, ``lcm.reorder``); 1 if
    anything moved."""
    rows = c.execute("SELECT id, seq, created_at FROM messages WHERE conversation_id = ? ORDER BY seq",
                     (conversation_id,)).fetchall()
    # a stable merge of the two runs: each keeps its own order (a host's clock may step back),
    # and on a tie the target's message comes first
    order = [r[0] for r in heapq.merge([r for r in rows if r[0] not in added], [r for r in rows if r[0] in added],
                                       key=lambda r: r[2])]
    return int(renumber(c, conversation_id, order))


def _older_added(c: Connection, conversation_id: int, added: set[int]) -> int:
    """Of the ``added`` messages, those older than what a summary in the context before them covers."""
    return len(added.intersection(older_than_summaries(c, conversation_id).get(conversation_id, [])))


def _not_stored(c: Connection, conversation_id: int,
                batch: list[NormalizedMessage]) -> list[NormalizedMessage]:
    """The messages of ``batch`` the conversation does not hold (the module's matching)."""
    keys = {r[0] for r in c.execute("SELECT stable_event_key FROM messages WHERE conversation_id = ? "
                                    "AND stable_event_key IS NOT NULL", (conversation_id,))}
    copies = Counter(tuple(r) for r in c.execute(
        "SELECT identity_hash, created_at, coalesce(name, '') FROM messages WHERE conversation_id = ? "
        "AND stable_event_key IS NULL", (conversation_id,)))
    fresh = []
    for m in batch:
        if m.stable_event_key is not None:
            if m.stable_event_key not in keys:
                fresh.append(m)
                keys.add(m.stable_event_key)
            continue
        said = (m.identity_hash, m.created_at, m.name or "")
        if copies[said] > 0:
            copies[said] -= 1  # this stored copy is the backed-up one
        else:
            fresh.append(m)
    return fresh


def _count(c: sqlite3.Connection, table: str) -> int:
    try:
        return int(c.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.Error:
        return 0


def _first(c: Connection, conversation_id: int) -> tuple[str, str] | None:
    """A conversation's first message (identity, time), or None for an empty one."""
    row = c.execute("SELECT identity_hash, created_at FROM messages WHERE conversation_id = ? ORDER BY seq LIMIT 1",
                    (conversation_id,)).fetchone()
    return None if row is None else (row[0], row[1])


def _target_conversation(c: Connection, conv: Row, first: tuple[str, str] | None,
                         report: MergeReport) -> tuple[int, bool]:
    """The target's conversation for the backed-up ``conv`` (the module's rules 1-3), and
    whether the target held it already (rules 1 and 2)."""
    same = None
    # "IS ?" is SQLite's alone (PostgreSQL takes no parameter after IS): a missing key said as NULL
    where, args = [], []
    for col in ("session_key", "session_id"):
        where.append(f"{col} IS NULL" if conv[col] is None else f"{col} = ?")
        args += [] if conv[col] is None else [conv[col]]
    for (cid,) in c.execute(f"SELECT id FROM conversations WHERE {' AND '.join(where)} AND created_at = ?",
                            (*args, conv["created_at"])).fetchall():
        if _first(c, cid) == first:
            same = (cid,)
            break
    if same is None and conv["active"] and conv["session_key"] is not None:
        same = c.execute("SELECT id FROM conversations WHERE session_key = ? AND active = 1",
                         (conv["session_key"],)).fetchone()
    if same is not None:
        report.conversations_merged += 1
        return int(same[0]), True
    report.conversations_created += 1
    cur = c.execute(
        "INSERT INTO conversations(session_key, session_id, active, archived_at, archive_cause, title, created_at, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        tuple(conv[col] for col in CONVERSATION_COLS[1:]))
    return int(cur.lastrowid or 0), False


def _message(row: sqlite3.Row, files: LargeFileStore | None, paths: dict[str, str]) -> NormalizedMessage:
    """A backed-up message as ingest's step takes it: its own key, time and speaker; a large
    file's text read back (ingest stores it in the target's directory again)."""
    keys = row.keys()
    content: str = row["content"]
    if row["file_id"] is not None:
        assert files is not None  # check_backup found every named file
        content = file_text(files.resolve(paths[row["file_id"]]))
    get: Any = lambda name: row[name] if name in keys else None  # noqa: E731 (older backups lack these)
    return NormalizedMessage(row["role"], content, row["created_at"], True, row["identity_hash"],
                             row["stable_event_key"], get("name"), get("source_role"))
