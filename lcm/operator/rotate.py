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
the backup would go. :func:`apply_rotate` ``(store, plan) -> RotatePlan``, under the
conversation's compaction lock (no other compaction of it meanwhile):

- reads the conversation in one short transaction that first checks the context is as planned
  (``ConcurrentChangeError`` otherwise), writes the backup and reads it back;
- compacts a **private in-memory copy** of the conversation (the snapshot's rows) with the
  store's config, model and clock, through that copy's compaction driver: the summarizer's
  calls, minutes with a model, hold no lock of the live store, so the host's turns (ingest,
  assemble) and other sessions go on meanwhile;
- writes the result back in **one transaction**: the copy's new summaries and edges, and its
  context in place of the planned items, after checking the planned items are still the
  context's first ones (a turn ingested meanwhile stays after them) and, at the end, that every
  backed-up message is still there. A failure anywhere leaves the live conversation as it was
  (a backup already checked stays).

:func:`plan_restore` / :func:`apply_restore` bring a backup back as a **new** conversation (its
own session key, ``restore:<id>:<time>`` by default): restoring over the live one would throw
away what was said since the backup.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcm.compaction import Item, load_items, resolve_params, tail_start
from lcm.conn import Connection
from lcm.db import Database
from lcm.errors import ConcurrentChangeError, LcmNotFoundError, LcmValidationError
from lcm.models import _Dict
from lcm.operator.browse import positive_int
from lcm.operator.snapshot import (
    TABLES,
    Restored,
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
    """Back up, check the backup, compact a copy, write the result back in one transaction
    (module docstring).

    Raises:
        ConcurrentChangeError: the planned context changed (before the backup, or while the
            copy was compacted); the live conversation is as it was.
        LcmValidationError: the plan was applied already, the backup could not be written
            (``field`` ``rotateBackupDir``) or did not read back.
    """
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    positive_int(max_rounds, "max_rounds")
    store._writable(plan.session_key, "rotate")
    directory = Path(plan.backup_dir)
    started = time.monotonic()
    # The conversation's compaction lock for the whole rotation, as every compaction of it
    # takes it: no other compaction of this conversation (another process's, an after-turn
    # payment) can change the context between the backup and the write-back. Ingest and reads
    # never wait for it.
    with store.compaction.lock(plan.conversation_id):
        # 1. the backup of the context as planned, read in one short transaction (a consistent
        #    state on both engines), written, and read back whole before anything changes
        with store.db.atomic() as c:
            _check(store, c, plan, directory, exact=True)
            conv, rows = dump_conversation(c, plan.conversation_id)
        try:
            path = write_snapshot(directory, conv, rows, iso(store.clock.now()))
        except OSError as exc:  # a full disk, a file where the directory should be, no permission
            raise LcmValidationError(f"cannot write the backup into {directory} ({exc.strerror or exc}); nothing was "
                                     "rotated. Free space or set rotateBackupDir", field="rotateBackupDir") from exc
        info, _, _ = read_snapshot(path)
        if info.counts != {t: len(r) for t, r in rows.items()}:
            raise LcmValidationError(f"the backup {path} does not hold the conversation's rows", field="file")
        # 2. the compaction, by the compaction driver of a private in-memory copy: the
        #    summarizer's calls (minutes with a model) hold no lock of the live store
        copy = _compact_copy(store, conv, rows, plan.session_key, max_rounds)
        # 3. one transaction: the copy's new summaries and context replace the planned items
        with store.db.atomic() as c:
            live = _check(store, c, plan, directory, exact=False)
            _write_back(c, plan.conversation_id, copy, live[:len(plan.items)])
            newest = max((int(m["id"]) for m in rows["messages"]), default=0)
            kept = int(c.execute("SELECT count(*) FROM messages WHERE conversation_id = ? AND id <= ?",
                                 (plan.conversation_id, newest)).fetchone()[0])  # fmt: skip
            if kept != len(rows["messages"]):  # never expected; the promise's guard
                raise LcmValidationError(f"rotate would leave {kept} of {len(rows['messages'])} messages; rolled back",
                                         field="plan")  # fmt: skip
            after = sum(i.tokens for i in load_items(c, plan.conversation_id))
    for kind, reason in copy.failures:  # a summary the model did not write, as compaction records it
        store.failures.record(kind, reason, plan.conversation_id)
    pruned = prune_snapshots(directory, plan.conversation_id, plan.keep_backups)
    store.events.write("rotate", conversation_id=plan.conversation_id, session_key=plan.session_key,
                       backup=str(path), tokens_before=plan.context_tokens_before, tokens_after=after,
                       summaries=[s["summary_id"] for s in copy.summaries], rounds=copy.rounds, pruned=len(pruned),
                       elapsed_ms=int((time.monotonic() - started) * 1000))  # fmt: skip
    return dataclasses.replace(plan, applied=True, context_tokens_after=after, summaries_made=len(copy.summaries),
                               compaction_rounds=copy.rounds, backup=info, pruned_backups=pruned,
                               warnings=copy.warnings)  # fmt: skip


def _check(store: LcmStore, c: Connection, plan: RotatePlan, directory: Path, *, exact: bool) -> list[Item]:
    """The live context, checked against the plan: the same items (``exact``), or the planned
    items first and only newer ones after them (a host's turns ingested meanwhile)."""
    now = _read(store, c, plan.session_key, directory)
    same = now.items == plan.items if exact else now.items[:len(plan.items)] == plan.items
    if now.conversation_id != plan.conversation_id or not same:
        raise ConcurrentChangeError(f"the context of conversation {plan.conversation_id} changed since the plan; "
                                    "plan again")  # fmt: skip
    return load_items(c, plan.conversation_id)


@dataclass
class _Copy:
    """What compacting the private copy made, in the copy's ids (``restored`` maps the live ones)."""

    restored: Restored
    summaries: list[dict[str, Any]]
    leaf_edges: list[tuple[str, int, int]]
    parent_edges: list[tuple[str, str, int]]
    context: list[tuple[int, str, int | None, str | None]]
    rounds: int
    warnings: list[str]
    failures: list[tuple[str, str]]


def _compact_copy(store: LcmStore, conv: dict[str, Any], rows: dict[str, list[dict[str, Any]]], session_key: str,
                  max_rounds: int) -> _Copy:  # fmt: skip
    """Forced compaction rounds, until one makes no summary, on an in-memory copy of the
    conversation with the store's config, model and clock."""
    from lcm.store import LcmStore as Store  # at call time: lcm.store is the package's entry

    cfg = dataclasses.replace(store.config, database_path="", log_file_enabled=False, large_files_dir="")
    with Store(":memory:", cfg, llm=store.llm, clock=store.clock) as scratch:
        with scratch.db.atomic() as c:
            restored = restore_snapshot(c, scratch.files, conv, rows, session_key, iso(store.clock.now()))
        cid = restored.conversation_id
        rounds, warnings = 0, []
        while rounds < max_rounds:
            run = scratch.compaction.run(cid, session_key, None, force=True)
            rounds += 1
            warnings += run.warnings
            if not (run.leaf_summaries or run.condensed_summaries):
                break
        else:
            warnings.append(f"compaction still made summaries after {max_rounds} rounds; rotate again to go on")
        old = set(restored.summary_ids.values())
        with scratch.db.reading() as c:
            cols, _ = TABLES["summaries"]
            made = [dict(zip(cols, tuple(r))) for r in c.execute(
                f"SELECT {', '.join(cols)} FROM summaries WHERE conversation_id = ? ORDER BY pk", (cid,))]  # fmt: skip
            made = [s for s in made if s["summary_id"] not in old]
            ids = [s["summary_id"] for s in made]
            q = ",".join("?" * len(ids))
            leaf_edges = [(str(r[0]), int(r[1]), int(r[2])) for r in c.execute(
                f"SELECT summary_id, message_id, ordinal FROM summary_messages WHERE summary_id IN ({q})", ids)] if ids else []
            parent_edges = [(str(r[0]), str(r[1]), int(r[2])) for r in c.execute(
                f"SELECT summary_id, parent_summary_id, ordinal FROM summary_parents WHERE summary_id IN ({q})", ids)] if ids else []
            context = [(int(r[0]), str(r[1]), r[2], r[3]) for r in c.execute(
                "SELECT ordinal, item_type, message_id, summary_id FROM context_items WHERE conversation_id = ? "
                "ORDER BY ordinal", (cid,))]  # fmt: skip
            failures = [(str(r[0]), str(r[1])) for r in c.execute(
                "SELECT kind, reason FROM lcm_failures WHERE conversation_id = ? ORDER BY id", (cid,))]  # fmt: skip
    return _Copy(restored, made, leaf_edges, parent_edges, context, rounds, warnings, failures)


def _write_back(c: Connection, conversation_id: int, copy: _Copy, planned: list[Item]) -> None:
    """Inside the caller's transaction: the copy's new summaries with their edges (in the live
    ids), and the copy's context in place of the planned items. The copy kept the live
    ordinals (a summary takes its first source's), so newer items after them stay as they are."""
    live_msg = {new: old for old, new in copy.restored.message_ids.items()}
    live_sum = {new: old for old, new in copy.restored.summary_ids.items()}
    live_sum.update({s["summary_id"]: s["summary_id"] for s in copy.summaries})  # new ids are random: kept
    c.executemany(
        "INSERT INTO summaries(summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at, "
        "descendant_count, descendant_token_count, source_message_token_count, model, status, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(s["summary_id"], conversation_id, s["kind"], s["depth"], s["content"], s["token_count"], s["earliest_at"],
          s["latest_at"], s["descendant_count"], s["descendant_token_count"], s["source_message_token_count"],
          s["model"], s["status"], s["created_at"]) for s in copy.summaries])  # fmt: skip
    c.executemany("INSERT INTO summary_messages(summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                  [(sid, live_msg[m], n) for sid, m, n in copy.leaf_edges])  # fmt: skip
    c.executemany("INSERT INTO summary_parents(summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                  [(sid, live_sum[p], n) for sid, p, n in copy.parent_edges])  # fmt: skip
    if planned:
        q = ",".join("?" * len(planned))
        c.execute(f"DELETE FROM context_items WHERE conversation_id = ? AND ordinal IN ({q})",
                  (conversation_id, *[it.ordinal for it in planned]))  # fmt: skip
    c.executemany("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id, summary_id) "
                  "VALUES (?, ?, ?, ?, ?)",
                  [(conversation_id, o, t, live_msg[m] if m is not None else None,
                    live_sum[s] if s is not None else None) for o, t, m, s in copy.context])  # fmt: skip
    if copy.summaries:  # compacted: the debt it owed is paid, as the compaction driver clears it
        c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conversation_id,))


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
