"""Conversation snapshots: the rolling backup ``rotate`` writes, its check, and the restore of one.

A snapshot is one conversation's transcript backing as gzip-compressed JSON lines, owner-only
(directory 0700, file 0600, a symbolic link in its place refused):

- line 1, the header: ``{"format": "amem-lcm-conversation", "version": 1, "conversation": {row},
  "taken_at": ISO}``;
- one line per row, ``{"table": T, "row": {column: value}}``, for the tables of
  :data:`TABLES` in that order (messages, summaries, their edges, context items, large-file
  records; the large files' contents stay where they are, under ``largeFilesDir``);
- the trailer: ``{"end": true, "counts": {table: n}, "sha256": hex}``, the digest over the
  row lines' bytes. A file without its trailer, with other counts or another digest was cut or
  changed: :func:`verify_snapshot` refuses it, naming the problem.

API: :func:`dump_conversation` (rows over an open connection), :func:`write_snapshot`,
:func:`verify_snapshot`, :func:`prune_snapshots` (keep the newest N of a conversation),
:func:`read_snapshot`, :func:`restore_snapshot` (into a new conversation, one transaction).
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amem.kernel.files import open_private, private_dir
from lcm.conn import Connection
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.largefiles import LargeFileStore
from lcm.models import _Dict

__all__ = ["TABLES", "FORMAT", "SnapshotInfo", "Restored", "dump_conversation", "write_snapshot",
           "verify_snapshot", "prune_snapshots", "read_snapshot", "restore_snapshot", "snapshot_name"]

FORMAT = "amem-lcm-conversation"
VERSION = 1
_CONV_COLS = ("id", "session_key", "session_id", "active", "archived_at", "archive_cause", "title", "created_at",
              "updated_at")  # fmt: skip
#: each table of a snapshot, its columns, and the query of one conversation's rows (in order)
TABLES: dict[str, tuple[tuple[str, ...], str]] = {
    "messages": (("id", "seq", "role", "content", "token_count", "identity_hash", "stable_event_key", "file_id",
                  "created_at", "name", "source_role"), "SELECT {cols} FROM messages WHERE conversation_id = ? ORDER BY seq"),
    "summaries": (("summary_id", "kind", "depth", "content", "token_count", "earliest_at", "latest_at",
                   "descendant_count", "descendant_token_count", "source_message_token_count", "model", "status",
                   "created_at"), "SELECT {cols} FROM summaries WHERE conversation_id = ? ORDER BY pk"),
    "summary_messages": (("summary_id", "message_id", "ordinal"),
                         "SELECT {cols} FROM summary_messages x JOIN summaries s USING (summary_id) "
                         "WHERE s.conversation_id = ? ORDER BY s.pk, x.ordinal"),
    "summary_parents": (("summary_id", "parent_summary_id", "ordinal"),
                        "SELECT {cols} FROM summary_parents x JOIN summaries s USING (summary_id) "
                        "WHERE s.conversation_id = ? ORDER BY s.pk, x.ordinal"),
    "context_items": (("ordinal", "item_type", "message_id", "summary_id"),
                      "SELECT {cols} FROM context_items WHERE conversation_id = ? ORDER BY ordinal"),
    "large_files": (("file_id", "message_id", "name", "mime_type", "size_bytes", "token_count", "storage_path",
                     "exploration_summary", "created_at"),
                    "SELECT {cols} FROM large_files WHERE conversation_id = ? ORDER BY file_id"),
}
_NAME = re.compile(r"^conversation-(\d+)-(\d{8}T\d{6}Z)(?:-(\d+))?\.jsonl\.gz\Z")


@dataclass(frozen=True)
class SnapshotInfo(_Dict):
    """A snapshot file that was read whole and matched its trailer."""

    path: str
    conversation_id: int
    taken_at: str
    counts: dict[str, int]
    size_bytes: int


@dataclass(frozen=True)
class Restored:
    """What :func:`restore_snapshot` wrote: the conversation, its warnings, and the new id of
    each message (by the snapshot's id) and of each summary (by the snapshot's summary id)."""

    conversation_id: int
    warnings: list[str]
    message_ids: dict[int, int]
    summary_ids: dict[str, str]


def _qualified(table: str, cols: tuple[str, ...]) -> str:
    # the edge tables join summaries: their own columns are read through their alias
    return ", ".join(f"x.{c}" for c in cols) if table.startswith("summary_") else ", ".join(cols)


def dump_conversation(c: Connection, conversation_id: int) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """The conversation row and its rows of each table, read over ``c`` (one consistent state
    when ``c`` is inside the caller's transaction).

    Raises:
        LcmNotFoundError: no such conversation.
    """
    row = c.execute(f"SELECT {', '.join(_CONV_COLS)} FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    if row is None:
        raise LcmNotFoundError(f"no conversation {conversation_id}", id=str(conversation_id))
    conv = dict(zip(_CONV_COLS, tuple(row)))
    rows: dict[str, list[dict[str, Any]]] = {}
    # Messages last: on PostgreSQL each statement sees what committed before it, and a host may
    # ingest meanwhile; messages only grow, so every message the items and edges read before
    # point at is there (a newer one is kept too, outside the context).
    for table in (*[t for t in TABLES if t != "messages"], "messages"):
        cols, sql = TABLES[table]
        found = c.execute(sql.format(cols=_qualified(table, cols)), (conversation_id,)).fetchall()
        rows[table] = [dict(zip(cols, tuple(r))) for r in found]
    return conv, {t: rows[t] for t in TABLES}


def snapshot_name(conversation_id: int, stamp: str, n: int = 0) -> str:
    """The file name of a snapshot: sorting the names of one conversation sorts them by age."""
    return f"conversation-{conversation_id}-{stamp}{f'-{n}' if n else ''}.jsonl.gz"


def _private_dir(path: Path) -> None:
    """``path`` (and missing parents) created 0700 (``amem.kernel.files``); an existing one
    must not be a link."""
    if path.is_symlink():
        raise LcmValidationError(f"the backup directory {path} is a symbolic link; amem writes backups only "
                                 "into a real directory", field="rotateBackupDir")  # fmt: skip
    private_dir(path)


def write_snapshot(directory: Path, conv: Mapping[str, Any], rows: Mapping[str, list[dict[str, Any]]],
                   taken_at: str) -> Path:  # fmt: skip
    """Write one snapshot into ``directory`` (created 0700) as a new 0600 file; returns its path.

    The file is written under a temporary name, fsynced and renamed, so a reader (and
    :func:`prune_snapshots`) never sees half of it.
    """
    _private_dir(directory)
    stamp = re.sub(r"[^0-9T]", "", taken_at[:19]) + "Z"
    n = 0
    while (directory / snapshot_name(int(conv["id"]), stamp, n)).exists():
        n += 1  # two rotations in one second (or under a test's fixed clock)
    final = directory / snapshot_name(int(conv["id"]), stamp, n)
    tmp = directory / f".{final.name}.{secrets.token_hex(4)}.tmp"
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    try:
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
                head = {"format": FORMAT, "version": VERSION, "conversation": dict(conv), "taken_at": taken_at}
                out.write(_line(head))
                for table in TABLES:
                    counts[table] = len(rows.get(table, []))
                    for r in rows.get(table, []):
                        line = _line({"table": table, "row": r})
                        digest.update(line)
                        out.write(line)
                out.write(_line({"end": True, "counts": counts, "sha256": digest.hexdigest()}))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def _line(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _lines(path: Path) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LcmValidationError(f"no backup file {path}", field="file") from None
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror})"
        raise LcmValidationError(f"the backup {path} {why}", field="file") from None
    try:
        with os.fdopen(fd, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as src:
            for n, line in enumerate(src, 1):
                try:
                    obj = json.loads(line)
                except ValueError:
                    raise LcmValidationError(f"{path}: line {n} is not JSON; the backup is damaged", field="file") from None
                if not isinstance(obj, dict):
                    raise LcmValidationError(f"{path}: line {n} is not a JSON object", field="file")
                yield n, line, obj
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise LcmValidationError(f"{path} is not a readable gzip file ({type(exc).__name__}: {exc}); the backup is "
                                 "damaged or cut short", field="file") from None  # fmt: skip


def read_snapshot(path: str | Path) -> tuple[SnapshotInfo, dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Read a snapshot whole and check it against its trailer: (info, conversation row, rows).

    Raises:
        LcmValidationError: the file is missing, not gzip, not this format, cut short (no
            trailer), or its counts or digest do not match; the message says which.
    """
    path = Path(path)
    conv: dict[str, Any] | None = None
    taken_at = ""
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
    digest = hashlib.sha256()
    trailer: dict[str, Any] | None = None
    for n, line, obj in _lines(path):
        if trailer is not None:
            raise LcmValidationError(f"{path}: line {n} follows the trailer", field="file")
        if n == 1:
            if obj.get("format") != FORMAT or obj.get("version") != VERSION or not isinstance(obj.get("conversation"), dict):
                raise LcmValidationError(f"{path} is not an lcm conversation backup (format {FORMAT} v{VERSION})",
                                         field="file")  # fmt: skip
            conv, taken_at = obj["conversation"], str(obj.get("taken_at", ""))
        elif obj.get("end") is True:
            trailer = obj
        elif obj.get("table") in rows and isinstance(obj.get("row"), dict):
            digest.update(line)
            rows[str(obj["table"])].append(obj["row"])
        else:
            raise LcmValidationError(f"{path}: line {n} is neither a row of {list(TABLES)} nor the trailer", field="file")
    if conv is None:
        raise LcmValidationError(f"{path} is empty", field="file")
    if trailer is None:
        raise LcmValidationError(f"{path} has no trailer: the backup was cut short", field="file")
    counts = {t: len(r) for t, r in rows.items()}
    if trailer.get("counts") != counts:
        raise LcmValidationError(f"{path}: the trailer counts {trailer.get('counts')} rows, the file holds {counts}",
                                 field="file")  # fmt: skip
    if trailer.get("sha256") != digest.hexdigest():
        raise LcmValidationError(f"{path}: the rows do not match the trailer's digest; the backup was changed",
                                 field="file")  # fmt: skip
    info = SnapshotInfo(str(path), int(conv["id"]), taken_at, counts, path.stat().st_size)
    return info, conv, rows


def verify_snapshot(path: str | Path, expected: Mapping[str, int] | None = None) -> SnapshotInfo:
    """:func:`read_snapshot`'s check; with ``expected`` the counts must also be those.

    Raises:
        LcmValidationError: as :func:`read_snapshot`, or other counts than ``expected``.
    """
    info, _conv, _rows = read_snapshot(path)
    if expected is not None and dict(expected) != info.counts:
        raise LcmValidationError(f"{path} holds {info.counts}, the conversation {dict(expected)}", field="file")
    return info


def prune_snapshots(directory: Path, conversation_id: int, keep: int) -> list[str]:
    """Delete all but the newest ``keep`` snapshots of ``conversation_id`` in ``directory``;
    returns the deleted paths. Other files (another conversation's, an operator's) are left."""
    mine: list[tuple[str, int, Path]] = []
    for p in directory.iterdir():
        m = _NAME.match(p.name)
        if m and int(m[1]) == conversation_id and not p.is_symlink():
            mine.append((m[2], int(m[3] or 0), p))  # (time stamp, same-second counter): oldest first
    mine.sort()
    gone = [p for *_, p in (mine[:-keep] if keep > 0 else mine)]
    for p in gone:
        p.unlink(missing_ok=True)
    return [str(p) for p in gone]


def restore_snapshot(c: Connection, files: LargeFileStore, conv: Mapping[str, Any],
                     rows: Mapping[str, list[dict[str, Any]]], session_key: str, now: str) -> Restored:  # fmt: skip
    """Insert a snapshot's rows as a new conversation of ``session_key`` inside the caller's
    transaction; returns the new conversation id, warnings and the id maps (old to new).

    Messages and summaries get new ids (the originals may still be in the store); the edges
    and the context items follow them. A large file whose record is still in the store stays
    stored once, owned by its conversation (as a transplant does); one whose record is gone but
    whose content is still on disk is recorded again for the new conversation; one whose
    content is gone is a warning (the message keeps its reference text).

    Raises:
        LcmValidationError: a row points at a message or summary the snapshot does not hold.
    """
    cur = c.execute("INSERT INTO conversations(session_key, session_id, active, title, created_at, updated_at) "
                    "VALUES (?, NULL, 1, ?, ?, ?)", (session_key, conv.get("title"), now, now))  # fmt: skip
    new = int(cur.lastrowid or 0)
    if not new:  # PostgreSQL's cursor has no lastrowid: the key's active row is the new one
        new = int(c.execute("SELECT id FROM conversations WHERE session_key = ? AND active = 1",
                            (session_key,)).fetchone()[0])  # fmt: skip
    msgs = rows["messages"]
    # a snapshot written before speakers were kept (migration 0014) has no name or source_role
    c.executemany("INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, "
                  "stable_event_key, file_id, created_at, name, source_role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  [(new, m["seq"], m["role"], m["content"], m["token_count"], m["identity_hash"],
                    m["stable_event_key"], m["file_id"], m["created_at"], m.get("name"), m.get("source_role"))
                   for m in msgs])  # fmt: skip
    by_seq = {int(r[1]): int(r[0]) for r in c.execute("SELECT id, seq FROM messages WHERE conversation_id = ?", (new,))}
    msg_map = {int(m["id"]): by_seq[int(m["seq"])] for m in msgs}
    sum_map = {str(s["summary_id"]): "sum_" + secrets.token_hex(8) for s in rows["summaries"]}

    def need(mapping: Mapping[Any, Any], key: Any, what: str) -> Any:
        if key not in mapping:
            raise LcmValidationError(f"the backup's {what} {key} is not in the backup; it is inconsistent", field="file")
        return mapping[key]

    c.executemany(
        "INSERT INTO summaries(summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at, "
        "descendant_count, descendant_token_count, source_message_token_count, model, status, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(sum_map[s["summary_id"]], new, s["kind"], s["depth"], s["content"], s["token_count"], s["earliest_at"],
          s["latest_at"], s["descendant_count"], s["descendant_token_count"], s["source_message_token_count"],
          s["model"], s["status"], s["created_at"]) for s in rows["summaries"]])  # fmt: skip
    c.executemany("INSERT INTO summary_messages(summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                  [(sum_map[e["summary_id"]], need(msg_map, int(e["message_id"]), "message"), e["ordinal"])
                   for e in rows["summary_messages"]])  # fmt: skip
    c.executemany("INSERT INTO summary_parents(summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                  [(sum_map[e["summary_id"]], need(sum_map, str(e["parent_summary_id"]), "summary"), e["ordinal"])
                   for e in rows["summary_parents"]])  # fmt: skip
    c.executemany("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id, summary_id) "
                  "VALUES (?, ?, ?, ?, ?)",
                  [(new, i["ordinal"], i["item_type"],
                    need(msg_map, int(i["message_id"]), "message") if i["message_id"] is not None else None,
                    need(sum_map, str(i["summary_id"]), "summary") if i["summary_id"] is not None else None)
                   for i in rows["context_items"]])  # fmt: skip
    warnings: list[str] = []
    for f in rows["large_files"]:
        if c.execute("SELECT 1 FROM large_files WHERE file_id = ?", (f["file_id"],)).fetchone() is not None:
            continue  # still stored once, owned by its conversation
        try:
            on_disk = files.resolve(str(f["storage_path"])).is_file()
        except OSError:
            on_disk = False
        if not on_disk:
            warnings.append(f"file {f['file_id']} ({f['name']}): its content is no longer stored; the message "
                            "keeps its reference text and exploration summary")  # fmt: skip
            continue
        c.execute("INSERT INTO large_files(file_id, conversation_id, message_id, name, mime_type, size_bytes, "
                  "token_count, storage_path, exploration_summary, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  (f["file_id"], new, msg_map.get(int(f["message_id"])) if f["message_id"] is not None else None,
                   f["name"], f["mime_type"], f["size_bytes"], f["token_count"], f["storage_path"],
                   f["exploration_summary"], f["created_at"]))  # fmt: skip
    return Restored(new, warnings, msg_map, sum_map)
