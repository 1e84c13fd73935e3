"""Rotate: compact a conversation's live transcript backing to its fresh tail, after a rolling backup.

For a host that ingests through amem, the *transcript backing* of a conversation is what lcm
holds for it and ``assemble`` reads: its message rows and its context items (with the
summaries, their edges and the large-file records they lean on). ``rotate`` is lossless-claw's
rotate for that backing:

1. **a rolling backup**: the whole conversation is written as a snapshot
   (:mod:`lcm.operator.snapshot`: gzip JSON lines, owner-only) under ``rotateBackupDir``
   (default ``lcm-rotate-backups`` beside a SQLite database), read back and checked against
   its trailer before anything changes; the newest ``rotateKeepBackups`` (3) of the
   conversation are kept;
2. **the compaction**: forced rounds of the compaction driver until a round makes no summary,
   so everything before the protected fresh tail is summaries and the tail stays raw. The
   conversation is not split: the same id and session key, every message kept (and found by
   grep and expand through the summaries' edges).

:func:`plan_rotate` ``(store, session_key) -> RotatePlan`` is the dry run: the conversation,
the context's tokens and items, what the fresh tail keeps, what would be compacted, and where
the backup would go. :func:`apply_rotate` ``(store, plan) -> RotatePlan`` does both steps in
**one transaction** that first checks the context is still as planned
(``ConcurrentChangeError`` otherwise) and checks at the end that no message was lost; any
failure rolls the whole compaction back (the backup file, already checked, stays). The
transaction is held while the summarizer runs: on SQLite other writers wait for it (up to the
busy timeout), so rotate is an operator's command, not a per-turn one.

:func:`plan_restore` / :func:`apply_restore` bring a backup back as a **new** conversation (its
own session key, ``restore:<id>:<time>`` by default): restoring over the live one would throw
away what was said since the backup.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lcm.compaction import load_items, resolve_params, tail_start
from lcm.conn import Connection
from lcm.db import Database
from lcm.errors import ConcurrentChangeError, LcmNotFoundError, LcmValidationError
from lcm.models import _Dict
from lcm.operator.browse import positive_int
from lcm.operator.snapshot import (
    SnapshotInfo,
    dump_conversation,
    prune_snapshots,
    read_snapshot,
    restore_snapshot,
    write_snapshot,
)
from lcm.sessions import find_active
from lcm.timeutil import iso

if TYPE_CHECKING:
    from lcm.store import LcmStore

__all__ = ["RotatePlan", "RestorePlan", "plan_rotate", "apply_rotate", "plan_restore", "apply_restore",
           "backup_dir"]

#: compaction rounds at most in one rotation (each round is one bounded sweep)
MAX_ROUNDS = 20


@dataclass(frozen=True)
class RotatePlan(_Dict):
    conversation_id: int
    session_key: str
    context_items: int
    context_tokens_before: int
    #: the protected fresh tail, kept raw
    tail_items: int
    tail_tokens: int
    #: raw messages before the tail (what the leaf passes summarize) and their tokens
    compactable_messages: int
    compactable_tokens: int
    #: summaries before the tail already (condensation may merge them)
    prefix_summaries: int
    backup_dir: str
    keep_backups: int
    #: the context as planned, (type, id) per item: apply checks it is unchanged
    items: list[tuple[str, str]] = field(default_factory=list)
    applied: bool = False
    context_tokens_after: int = 0
    summaries_made: int = 0
    compaction_rounds: int = 0
    backup: SnapshotInfo | None = None
    pruned_backups: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def token_delta(self) -> int:
        return self.context_tokens_after - self.context_tokens_before if self.applied else 0

    def to_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        del out["items"]  # the check's data, not the operator's
        return {**out, "token_delta": self.token_delta}


@dataclass(frozen=True)
class RestorePlan(_Dict):
    file: str
    source_conversation_id: int
    source_session_key: str | None
    taken_at: str
    counts: dict[str, int]
    session_key: str
    applied: bool = False
    conversation_id: int | None = None
    warnings: list[str] = field(default_factory=list)


def backup_dir(store: LcmStore) -> Path:
    """Where ``rotate`` keeps its backups: ``rotateBackupDir``, else beside a SQLite database.

    Raises:
        LcmValidationError: no ``rotateBackupDir`` for a store without a data directory (an
            in-memory or PostgreSQL store).
    """
    if store.config.rotate_backup_dir:
        return Path(store.config.rotate_backup_dir).expanduser()
    if isinstance(store.db, Database) and not store.db.is_memory:
        return Path(store.db.path).resolve().parent / "lcm-rotate-backups"
    raise LcmValidationError("this store has no data directory for rotate's backups (an in-memory or PostgreSQL "
                             "store): set rotateBackupDir (LCM_ROTATE_BACKUP_DIR)", field="rotateBackupDir")  # fmt: skip


def plan_rotate(store: LcmStore, session_key: str) -> RotatePlan:
    """What rotating ``session_key``'s active conversation would do (module docstring). Writes nothing.

    Raises:
        LcmValidationError: no session key, a session that may not write, no backup directory.
        LcmNotFoundError: the key has no active conversation.
    """
    if not isinstance(session_key, str) or not session_key.strip():
        raise LcmValidationError("rotate needs a session_key", field="session_key")
    store._writable(session_key, "rotate")
    directory = backup_dir(store)
    with store.db.reading() as c:
        return _read(store, c, session_key, directory)


def _read(store: LcmStore, c: Connection, session_key: str, directory: Path) -> RotatePlan:
    row = find_active(c, session_key, None)
    if row is None:
        raise LcmNotFoundError(f"session {session_key!r} has no active conversation to rotate", id=session_key)
    conv = int(row["id"])
    items = load_items(c, conv)
    params = resolve_params(store.config, session_key)
    start = tail_start(items, params.fresh_tail_count, store.config.fresh_tail_max_tokens)
    head, tail = items[:start], items[start:]
    return RotatePlan(
        conv, session_key, len(items), sum(i.tokens for i in items), len(tail), sum(i.tokens for i in tail),
        sum(1 for i in head if i.type == "message"), sum(i.tokens for i in head if i.type == "message"),
        sum(1 for i in head if i.type == "summary"), str(directory), store.config.rotate_keep_backups,
        [(i.type, str(i.message_id if i.type == "message" else i.summary_id)) for i in items],
    )  # fmt: skip


def apply_rotate(store: LcmStore, plan: RotatePlan, *, max_rounds: int = MAX_ROUNDS) -> RotatePlan:
    """Back up, check the backup, compact to the fresh tail: one transaction (module docstring).

    Raises:
        ConcurrentChangeError: the context changed since the plan; nothing written.
        LcmValidationError: the plan was applied already, the backup could not be written
            (``field`` ``rotateBackupDir``) or did not read back.
    """
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    positive_int(max_rounds, "max_rounds")
    store._writable(plan.session_key, "rotate")
    directory = Path(plan.backup_dir)
    warnings: list[str] = []
    # The conversation's compaction lock first, for the whole rotation (as every compaction
    # takes it before its transactions): taken per round instead, a PostgreSQL compaction of
    # another process could slip in between rounds and wait on this transaction's rows while
    # this one waits on its lock, on two connections no deadlock detector relates.
    with store.compaction.lock(plan.conversation_id), store.db.atomic() as c:
        now = _read(store, c, plan.session_key, directory)
        if (now.conversation_id, now.items) != (plan.conversation_id, plan.items):
            raise ConcurrentChangeError(f"the context of conversation {plan.conversation_id} changed since the plan; "
                                        "plan again")  # fmt: skip
        conv, rows = dump_conversation(c, plan.conversation_id)
        try:
            path = write_snapshot(directory, conv, rows, iso(store.clock.now()))
        except OSError as exc:  # a full disk, a file where the directory should be, no permission
            raise LcmValidationError(f"cannot write the backup into {directory} ({exc.strerror or exc}); nothing was "
                                     "rotated. Free space or set rotateBackupDir", field="rotateBackupDir") from exc
        info, _, _ = read_snapshot(path)  # step 2 only on a backup that reads back whole
        if info.counts != {t: len(r) for t, r in rows.items()}:
            raise LcmValidationError(f"the backup {path} does not hold the conversation's rows", field="file")
        messages = len(rows["messages"])
        newest = max((int(m["id"]) for m in rows["messages"]), default=0)
        made = rounds = 0
        started = time.monotonic()
        while rounds < max_rounds:
            run = store.compaction.run(plan.conversation_id, plan.session_key, None, force=True, held=True)
            rounds += 1
            new = len(run.leaf_summaries) + len(run.condensed_summaries)
            made += new
            warnings += run.warnings
            if not new or run.stopped == "concurrent-change":
                break
        else:
            warnings.append(f"compaction still made summaries after {max_rounds} rounds; rotate again to go on")
        # the backed-up messages only: a host may ingest newer ones meanwhile (PostgreSQL)
        kept = int(c.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND id <= ?",
                             (plan.conversation_id, newest)).fetchone()[0])  # fmt: skip
        if kept != messages:  # never expected: compaction only adds summaries; kept as the promise's guard
            raise LcmValidationError(f"rotate would leave {kept} of {messages} messages; rolled back", field="plan")
        after = sum(i.tokens for i in load_items(c, plan.conversation_id))
    pruned = prune_snapshots(directory, plan.conversation_id, plan.keep_backups)
    store.events.write("rotate", conversation_id=plan.conversation_id, session_key=plan.session_key,
                       backup=str(path), tokens_before=plan.context_tokens_before, tokens_after=after,
                       summaries=made, rounds=rounds, pruned=len(pruned),
                       elapsed_ms=int((time.monotonic() - started) * 1000))  # fmt: skip
    return dataclasses.replace(plan, applied=True, context_tokens_after=after, summaries_made=made,
                               compaction_rounds=rounds, backup=info, pruned_backups=pruned, warnings=warnings)  # fmt: skip


def plan_restore(store: LcmStore, file: str | Path, *, session_key: str | None = None) -> RestorePlan:
    """Read and check a backup; say what restoring it as a new conversation would write.

    Raises:
        LcmValidationError: an unreadable or damaged backup (the message says how), or a
            ``session_key`` that already has an active conversation.
    """
    info, conv, _rows = read_snapshot(file)
    stamp = info.taken_at[:19].replace(":", "").replace("-", "")
    key = session_key if session_key is not None else f"restore:{info.conversation_id}:{stamp}"
    if not isinstance(key, str) or not key.strip():
        raise LcmValidationError("session_key must be a non-empty string", field="session_key")
    store._writable(key, "restore")
    if store.conversation(key) is not None:
        raise LcmValidationError(f"session {key!r} already has an active conversation; restore into a new key "
                                 "(--session-key)", field="session_key")  # fmt: skip
    return RestorePlan(str(file), info.conversation_id, conv.get("session_key"), info.taken_at, info.counts, key)


def apply_restore(store: LcmStore, plan: RestorePlan) -> RestorePlan:
    """Restore as planned: a new conversation with the backup's rows, in one transaction.

    Raises:
        LcmValidationError: the file changed since the plan, the key was taken meanwhile, or an
            inconsistent backup (a row pointing outside it); nothing written.
    """
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    info, conv, rows = read_snapshot(plan.file)
    if info.counts != plan.counts or info.conversation_id != plan.source_conversation_id:
        raise LcmValidationError(f"{plan.file} changed since the plan; plan again", field="file")
    with store.db.atomic() as c:
        if find_active(c, plan.session_key, None) is not None:
            raise LcmValidationError(f"session {plan.session_key!r} already has an active conversation",
                                     field="session_key")  # fmt: skip
        done = restore_snapshot(c, store.files, conv, rows, plan.session_key, iso(store.clock.now()))
    new, warnings = done.conversation_id, done.warnings
    store.events.write("restore", conversation_id=new, source=plan.source_conversation_id, file=plan.file,
                       messages=plan.counts.get("messages", 0))  # fmt: skip
    return dataclasses.replace(plan, applied=True, conversation_id=new, warnings=warnings)
