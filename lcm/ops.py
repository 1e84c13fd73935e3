"""Operations: status, doctor (read-only integrity checks), doctor clean, and the retention policy."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from datetime import datetime, timedelta

from lcm.conn import Connection, Handle, Row
from lcm.db import Database, sqlite_only
from lcm.errors import NOT_WRITABLE_ADVICE, read_only
from lcm.extract import FALLBACK_MARKER, TRUNCATED_MARKER
from lcm.failures import last_failure
from lcm.health import DEFAULT_TOP, Findings, worst_conversations
from lcm.largefiles import LEFTOVER_AGE_S, LargeFileStore
from lcm.migrations import applied_migrations
from lcm.models import CleanReport, DebtStatus, DoctorIssue, DoctorReport, RetentionResult, StatusReport
from lcm.sessions import glob_match
from lcm.timeutil import iso
from lcm.trigram import indexed_upto

log = logging.getLogger(__name__)

__all__ = ["status", "doctor", "doctor_clean", "apply_retention", "db_size", "version"]

_MAX_ISSUES = 500


def db_size(db: Database) -> int:
    if db.is_memory:
        page = db.scalar("PRAGMA page_size")
        return int(page) * int(db.scalar("PRAGMA page_count"))
    return sum(os.path.getsize(db.path + suffix) for suffix in ("", "-wal") if os.path.exists(db.path + suffix))


def version() -> str:
    """The version of the installed distribution lcm ships in (amem), or "unknown" uninstalled."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("amem")
    except PackageNotFoundError:
        return "unknown"


def status(db: Handle, files: LargeFileStore, *, size_bytes: int | None = None,
           migrations: list[str] | None = None) -> StatusReport:
    """Counts and health of the store; another engine (lcm.pg) passes its own size and migrations."""
    with db.reading() as c:
        conv = c.execute("SELECT count(*), coalesce(sum(active), 0) FROM conversations").fetchone()
        msgs = c.execute("SELECT count(*), coalesce(sum(token_count), 0) FROM messages").fetchone()
        by_depth = {str(r[0]): r[1] for r in c.execute("SELECT depth, count(*) FROM summaries GROUP BY depth ORDER BY depth")}
        ctx = c.execute(
            "SELECT coalesce(sum(coalesce(m.token_count, s.token_count)), 0) FROM context_items ci "
            "JOIN conversations cv ON cv.id = ci.conversation_id AND cv.active = 1 "
            "LEFT JOIN messages m ON m.id = ci.message_id LEFT JOIN summaries s ON s.summary_id = ci.summary_id"
        ).fetchone()[0]
        active_raw = c.execute(
            "SELECT coalesce(sum(m.token_count), 0) FROM messages m JOIN conversations cv "
            "ON cv.id = m.conversation_id AND cv.active = 1"
        ).fetchone()[0]
        # Each message once, however many summaries (leaf, re-summarised) cover it.
        covered = c.execute(
            "SELECT coalesce(sum(m.token_count), 0) FROM messages m WHERE EXISTS "
            "(SELECT 1 FROM summary_messages sm WHERE sm.message_id = m.id)").fetchone()[0]  # fmt: skip
        st = dict(c.execute("SELECT status, count(*) FROM summaries GROUP BY status").fetchall())
        broken = _broken_summaries(c, limit=None)
        lf = c.execute("SELECT count(*), coalesce(sum(size_bytes), 0) FROM large_files").fetchone()
        debt = c.execute("SELECT count(*) FROM compaction_debt WHERE status != 'running'").fetchone()[0]
        by_state = dict(c.execute("SELECT status, count(*) FROM compaction_debt GROUP BY status").fetchall())
        failure = last_failure(c)
    return StatusReport(
        path=db.path, size_bytes=db_size(sqlite_only(db, "status without size_bytes")) if size_bytes is None else size_bytes, conversations=conv[0],
        active_conversations=conv[1],
        archived_conversations=conv[0] - conv[1], messages=msgs[0], message_tokens=msgs[1],
        summaries=sum(by_depth.values()), summaries_by_depth=by_depth, context_tokens=ctx,
        compression_ratio=round(active_raw / ctx, 3) if ctx else 1.0,
        fallback_summaries=st.get("fallback", 0), truncated_summaries=st.get("truncated", 0),
        broken_summaries=len(broken), large_files=lf[0], large_file_bytes=lf[1], pending_debt=debt,
        migrations=applied_migrations(sqlite_only(db, "status without migrations")) if migrations is None else migrations,
        large_files_dir=str(files.base_dir), version=version(),
        last_failure=failure, debt=DebtStatus(by_state.get("pending", 0), by_state.get("running", 0),
                                              by_state.get("failed", 0)),
        summarized_source_tokens=int(covered),  # int(): PostgreSQL's sum() is a numeric
        summarized_coverage=round(int(covered) / int(msgs[1]), 4) if msgs[1] else 0.0,
        compression=f"1:{int(active_raw) / int(ctx):.1f}" if ctx else "1:1",
    )  # fmt: skip


def _broken_summaries(c: Connection, limit: int | None) -> list[tuple[str, str, int]]:
    """Summaries with no sources (a leaf without messages, a condensed node without children),
    and summaries whose sources no longer add up to what they were made from.

    A summary records ``descendant_count`` when it is written: a leaf the messages it covers,
    a condensed node the sum of its sources' counts plus one each. One lost edge (a
    ``summary_parents`` row) cut 341 messages off what ``expand`` reaches from the context,
    and every other check passed; the counts tell it.
    """
    sql = (
        "SELECT summary_id, 'leaf summary has no source messages', conversation_id FROM summaries s "
        "WHERE kind = 'leaf' AND NOT EXISTS (SELECT 1 FROM summary_messages sm WHERE sm.summary_id = s.summary_id) "
        "UNION ALL SELECT summary_id, 'condensed summary has no source summaries', conversation_id FROM summaries s "
        "WHERE kind = 'condensed' AND NOT EXISTS (SELECT 1 FROM summary_parents p WHERE p.summary_id = s.summary_id)"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    out = [(str(r[0]), str(r[1]), int(r[2])) for r in c.execute(sql)]
    counted = (
        "SELECT summary_id, conversation_id, descendant_count, found FROM (SELECT s.summary_id, s.conversation_id, "
        "s.descendant_count, CASE WHEN s.kind = 'leaf' THEN (SELECT count(*) FROM summary_messages sm "
        "WHERE sm.summary_id = s.summary_id) ELSE (SELECT coalesce(sum(ch.descendant_count + 1), 0) "
        "FROM summary_parents p JOIN summaries ch ON ch.summary_id = p.parent_summary_id "
        "WHERE p.summary_id = s.summary_id) END AS found FROM summaries s) t "
        "WHERE found > 0 AND found <> descendant_count"
    )
    if limit is not None:
        counted += f" LIMIT {int(limit)}"
    out += [(str(r[0]), f"summary was made from {r[2]} descendants and reaches {r[3]}: a source edge or "
             "row is missing (expand no longer reaches all it covers)", int(r[1])) for r in c.execute(counted)]
    return out


def _fts_in_sync(c: sqlite3.Connection, table: str, fts: str, rowid: str) -> tuple[bool, str]:
    # The message trigram index holds exactly the rows up to its watermark (lcm.trigram); the
    # pending rows above it are debt (status), not damage, and must not be in the index yet.
    upto = indexed_upto(c) if fts == "messages_tri" else None
    bound = "" if upto is None else f" AND t.{rowid} <= {upto}"
    missing = c.execute(
        f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM {fts}_docsize d WHERE d.id = t.{rowid}){bound}"
    ).fetchone()[0]
    extra = c.execute(
        f"SELECT count(*) FROM {fts}_docsize d WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.{rowid} = d.id)"
        + ("" if upto is None else f" OR d.id > {upto}")
    ).fetchone()[0]
    if missing or extra:
        return False, f"{missing} rows not indexed, {extra} index entries without a row"
    pending = upto is not None and c.execute(f"SELECT 1 FROM {table} WHERE {rowid} > ? LIMIT 1", (upto,)).fetchone()
    try:
        # rank 1 also compares the index with the table, which a pending tail would fail
        c.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', ?)", (0 if pending else 1,))
    except sqlite3.DatabaseError as exc:
        if read_only(exc):  # FTS5 runs its check as a write: not drift, a file this user may not write
            raise
        return False, f"FTS integrity-check failed: {exc}"
    return True, ""


#: findings reported without making the database unhealthy
_NOT_DAMAGE = ("fallback_summaries", "truncated_summaries", "rows_out_of_time_order", "large_files_not_checked",
               "context_out_of_time_order", "leftover_temp_files")  # fmt: skip

#: the context's messages older than a summary placed before them (portable SQL): a running
#: maximum of the summaries' ``latest_at`` over the items in context order
_OLDER_THAN_SUMMARIES = (
    "SELECT conversation_id, message_id FROM (SELECT ci.conversation_id, ci.message_id, m.created_at AS at, "
    "max(s.latest_at) OVER (PARTITION BY ci.conversation_id ORDER BY ci.ordinal "
    "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered FROM context_items ci "
    "LEFT JOIN messages m ON m.id = ci.message_id LEFT JOIN summaries s ON s.summary_id = ci.summary_id{where}) "
    "AS items WHERE message_id IS NOT NULL AND at < covered ORDER BY conversation_id")


def older_than_summaries(c: Connection, conversation_id: int | None = None) -> dict[int, list[int]]:
    """Conversation id -> the ids of its context's messages older than what a summary before them
    covers: a merged backup's messages (``lcm.operator.merge``) that could not go inside the
    summary of their time. They are read raw, just after it, until compaction summarizes them."""
    where, args = ("", ()) if conversation_id is None else (" WHERE ci.conversation_id = ?", (conversation_id,))
    found: dict[int, list[int]] = {}
    for conv, mid in c.execute(_OLDER_THAN_SUMMARIES.format(where=where), args):
        found.setdefault(int(conv), []).append(int(mid))
    return found


def doctor(db: Handle, files: LargeFileStore, *, top: int = DEFAULT_TOP, sqlite_checks: bool = True,
           files_configured: bool = True) -> DoctorReport:  # fmt: skip
    """Read-only checks. Errors mean broken; fallback/truncated summaries are warnings; info is neither.

    ``top``: how many of the worst conversations to rank (``lcm.health``; 0: none).
    ``sqlite_checks=False`` (lcm.pg) leaves out the SQLite file's own checks (``quick_check``,
    FTS5 drift, the time-order flags only SQLite keeps): a server keeps its pages and indexes
    itself, and the checks are not listed. ``files_configured=False``: this host has no
    large-files directory (lcm.pg without ``largeFilesDir``), so the stored files cannot be
    looked at here: one ``large_files_not_checked`` warning, not a missing file each.
    """
    issues: list[DoctorIssue] = []
    checks: dict[str, int] = {}
    per_conv: dict[int, Findings] = {}

    def add(check: str, severity: str, id: str, detail: str, conv: int | None = None) -> None:
        checks[check] = checks.get(check, 0) + 1
        if conv is not None:  # counted past the listing cap: the ranking sees every finding
            per_conv.setdefault(conv, Findings())[(severity, check)] += 1
        if len(issues) < _MAX_ISSUES:
            issues.append(DoctorIssue(check, severity, id, detail, conv))

    try:
        _doctor_checks(db, files, add, checks, sqlite_checks, files_configured)
    except db.errors as exc:
        # A damaged file (quick_check's findings above, when it got that far) fails the reads
        # that follow: the operator gets what was found and which checks could not run,
        # instead of the error that stopped them.
        failed = list(checks)[-1] if checks else "the first"
        add("checks_not_run", "error", "database", f"the check {failed!r} and those after it could not "
            f"read the database ({type(exc).__name__}: {exc}); restore it from a backup, or copy out "
            "what still reads")
    ok = not any(i.severity == "error" for i in issues) and all(
        checks.get(k, 0) == 0 for k in checks if k not in _NOT_DAMAGE
    )
    try:
        with db.reading() as c:
            worst = worst_conversations(c, per_conv, top)
    except db.errors:
        worst = []  # the ranking reads the damaged tables too; the findings above say why
    return DoctorReport(ok, checks, issues, sum(checks.values()) > len(issues), worst)


def _doctor_checks(db: Handle, files: LargeFileStore, add: Callable[..., None], checks: dict[str, int],
                   sqlite_checks: bool, files_configured: bool = True) -> None:
    """:func:`doctor`'s checks in order, each finding through ``add``; ``checks`` gets each
    check's name (count 0) as it starts, so a failure names the last one that ran."""
    with db.reading() as c:
        if sqlite_checks:
            checks["sqlite_quick_check"] = 0
            qc = [r[0] for r in c.execute("PRAGMA quick_check")]
            if qc != ["ok"]:
                for line in qc[:20]:
                    add("sqlite_quick_check", "error", "database", line)
        for check, status_value, marker in (("fallback_summaries", "fallback", FALLBACK_MARKER),
                                            ("truncated_summaries", "truncated", TRUNCATED_MARKER)):  # fmt: skip
            checks[check] = 0
            for r in c.execute(
                "SELECT summary_id, conversation_id, status FROM summaries WHERE status = ? OR instr(content, ?) > 0",
                (status_value, marker),
            ):
                add(check, "warning", r[0], f"summary is marked {status_value}", r[1])
        checks["broken_summaries"] = 0
        for sid, why, conv in _broken_summaries(c, limit=_MAX_ISSUES):
            add("broken_summaries", "error", sid, why, conv)
        checks["orphan_edges"] = 0
        for r in c.execute(
            "SELECT sm.summary_id, sm.message_id FROM summary_messages sm WHERE NOT EXISTS "
            "(SELECT 1 FROM summaries s WHERE s.summary_id = sm.summary_id) OR NOT EXISTS "
            "(SELECT 1 FROM messages m WHERE m.id = sm.message_id) LIMIT ?",
            (_MAX_ISSUES,),
        ):
            add("orphan_edges", "error", r[0], f"edge to message {r[1]} has a missing end")
        for r in c.execute(
            "SELECT p.summary_id, p.parent_summary_id FROM summary_parents p WHERE NOT EXISTS "
            "(SELECT 1 FROM summaries s WHERE s.summary_id = p.summary_id) OR NOT EXISTS "
            "(SELECT 1 FROM summaries s WHERE s.summary_id = p.parent_summary_id) LIMIT ?",
            (_MAX_ISSUES,),
        ):
            add("orphan_edges", "error", r[0], f"edge to summary {r[1]} has a missing end")
        checks["dangling_context_items"] = 0
        for r in c.execute(
            "SELECT ci.conversation_id, ci.ordinal, ci.item_type FROM context_items ci WHERE "
            "(ci.item_type = 'message' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = ci.message_id "
            " AND m.conversation_id = ci.conversation_id)) OR "
            "(ci.item_type = 'summary' AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.summary_id = ci.summary_id "
            " AND s.conversation_id = ci.conversation_id)) LIMIT ?",
            (_MAX_ISSUES,),
        ):
            add("dangling_context_items", "error", f"{r[0]}:{r[1]}", f"{r[2]} item points nowhere", r[0])
        checks["unreachable_messages"] = 0
        for r in c.execute(
            # a left join, not a correlated NOT EXISTS: context_items has no index on message_id,
            # and the subquery scanned it once per message (over 10 min at 100k messages on
            # SQLite); the join is linear on both engines (lcm.pg.copy.REFERENCE_CHECKS)
            "SELECT m.id, m.conversation_id FROM messages m JOIN conversations cv ON cv.id = m.conversation_id "
            "LEFT JOIN context_items ci ON ci.message_id = m.id WHERE ci.conversation_id IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM summary_messages sm WHERE sm.message_id = m.id) LIMIT ?",
            (_MAX_ISSUES,),
        ):
            add("unreachable_messages", "error", f"msg_{r[0]}", "message is neither in context nor under a summary", r[1])
        # Not damage: what a merge brought in that is older than a summary here (nothing lost)
        checks["context_out_of_time_order"] = 0
        for conv, late in older_than_summaries(c).items():
            add("context_out_of_time_order", "info", str(conv),
                f"{len(late)} message(s) of the context are older than what a summary before them covers (a "
                "backup merged in: amem restore --merge); they are read raw after that summary, in "
                "their time order among the raw messages, until compaction summarizes them", conv)
        if sqlite_checks:
            assert isinstance(c, sqlite3.Connection), "sqlite_checks on a store that is not SQLite"
            checks["fts_out_of_sync"] = 0
            for table, fts, rowid in (("messages", "messages_fts", "id"), ("messages", "messages_tri", "id"),
                                      ("summaries", "summaries_fts", "pk"), ("summaries", "summaries_tri", "pk")):  # fmt: skip
                try:
                    ok, detail = _fts_in_sync(c, table, fts, rowid)
                except sqlite3.DatabaseError as exc:  # read_only: the row counts agreed; said once
                    ok, detail = True, ""
                    if "not_writable" not in checks:
                        checks["not_writable"] = 0
                        add("not_writable", "error", "database", f"{db.path} cannot be written ({exc}): "
                            f"ingest, compaction and the nightly job fail on it; {NOT_WRITABLE_ADVICE} (the "
                            "full-text indexes' own integrity check writes, so it did not run)")
                if not ok:
                    add("fts_out_of_sync", "error", fts, detail)
            # Not damage: an import of older rows makes newest-first grep take its exact slower
            # path. SQLite's own flags (PostgreSQL reads its time index and never sets them; a
            # copied store's row would report SQLite's old state), so absent there.
            checks["rows_out_of_time_order"] = 0
            for (table,) in c.execute("SELECT name FROM lcm_time_order WHERE out_of_order = 1 ORDER BY name"):
                add("rows_out_of_time_order", "info", table,
                    f"{table} were stored out of time order (an import of older rows); newest-first "
                    "grep checks its shortcut against the time index, which costs more on common terms")
        if not files_configured:
            stored = int(c.execute("SELECT count(*) FROM large_files").fetchone()[0])
            checks["large_files_not_checked"] = 0
            if stored:
                add("large_files_not_checked", "warning", "largeFilesDir",
                    f"{stored} large file(s) are stored under the largeFilesDir of the hosts that wrote them; this "
                    "host has none configured, so they were not checked (a configuration to fix here, not damage): "
                    "set largeFilesDir (LCM_LARGE_FILES_DIR) to the directory those hosts share")  # fmt: skip
            return
        checks["missing_files"] = 0
        rows = c.execute("SELECT file_id, storage_path, conversation_id FROM large_files").fetchall()
    for fid, rel, conv in rows:
        try:
            present = files.resolve(rel).exists()
        except PermissionError:
            present = False
        if not present:
            add("missing_files", "error", fid, f"file {rel} is missing or outside the data directory", conv)
    # Not damage: a write killed at its rename failed as a whole (no row names its file); what
    # it leaves is its bytes on disk, which nothing else would ever report or delete
    checks["leftover_temp_files"] = 0
    for rel, size in files.leftovers():
        add("leftover_temp_files", "warning", rel, f"a large-file write killed before its rename left {rel} "
            f"({size} bytes, over {LEFTOVER_AGE_S / 3600:g} h old, no writer holds it); no row names it and "
            "nothing was lost: `amem lcm doctor --clean --apply` deletes it")


def _conv_summary(c: Connection, r: Row) -> dict[str, object]:
    n = c.execute("SELECT count(*), coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ?", (r["id"],)).fetchone()
    return {
        "conversation_id": r["id"], "session_key": r["session_key"], "active": bool(r["active"]),
        "archived_at": r["archived_at"], "archive_cause": r["archive_cause"], "messages": n[0], "tokens": n[1],
    }  # fmt: skip


def doctor_clean(db: Handle, files: LargeFileStore, *, apply: bool = False) -> CleanReport:
    """Report of high-confidence cleanup candidates; nothing is deleted but, with ``apply``,
    the leftover ``.tmp`` files of killed large-file writes (``removed_files``): no row can
    name them, where an orphan file may be a write whose transaction is about to commit."""
    with db.reading() as c:
        convs = c.execute("SELECT * FROM conversations ORDER BY id").fetchall()
        subagent = [_conv_summary(c, r) for r in convs if not r["active"] and r["session_key"]
                    and glob_match("agent:*:subagent:**", r["session_key"])]  # fmt: skip
        cron = [_conv_summary(c, r) for r in convs if r["session_key"] and glob_match("agent:*:cron:**", r["session_key"])]
        # Only archived ones: an active conversation without a session key is a live session
        # its host names by session id alone, not an orphan (a low-confidence candidate).
        null_key = [_conv_summary(c, r) for r in convs if not r["session_key"] and not r["active"]]
        empty = [
            _conv_summary(c, r)
            for r in convs
            if not r["active"] and not c.execute("SELECT 1 FROM messages WHERE conversation_id = ? LIMIT 1", (r["id"],)).fetchone()
        ]
        recorded = {r[0] for r in c.execute("SELECT storage_path FROM large_files")}
    leftover = [rel for rel, _size in files.leftovers()]
    removed = files.remove_leftovers() if apply else []
    on_disk = set(files.list_files())
    orphan = sorted(on_disk - recorded)
    missing = sorted(recorded - on_disk)
    totals = {
        "archived_subagent": len(subagent), "cron": len(cron), "null_key": len(null_key),
        "empty_archived": len(empty), "orphan_files": len(orphan), "missing_files": len(missing),
        "candidate_messages": sum(int(str(x["messages"])) for x in [*subagent, *cron, *null_key]),
        "leftover_files": len(leftover),
    }  # fmt: skip
    return CleanReport(subagent, cron, null_key, empty, orphan, missing, totals, leftover, removed)


def _delete_conversation(c: Connection, conv_id: int, files: LargeFileStore, doomed_files: list[str]) -> int:
    n = c.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv_id,)).fetchone()[0]
    sids = "SELECT summary_id FROM summaries WHERE conversation_id = ?"
    c.execute(f"DELETE FROM summary_messages WHERE summary_id IN ({sids})", (conv_id,))
    c.execute(f"DELETE FROM summary_parents WHERE summary_id IN ({sids})", (conv_id,))
    c.execute("DELETE FROM context_items WHERE conversation_id = ?", (conv_id,))
    c.execute("DELETE FROM summaries WHERE conversation_id = ?", (conv_id,))
    c.execute("DELETE FROM messages WHERE conversation_id = ?", (conv_id,))
    doomed_files += [r[0] for r in c.execute("SELECT storage_path FROM large_files WHERE conversation_id = ?", (conv_id,))]
    c.execute("DELETE FROM large_files WHERE conversation_id = ?", (conv_id,))
    c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conv_id,))
    c.execute("DELETE FROM lcm_ingest_batches WHERE conversation_id = ?", (conv_id,))
    c.execute("DELETE FROM lcm_failures WHERE conversation_id = ?", (conv_id,))  # reasons may quote it
    c.execute("DELETE FROM conversations WHERE id = ?", (conv_id,))
    return int(n)


def apply_retention(
    db: Handle, files: LargeFileStore, *, max_age_days: int, max_bytes: int, now: datetime, dry_run: bool = False,
    size_of: Callable[[], int] | None = None, reclaim: Callable[[], None] | None = None,
) -> RetentionResult:
    """Delete archived conversations older than ``max_age_days``, then oldest-archived first while
    the database is over ``max_bytes``. Active conversations are never touched; 0 disables a rule.

    ``size_of`` and ``reclaim`` are another engine's (lcm.pg) size and space reclaim; SQLite's
    are the file size and ``incremental_vacuum`` plus a WAL checkpoint."""
    size_of = size_of or (lambda: db_size(sqlite_only(db, "apply_retention without size_of")))
    before = size_of()
    reasons: dict[str, str] = {}
    with db.reading() as c:
        archived = c.execute(
            "SELECT cv.id, cv.archived_at, (SELECT coalesce(sum(length(content)), 0) FROM messages m "
            "WHERE m.conversation_id = cv.id) + (SELECT coalesce(sum(length(content)), 0) FROM summaries s "
            "WHERE s.conversation_id = cv.id) AS bytes FROM conversations cv WHERE cv.active = 0 ORDER BY cv.archived_at, cv.id"
        ).fetchall()
    if max_age_days > 0:
        cutoff = iso(now - timedelta(days=max_age_days))
        for r in archived:
            if r["archived_at"] and r["archived_at"] < cutoff:
                reasons[str(r["id"])] = f"archived before {cutoff}"
    if max_bytes > 0 and before > max_bytes:
        # Estimated: text bytes times ~3 for the two full-text indexes and row overhead.
        excess = before - max_bytes
        for r in archived:
            if excess <= 0:
                break
            if str(r["id"]) not in reasons:
                reasons[str(r["id"])] = f"database over {max_bytes} bytes"
            excess -= int(r["bytes"]) * 3
    doomed = [int(k) for k in reasons]
    deleted_messages = 0
    doomed_files: list[str] = []
    if not dry_run and doomed:
        with db.atomic() as c:
            for conv_id in doomed:
                deleted_messages += _delete_conversation(c, conv_id, files, doomed_files)
        for rel in doomed_files:
            files.delete(rel)
        if reclaim is not None:
            reclaim()
        else:
            lite = sqlite_only(db, "apply_retention without reclaim")
            with lite.lock:
                lite.conn.execute("PRAGMA incremental_vacuum")
                if not lite.is_memory:
                    lite.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    elif dry_run:
        with db.reading() as c:
            for conv_id in doomed:
                deleted_messages += c.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv_id,)).fetchone()[0]
    return RetentionResult(dry_run, doomed, deleted_messages, len(doomed_files), before, size_of(), reasons)
