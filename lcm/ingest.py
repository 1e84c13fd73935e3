"""Ingest: normalize messages, drop re-sent ones, refuse replay floods, externalize large payloads, store.

When is a message one already stored? A message is a distinct event unless it is provably the
same one, in this order of proof (the first that applies decides):

1. **A host id** (``event_id`` / ``eventId`` / ``message_id`` / ``messageId``, an assistant's
   ``response_id``, a tool result's ``tool_call_id``): the same id in the conversation is the
   same message, whatever its text now; another id is another message, whatever its text.
2. **A position** (``position``: the message's index in the host's session, an integer >= 0):
   the same (session id, position) is the same message. Positions must not restart within a
   session id; a host that starts a new session passes its new ``session_id``.
3. **An explicit time** (``created_at`` / ``timestamp``): the same time, role, content and
   speaker is the same message; the same text at another time is a new one (``yes`` / ``ok``
   again five minutes later is stored), and so is the same text from another speaker
   (``name``: four people answering ``ok`` in a chat exported with minute stamps).
4. **Nothing of these** (anonymous messages): a host that retries a call after a timeout sends
   the same batch again; a user who says ``ok`` twice makes a new call with new messages. So
   an anonymous message is dropped only in the two shapes a re-send takes:

   * *the same batch again*: a batch of two or more messages equal, message for message, to
     a batch this conversation took within ``resendWindowSeconds`` (120 s by the store's clock;
     each retry restarts it), whatever was stored in between (another host's messages);
   * *a grown window*: a batch whose first ``k`` messages (2 <= k < its length) are the
     conversation's last ``k`` stored messages, the host's window sent again with new
     messages after it: those ``k`` are dropped.

   Everything else is stored: a lone message (one anonymous message says too little), a batch
   equal to the tail sent after the window (an exchange repeated), a run from the middle of
   the history. A host that needs its retries exact whatever the delay gives ids, positions
   or times.

The same event twice in one batch (rules 1-3) is stored once; anonymous messages of one batch
are never compared with each other (a batch is what the host says happened).

**Speakers.** Wherever two messages are compared (rules 3 and 4, the replay-flood count), a
message's ``name`` is part of who said it: messages of two named speakers never match. A
message without a name matches either way, so a host that never names speakers is treated as
before, and rows stored before names were kept (migration 0014; their ``name`` is empty) still
match the same transcript sent again with names. The identity hash itself stays role and
content: changing it would make every stored message look new to its host's next re-send.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from amem.kernel.safejson import first_surrogate
from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.errors import LcmValidationError, ReplayFloodError
from lcm.largefiles import LargeFileStore, file_reference
from lcm.timeutil import iso, parse_time
from lcm.tokens import estimate_tokens
from lcm.trigram import MAX_PENDING, index_new_rows

__all__ = ["NormalizedMessage", "media_placeholder", "normalize_messages", "store_messages"]

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
    #: the host's name for the speaker (a multi-party chat) or the tool, kept as given
    name: str | None
    #: the role as the host spelled it, when it is not ``role`` ("developer": system)
    source_role: str | None = None


#: content part types that carry an image, a sound or a file rather than text
_MEDIA = {"image_url": "image", "image": "image", "input_image": "image", "input_audio": "audio",
          "audio": "audio", "file": "file", "input_file": "file", "document": "document"}


def media_placeholder(part: Mapping[str, Any]) -> str | None:
    """A short text standing for an image, audio or file content part (OpenAI's chat and
    responses parts, Anthropic's blocks), or None for another part.

    The part's JSON was stored as the message's text: a pasted screenshot's base64 made the
    user's question a "large file" of ~50k tokens of "AAAA...", out of search and context.
    An inline payload is named by its type and size, a link by its address.
    """
    kind = _MEDIA.get(str(part.get("type")))
    if kind is None:
        return None
    said: list[str] = []
    for holder in (part, *(v for v in part.values() if isinstance(v, Mapping))):
        for key in ("media_type", "mime_type", "format", "filename", "file_id"):
            if isinstance(holder.get(key), str) and holder[key] not in said:
                said.append(holder[key][:100])
        for key in ("url", "image_url", "file_url", "data", "file_data"):
            value = holder.get(key)
            if not isinstance(value, str) or not value:
                continue
            if value.startswith("data:"):
                head, _, body = value.partition(",")
                said.append(head.removeprefix("data:").removesuffix(";base64")[:100])
                said.append(f"{len(body) * 3 // 4 // 1024 or 1} KB inline, not stored")
            elif key in ("data", "file_data"):  # bare base64
                said.append(f"{len(value) * 3 // 4 // 1024 or 1} KB inline, not stored")
            else:
                said.append(value[:300])
    return f"[{kind}" + (": " + ", ".join(dict.fromkeys(said)) if said else "") + "]"


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
            elif isinstance(part, Mapping) and (media := media_placeholder(part)) is not None:
                parts.append(media)
            elif isinstance(part, Mapping):
                parts.append(json.dumps(part, ensure_ascii=False, sort_keys=True, default=str))
            else:
                raise LcmValidationError(f"{field}: unsupported content part {type(part).__name__}", field=field)
        return "\n".join(parts)
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    raise LcmValidationError(f"{field}: content must be text, parts or an object", field=field)


def _stable_key(msg: Mapping[str, Any], role: str, index: int, session_id: str | None) -> str | None:
    """Stable identity for events the host names (an event or message id, a response id, a tool
    call id) or places (a position in its session); None for an anonymous message."""
    for key in ("event_id", "eventId", "message_id", "messageId"):
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
    position = msg.get("position")
    if position is None:
        return None
    if type(position) is not int or position < 0:  # bool is an int subclass: refused as well
        where = f"messages[{index}].position"
        raise LcmValidationError(f"{where}: expected an integer >= 0 (the message's index in its session), "
                                 f"got {position!r}", field=where)  # fmt: skip
    # The session id is part of the key: a host's new session numbers its messages from 0 again.
    return f"position:{session_id or ''}:{position}"


def normalize_messages(messages: Sequence[Mapping[str, Any]], now_iso: str, *,
                       session_id: str | None = None) -> list[NormalizedMessage]:
    """Validate and normalize a batch; raises before anything is written.

    ``session_id`` is the host's id of this run of the session: a message's ``position``
    counts within it.

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
        key = _stable_key(msg, role, i, session_id)
        if _surrogate_in(content, name, key):
            _refuse_surrogate(i, content, name, key)
        ident = sha256(f"{role}\0{content}".encode()).hexdigest()
        out.append(NormalizedMessage(role, content, created, explicit, ident, key, name,
                                     None if raw_role == role else str(raw_role)))
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
    """What ``sql`` finds for ``rows`` (the values ``v`` it probes), in chunks.

    One statement per chunk instead of one per message; each row is still an exact index probe
    on (conversation, identity).
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
#: the speakers stored under each (identity, time) of the batch (an empty name: none recorded),
#: asked for the named messages only (an unnamed one matches any speaker); CROSS JOIN keeps the
#: batch's values the outer loop in SQLite: with a hundred of them its planner walked the
#: conversation's messages instead, 50x slower (10 ms against 0.19)
_SPEAKERS_STORED = (
    "WITH v(h, t) AS (VALUES {values}), p(cid) AS (SELECT ?) SELECT v.h, v.t, COALESCE(m.name, '') "
    "FROM v CROSS JOIN p CROSS JOIN messages m "
    "WHERE m.conversation_id = p.cid AND m.identity_hash = v.h AND m.created_at = v.t"
)
#: stored copies of each (identity, speaker) in each second ('' counts the unnamed ones)
_SECOND_COUNTS = (
    "WITH v(h, n, s) AS (VALUES {values}), p(cid) AS (SELECT ?) SELECT v.h, v.n, v.s, (SELECT count(*) "
    "FROM messages WHERE conversation_id = p.cid AND identity_hash = v.h AND COALESCE(name, '') = v.n "
    "AND created_at >= v.s AND created_at < v.s || char(127)) FROM v, p"
)


#: the conversation's last stored messages, newest first
_TAIL = "SELECT identity_hash, name FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?"
_BATCH_SEEN = "SELECT seen_at FROM lcm_ingest_batches WHERE conversation_id = ? AND fingerprint = ?"
_REMEMBER_BATCH = (
    "INSERT INTO lcm_ingest_batches(conversation_id, fingerprint, seen_at) VALUES (?, ?, ?) "
    "ON CONFLICT (conversation_id, fingerprint) DO UPDATE SET seen_at = excluded.seen_at"
)
_FORGET_BATCHES = "DELETE FROM lcm_ingest_batches WHERE conversation_id = ? AND seen_at < ?"

# What each message of a batch turned out to be (rules of the module docstring).
_NEW, _SAME, _ANONYMOUS = 0, 1, 2


def _fingerprint(batch: Sequence[NormalizedMessage]) -> str:
    """The batch as a whole: each message's role and content, and its key and time when it has
    them (a retry is byte for byte the same call; a new call with the same words but new ids or
    times is another batch)."""
    h = hashlib.sha256()
    for m in batch:
        # A speaker is added only when named, so an unnamed batch keeps the fingerprint it had.
        speaker = f"\0{m.name}" if m.name else ""
        h.update(f"{m.identity_hash}\0{m.stable_event_key or ''}\0{m.created_at if m.explicit_time else ''}"
                 f"{speaker}\n".encode())
    return h.hexdigest()


def _same_speaker(a: str | None, b: str | None) -> bool:
    """Whether two messages may be one speaker's: a missing name matches any (module docstring)."""
    return not a or not b or a == b


def _drop_resent(c: Connection, conversation_id: int, batch: list[NormalizedMessage], now_iso: str,
                 window_seconds: int) -> list[NormalizedMessage]:
    """The messages of ``batch`` not already stored, by the rules of the module docstring.

    Also remembers the batch (its fingerprint, when it holds anonymous messages) so that the
    same batch again within ``window_seconds`` is known as a re-send; inside the caller's write
    transaction, so a batch that is refused later (a replay flood) is not remembered either.
    """
    keys = sorted({m.stable_event_key for m in batch if m.stable_event_key is not None})
    stored_keys = {k for (k,) in _existing(c, _KEY_STORED, [(k,) for k in keys], conversation_id)}
    timed = [m for m in batch if m.explicit_time and m.stable_event_key is None]
    named = {(m.identity_hash, m.created_at) for m in timed if m.name}
    plain = sorted({(m.identity_hash, m.created_at) for m in timed} - named)
    speakers: dict[tuple[str, str], set[str]] = {}  # who said each (identity, time) so far
    for h, t, name in _existing(c, _SPEAKERS_STORED, sorted(named), conversation_id):
        speakers.setdefault((h, t), set()).add(name)
    for h, t in _existing(c, _TIME_STORED, plain, conversation_id):
        speakers.setdefault((h, t), set()).add("")  # said: by whom does not matter to an unnamed one
    status: list[int] = []
    for m in batch:
        key = m.stable_event_key
        if key is not None:  # a host id decides alone: another id is another event, same text or not
            status.append(_SAME if key in stored_keys else _NEW)
            stored_keys.add(key)  # the same event twice in one batch: a re-send
        elif m.explicit_time:
            said = speakers.get(pair := (m.identity_hash, m.created_at))
            if said is None:  # the usual case: nobody said it at that time
                status.append(_NEW)
                speakers[pair] = {m.name or ""}
            else:  # _same_speaker against each, as set lookups: "" (no name) matches any
                status.append(_SAME if not m.name or "" in said or m.name in said else _NEW)
                said.add(m.name or "")
        else:
            status.append(_ANONYMOUS)
    if _ANONYMOUS in status and len(batch) >= 2:
        _settle_anonymous(c, conversation_id, batch, status, now_iso, window_seconds)
    # Anonymous messages left undecided are new: nothing proves them the same as a stored one.
    return [m for m, s in zip(batch, status) if s != _SAME]


def _settle_anonymous(c: Connection, conversation_id: int, batch: Sequence[NormalizedMessage], status: list[int],
                      now_iso: str, window_seconds: int) -> None:
    """Mark the anonymous messages of ``batch`` that are a re-send ``_SAME`` (in ``status``):
    the whole batch seen within the window, or a prefix that is the stored tail."""
    if window_seconds > 0:
        fingerprint = _fingerprint(batch)
        cutoff = iso(parse_time(now_iso, "now") - timedelta(seconds=window_seconds))
        seen = c.execute(_BATCH_SEEN, (conversation_id, fingerprint)).fetchone()
        c.execute(_FORGET_BATCHES, (conversation_id, cutoff))
        c.execute(_REMEMBER_BATCH, (conversation_id, fingerprint, now_iso))  # a retry restarts the window
        if seen is not None and seen[0] >= cutoff:
            status[:] = [_SAME if s == _ANONYMOUS else s for s in status]
            return
    # A grown window: the batch's first k messages (2 <= k < n) are the stored tail's last k. The
    # k-th message must then equal the newest stored one, so one row read finds the candidates
    # and a fresh batch (the usual case) reads no more.
    said = [(m.identity_hash, m.name) for m in batch]
    newest = c.execute(_TAIL, (conversation_id, 1)).fetchone()
    if newest is None:
        return
    candidates = [k for k in range(len(batch) - 1, 1, -1)
                  if said[k - 1][0] == newest[0] and _same_speaker(said[k - 1][1], newest[1])]
    if not candidates:
        return
    tail = [tuple(r) for r in c.execute(_TAIL, (conversation_id, candidates[0]))][::-1]
    for k in candidates:
        # A message of the prefix that is provably new (a new id, a new time) cannot be the
        # stored one it lines up with: then the prefix is not the tail re-sent.
        lined_up = len(tail) >= k and all(map(_same_message, said[:k], tail[-k:]))
        if lined_up and _NEW not in status[:k]:
            status[:k] = [_SAME if s == _ANONYMOUS else s for s in status[:k]]
            return


def _same_message(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Two (identity, speaker) pairs that may be one message."""
    return bool(a[0] == b[0] and _same_speaker(a[1], b[1]))


def _check_replay_flood(
    c: Connection, conversation_id: int, batch: list[NormalizedMessage], cfg: LcmConfig
) -> None:
    """Refuse the batch when too many identical messages of one role fall in one second.

    The second is the message's own time when the host gave one, else the ingest's. A message
    with a host id and no time of its own is left out of the count: its id already proves it a
    distinct event (an id sent again is dropped above as the same message), and its ingest
    time says nothing of when it was said, so a transcript's "continue" said four times, each
    line keyed by the CLI (``amem lcm ingest``), is not a flood. Anonymous messages are what a
    runaway host loops on, so they are counted by the ingest's second.
    """
    counted = [m for m in batch if m.explicit_time or m.stable_event_key is None]
    # Per speaker: four people answering "ok" in one second is a chat, one of them four times a loop.
    groups: Counter[tuple[str, str, str, str]] = Counter(
        (m.role, m.identity_hash, m.name or "", m.created_at[:19]) for m in counted)
    keys = sorted({(ident, name, second) for _, ident, name, second in groups})
    stored = {(h, n, s): k for h, n, s, k in _existing(c, _SECOND_COUNTS, keys, conversation_id)}
    for (role, ident, name, second), count in groups.items():
        total = count + stored.get((ident, name, second), 0)
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
    fresh = _drop_resent(c, conversation_id, batch, now_iso, cfg.resend_window_seconds)
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
                        "stable_event_key, file_id, created_at, name, source_role) VALUES ", 12, rows)  # fmt: skip
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
                     m.stable_event_key, file_id, m.created_at, m.name, m.source_role))  # fmt: skip
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
