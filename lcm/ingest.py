"""Ingest: normalize messages, drop re-sent ones, refuse replay floods, externalize large payloads, store."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from amem.kernel.safejson import first_surrogate
from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.errors import LcmValidationError, ReplayFloodError
from lcm.largefiles import LargeFileStore, file_reference
from lcm.timeutil import iso, parse_time
from lcm.tokens import estimate_tokens
from lcm.trigram import MAX_PENDING, index_new_rows

__all__ = ["NormalizedMessage", "normalize_messages", "store_messages"]

_ROLES = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant",
    "tool": "tool", "toolResult": "tool", "tool_result": "tool", "function": "tool",
}  # fmt: skip


class NormalizedMessage(NamedTuple):
    """One message as ingest stores it (immutable; a named tuple because every ingested
    message builds one, and a frozen dataclass's ``__init__`` cost ~1 us more a message)."""

    role: str
    content: str
    created_at: str
    explicit_time: bool
    identity_hash: str
    stable_event_key: str | None
    name: str | None


def _content_text(value: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, Mapping):
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True, default=str))
            else:
                raise LcmValidationError(f"{field}: unsupported content part {type(part).__name__}", field=field)
        return "\n".join(parts)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    raise LcmValidationError(f"{field}: content must be text, parts or an object", field=field)


def _stable_key(msg: Mapping[str, Any], role: str) -> str | None:
    """Stable identity for events the host names: a response id, a tool call id, or an event id."""
    for key in ("event_id", "eventId"):
        if msg.get(key):
            return f"event:{msg[key]}"
    if role == "assistant":
        rid = msg.get("response_id") or msg.get("responseId")
        if rid:
            return f"assistant-response:{rid}"
    if role == "tool":
        tid = msg.get("tool_call_id") or msg.get("toolCallId")
        if tid:
            return f"tool-result:{tid}"
    return None


def normalize_messages(messages: Sequence[Mapping[str, Any]], now_iso: str) -> list[NormalizedMessage]:
    """Validate and normalize a batch; raises before anything is written.

    Every ingested message passes here, so the common case (a ``dict`` with text content) takes
    the short path: no ABC ``isinstance``, each key read once, the field name built only for an
    error.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise LcmValidationError("messages must be a list of message objects", field="messages")
    out = []
    sha256 = hashlib.sha256
    for i, msg in enumerate(messages):
        if type(msg) is not dict and not isinstance(msg, Mapping):
            where = f"messages[{i}]"
            raise LcmValidationError(f"{where}: expected an object with role and content", field=where)
        get = msg.get
        raw_role = get("role")
        role = _ROLES.get(raw_role if type(raw_role) is str else str(raw_role))
        if role is None:
            raise LcmValidationError(f"messages[{i}].role: {raw_role!r} is not one of system, user, assistant, tool",
                                     field=f"messages[{i}].role")  # fmt: skip
        raw = get("content")
        content = raw if type(raw) is str else _content_text(raw, f"messages[{i}].content")
        calls = get("tool_calls")
        if calls:
            # Tool calls are part of what happened; keep them searchable.
            text = json.dumps(calls, ensure_ascii=False, sort_keys=True, default=str)
            content = f"{content}\n[tool_calls] {text}" if content else f"[tool_calls] {text}"
        raw_time = get("created_at", _ABSENT)
        if raw_time is _ABSENT:
            raw_time = get("timestamp")
        explicit = raw_time is not None
        created = iso(parse_time(raw_time, f"messages[{i}].created_at")) if explicit else now_iso
        name = get("name")
        name = name if isinstance(name, str) else None
        stable = _stable_key(msg, role)
        if _surrogate_in(content, name, stable):
            _refuse_surrogate(i, content, name, stable)
        ident = sha256(f"{role}\0{content}".encode()).hexdigest()
        out.append(NormalizedMessage(role, content, created, explicit, ident, stable, name))
    return out


def _surrogate_in(*texts: str | None) -> bool:
    """Whether a text holds a lone surrogate: valid JSON, but no encoder (SQLite's included)
    takes it (``amem.kernel.safejson``)."""
    return any(text and first_surrogate(text) is not None for text in texts)


def _refuse_surrogate(i: int, content: str, name: str | None, stable: str | None) -> None:
    for field, value in (("content", content), ("name", name), ("event_id", stable)):
        at = None if not value else first_surrogate(value)
        if value and at is not None:
            where = f"messages[{i}].{field}"
            raise LcmValidationError(f"{where} holds a lone surrogate (U+{ord(value[at]):04X} at character "
                                     f"{at}), which is not valid Unicode text", field=where)  # fmt: skip


#: a key's absence, told apart from a key present with ``None``
_ABSENT = object()


#: most rows one batched lookup names (SQLite binds at most 32,766 parameters since 3.32)
_CHUNK = 400
#: the flag row that tells the insert triggers of the message indexes to stand aside
#: (migration ``0006_batched_message_index``): set and cleared inside one transaction, so no
#: other connection ever sees it, and a killed process rolls it back with the batch
_DEFER_ON = "INSERT INTO lcm_index_deferred(id) VALUES (1)"
_DEFER_OFF = "DELETE FROM lcm_index_deferred"
#: most rows one multi-row INSERT names (a statement text per batch size, kept by the
#: connection's statement cache)
_ROWS_PER_INSERT = 500
#: index pages one batch may spend merging segments (FTS5 'merge'; only when a level holds 4)
_MERGE_PAGES = 200


def _insert_many(c: sqlite3.Connection, head: str, width: int, rows: Sequence[tuple[Any, ...]],
                 one: str | None = None) -> None:
    """``head`` + one multi-row ``VALUES`` per chunk of ``rows``, instead of an ``executemany``.

    Each statement execution on ``messages`` sets up its insert triggers (the index and time
    order triggers, standing aside or not) and FTS5's per-statement state; one statement for
    the batch pays that once instead of per row (1.10x messages per CPU-second, in the shape of
    benchmarks/lcm_pg_bench.py). Chunks stay under the connection's bound-parameter limit;
    ``one`` is a row's ``VALUES`` term when it is not ``width`` plain markers.
    """
    per = max(1, min(_ROWS_PER_INSERT, c.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    one = one or "(" + ", ".join("?" * width) + ")"
    for i in range(0, len(rows), per):
        part = rows[i : i + per]
        c.execute(head + ",".join([one] * len(part)), [x for row in part for x in row])


def _existing(c: Connection, sql: str, rows: Sequence[tuple[str, ...]], conversation_id: int) -> set[tuple[Any, ...]]:
    """The ``rows`` for which ``sql`` (an EXISTS probe over ``v``) holds, in chunks.

    One statement per chunk instead of one per message; each row is still an exact index probe,
    so a text stored a thousand times costs no more than one stored once.
    """
    found: set[tuple[Any, ...]] = set()
    width = len(rows[0]) if rows else 0
    for i in range(0, len(rows), _CHUNK):
        part = rows[i : i + _CHUNK]
        values = ",".join(["(" + ",".join("?" * width) + ")"] * len(part))
        params = [*(x for row in part for x in row), conversation_id]
        found.update(tuple(r) for r in c.execute(sql.format(values=values), params))
    return found


_KEY_STORED = (
    "WITH v(k) AS (VALUES {values}), p(cid) AS (SELECT ?) SELECT v.k FROM v, p WHERE EXISTS "
    "(SELECT 1 FROM messages WHERE conversation_id = p.cid AND stable_event_key = v.k)"
)
_TIME_STORED = (
    "WITH v(h, t) AS (VALUES {values}), p(cid) AS (SELECT ?) SELECT v.h, v.t FROM v, p WHERE EXISTS "
    "(SELECT 1 FROM messages WHERE conversation_id = p.cid AND identity_hash = v.h AND created_at = v.t)"
)
_SECOND_COUNTS = (
    "WITH v(h, s) AS (VALUES {values}), p(cid) AS (SELECT ?) SELECT v.h, v.s, (SELECT count(*) FROM messages "
    "WHERE conversation_id = p.cid AND identity_hash = v.h AND created_at >= v.s AND created_at < v.s || char(127)) "
    "FROM v, p"
)


_WINDOW = "SELECT identity_hash FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?"
_FIRST_IN_WINDOW = f"SELECT 1 FROM ({_WINDOW}) w WHERE w.identity_hash = ? LIMIT 1"


def _drop_resent(c: Connection, conversation_id: int, batch: list[NormalizedMessage]) -> list[NormalizedMessage]:
    """Remove messages already stored: by stable key, by (identity, explicit time), or by batch overlap."""
    keys = sorted({m.stable_event_key for m in batch if m.stable_event_key is not None})
    stored_keys = {k for (k,) in _existing(c, _KEY_STORED, [(k,) for k in keys], conversation_id)}
    times = sorted({(m.identity_hash, m.created_at) for m in batch if m.explicit_time})
    stored_times = _existing(c, _TIME_STORED, times, conversation_id)
    keep: list[NormalizedMessage] = []
    for m in batch:
        if m.stable_event_key is not None and m.stable_event_key in stored_keys:
            continue
        if m.stable_event_key is not None:
            stored_keys.add(m.stable_event_key)  # the same event twice in one batch: a re-send
        if m.explicit_time and (m.identity_hash, m.created_at) in stored_times:
            continue
        keep.append(m)
    if not keep:
        return keep
    # A host that re-sends its recent window without ids or times: align the batch against the
    # stored tail and skip the overlapping prefix (or all of it, if it is already there). One
    # lone message is too ambiguous (a tool may legitimately return the same text twice), so
    # an overlap counts only from two messages up; ids or times make single messages exact.
    hashes = [m.identity_hash for m in keep]
    n = len(hashes)
    if n < 2:
        return keep
    window = n * 2 + 64
    # Both alignments below start at the batch's first message, so a first message absent from
    # the window settles it with one probe instead of reading the window's rows (the usual case).
    if c.execute(_FIRST_IN_WINDOW, (conversation_id, window, hashes[0])).fetchone() is None:
        return keep
    recent = [r[0] for r in c.execute(_WINDOW, (conversation_id, window))][::-1]
    for start in range(len(recent) - n + 1):
        if recent[start : start + n] == hashes:
            return []
    for k in range(min(n, len(recent)), 1, -1):
        if recent[-k:] == hashes[:k]:
            return keep[k:]
    return keep


def _check_replay_flood(
    c: Connection, conversation_id: int, batch: list[NormalizedMessage], cfg: LcmConfig
) -> None:
    groups: Counter[tuple[str, str, str]] = Counter((m.role, m.identity_hash, m.created_at[:19]) for m in batch)
    pairs = sorted({(ident, second) for _, ident, second in groups})
    stored = {(h, s): n for h, s, n in _existing(c, _SECOND_COUNTS, pairs, conversation_id)}
    for (role, ident, second), count in groups.items():
        total = count + stored.get((ident, second), 0)
        threshold = cfg.replay_flood_threshold_external if role == "user" else cfg.replay_flood_threshold_internal
        if total > threshold:
            raise ReplayFloodError(
                f"refused batch: {total} identical {role} messages in the second {second} "
                f"(limit {threshold}); this looks like a replay. Nothing was stored.",
                role=role,
                count=total,
                threshold=threshold,
            )


def store_messages(
    c: sqlite3.Connection,
    conversation_id: int,
    batch: list[NormalizedMessage],
    cfg: LcmConfig,
    files: LargeFileStore,
    now_iso: str,
    *,
    trigram_max_pending: int = MAX_PENDING,
) -> tuple[list[int], int, list[str]]:
    """Insert the new messages of ``batch`` and their context items (inside a write transaction).

    The whole batch goes in with a few statements: rows, context items and the word index
    each by one ``executemany``; the trigram index is owed (``lcm.trigram``) until the pending
    tail would pass ``trigram_max_pending`` messages (0: index inline, the path before deferral). The indexes are fed here rather than by their insert
    triggers because FTS5 flushes its pending terms at every statement savepoint a trigger
    opens, a new index segment per message (measured 4x slower; benchmarks/lcm_ingest_bench.py).

    Returns ``(message_ids, skipped_duplicates, file_ids)``.
    """
    fresh = _drop_resent(c, conversation_id, batch)
    skipped = len(batch) - len(fresh)
    _check_replay_flood(c, conversation_id, fresh, cfg)
    if not fresh:
        return [], skipped, []
    seq = c.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0]
    ordinal = c.execute(
        "SELECT coalesce(max(ordinal), 0) FROM context_items WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()[0]
    # Row ids are given, not left to SQLite, so the batch needs no lastrowid per row. max + 1 is
    # what SQLite itself picks for an INTEGER PRIMARY KEY without AUTOINCREMENT; the write
    # transaction holds the database, so no other writer can take these ids meanwhile.
    first = int(c.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]) + 1
    ids = list(range(first, first + len(fresh)))
    rows, files_rows, file_ids = message_rows(conversation_id, ids, fresh, seq, cfg, files, now_iso)
    c.execute(_DEFER_ON)
    try:
        _insert_many(c, "INSERT INTO messages(id, conversation_id, seq, role, content, token_count, identity_hash, "
                        "stable_event_key, file_id, created_at) VALUES ", 10, rows)  # fmt: skip
        texts = [(r[0], r[4]) for r in rows]
        _insert_many(c, "INSERT INTO messages_fts(rowid, content) VALUES ", 2, texts)
        # Fed a batch at a time, FTS5's own automerge falls behind (it works in proportion
        # to the pages a flush writes, and per-row flushes wrote many): segments pile up and
        # every search reads each one. A bounded merge per batch keeps about four per level.
        c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)", (_MERGE_PAGES,))
        # The trigram index is left pending (lcm.trigram) unless the tail grows past the bound.
        index_new_rows(c, texts, trigram_max_pending)
    finally:
        c.execute(_DEFER_OFF)
    insert_files_and_context(c, conversation_id, ordinal, ids, files_rows, now_iso)
    return ids, skipped, file_ids


def message_rows(conversation_id: int, ids: Sequence[int], fresh: Sequence[NormalizedMessage], seq: int,
                 cfg: LcmConfig, files: LargeFileStore, now_iso: str,
                 ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """The ``messages`` rows of a batch (ids and sequence numbers given), a large payload moved
    to ``files`` with a reference in its place; also the ``large_files`` rows and their ids.
    Shared by both engines: only how ids are handed out and the indexes are fed differ."""
    rows: list[tuple[Any, ...]] = []
    files_rows: list[tuple[Any, ...]] = []
    file_ids: list[str] = []
    for offset, (mid, m) in enumerate(zip(ids, fresh), 1):
        content, file_id = m.content, None
        tokens = estimate_tokens(content)
        if tokens > cfg.large_file_threshold_tokens:
            stored = files.store(conversation_id, content, m.name)
            file_id = stored.file_id
            content = file_reference(stored)
            tokens = estimate_tokens(content)
            files_rows.append((file_id, conversation_id, mid, stored.name, stored.mime_type, stored.size_bytes,
                               stored.token_count, stored.storage_path, stored.exploration_summary, now_iso))
            file_ids.append(file_id)
        rows.append((mid, conversation_id, seq + offset, m.role, content, tokens, m.identity_hash,
                     m.stable_event_key, file_id, m.created_at))  # fmt: skip
    return rows, files_rows, file_ids


def insert_files_and_context(c: Connection, conversation_id: int, ordinal: int, ids: Sequence[int],
                             files_rows: Sequence[tuple[Any, ...]], now_iso: str) -> None:
    """After the message rows: their large files, one context item each, the conversation's
    ``updated_at`` (portable SQL: the PostgreSQL handle runs it as well)."""
    if files_rows:
        c.executemany(
            "INSERT INTO large_files(file_id, conversation_id, message_id, name, mime_type, size_bytes, "
            "token_count, storage_path, exploration_summary, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            files_rows)
    items = [(conversation_id, ordinal + i, mid) for i, mid in enumerate(ids, 1)]
    if isinstance(c, sqlite3.Connection):  # SQLite: one statement for the batch (see _insert_many)
        _insert_many(c, "INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) VALUES ", 3, items,
                     "(?, ?, 'message', ?)")  # fmt: skip
    else:
        c.executemany("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) "
                      "VALUES (?, ?, 'message', ?)", items)  # fmt: skip
    c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now_iso, conversation_id))
