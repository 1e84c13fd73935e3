"""Re-sent messages and replay floods, the checks every ingest runs before it writes.

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
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from lcm.config import LcmConfig
from lcm.conn import Connection
from lcm.errors import ReplayFloodError
from lcm.normalize import NormalizedMessage
from lcm.timeutil import iso, parse_time

__all__ = ["check_replay_flood", "drop_resent"]


#: most rows one batched lookup names (SQLite binds at most 32,766 parameters since 3.32)
_CHUNK = 400

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


def drop_resent(c: Connection, conversation_id: int, batch: list[NormalizedMessage], now_iso: str,
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


def check_replay_flood(
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
