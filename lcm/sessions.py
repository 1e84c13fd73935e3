"""Session keys: glob patterns, cron detection, and resolving a key to its conversation row."""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

from amem.kernel.safejson import first_surrogate
from lcm.conn import Connection, Row
from lcm.errors import LcmValidationError
from lcm.models import Conversation

__all__ = ["check_title", "glob_match", "is_cron_key", "reset_conversation", "resolve_conversation", "row_to_conversation", "CRON_PATTERN"]

CRON_PATTERN = "agent:*:cron:**"


@functools.lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> Any:
    """The RE2 program of a glob. RE2, not ``re``: with several ``**`` a backtracking match
    of a 400-character key took 153 s (keys come from callers; patterns from config)."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^:]*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    options = re2.Options()
    options.dot_nl = True
    options.log_errors = False
    return re2.compile("".join(out), options)


def glob_match(pattern: str, key: str) -> bool:
    """Full-key match where ``*`` stops at ``:`` and ``**`` spans anything."""
    return _glob_regex(pattern).fullmatch(key) is not None


def is_cron_key(key: str | None) -> bool:
    return key is not None and glob_match(CRON_PATTERN, key)


def row_to_conversation(row: Row) -> Conversation:
    return Conversation(
        id=row["id"],
        session_key=row["session_key"],
        session_id=row["session_id"],
        active=bool(row["active"]),
        archived_at=row["archived_at"],
        archive_cause=row["archive_cause"],
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def find_active(c: Connection, session_key: str | None, session_id: str | None) -> Row | None:
    """The active conversation for a key, else (when no key matches) for a session id (with a
    key given, only a conversation without a key of its own)."""
    if session_key is not None:
        row: Row | None = c.execute(
            "SELECT * FROM conversations WHERE session_key = ? AND active = 1", (session_key,)
        ).fetchone()
        if row is not None:
            return row
    if session_id is not None:
        # With a key, the id finds only a conversation that has no key yet: a conversation of
        # another key that took this id (a host's id is anybody's to send) is not this key's.
        keyless = " AND session_key IS NULL" if session_key is not None else ""
        row = c.execute(
            f"SELECT * FROM conversations WHERE session_id = ? AND active = 1{keyless} ORDER BY id DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return row
    return None


def check_session_key(session_key: str | None) -> None:
    """A session key names a conversation: blank, or with spaces around it, it would open one
    nobody asks for again (``--session-key ''`` and ``'agent:a:main '`` were stored apart
    from ``agent:a:main``, unsaid)."""
    if session_key is None:
        return
    if not isinstance(session_key, str) or not session_key.strip():
        raise LcmValidationError("session_key must be a non-empty string", field="session_key")
    if session_key != session_key.strip():
        raise LcmValidationError(f"session_key {session_key[:100]!r} has spaces around it; "
                                 f"did you mean {session_key.strip()[:100]!r}?", field="session_key")


#: longest conversation title kept (a chat app's titles are a few words; this bounds input)
MAX_TITLE_CHARS = 1000


def check_title(title: object) -> None:
    """A conversation's title is text, or None to leave the stored one as it is."""
    if title is None:
        return
    if not isinstance(title, str):
        raise LcmValidationError(f"title must be text, got {type(title).__name__}", field="title")
    if len(title) > MAX_TITLE_CHARS:
        raise LcmValidationError(f"title is {len(title)} characters; the limit is {MAX_TITLE_CHARS}",
                                 field="title")
    if first_surrogate(title) is not None:
        raise LcmValidationError("title holds a lone surrogate, which is not valid Unicode text", field="title")


def resolve_conversation(
    c: Connection, session_key: str | None, session_id: str | None, now: str, title: str | None = None
) -> tuple[int, bool, int | None]:
    """Find or create the active conversation; must run inside a write transaction.

    ``title`` (the name a chat export gave the conversation) is kept on the row; a later
    ingest with another title renames it, as the user renamed the chat where it came from.

    Returns ``(conversation_id, created, archived_id)``. A cron key whose runtime session id
    changed gets a fresh conversation (the previous run's row is archived with cause
    ``cron-run``) so each scheduled run is its own conversation; any other key keeps its
    conversation, which takes the new session id.
    """
    if session_key is None and session_id is None:
        raise LcmValidationError("need a session_key or a session_id", field="session_key")
    check_session_key(session_key)
    row = find_active(c, session_key, session_id)
    archived = None
    if row is not None and is_cron_key(session_key) and session_id is not None:
        if row["session_id"] is not None and row["session_id"] != session_id:
            archive(c, row["id"], "cron-run", now)
            archived, row = row["id"], None
    if row is not None:
        updates = []
        if session_key is not None and row["session_key"] is None:
            updates.append(("session_key", session_key))
        if title is not None and row["title"] != title:
            updates.append(("title", title))
        # A key whose host started a new session (a new session file, a restart) keeps its
        # conversation and follows the new id, so a later lookup by that id alone finds it
        # (as lossless-claw's getOrCreateConversation does). Found by id alone, the row keeps
        # its id: the id is what matched.
        follows = session_key is not None and row["session_key"] == session_key
        if session_id is not None and row["session_id"] != session_id and (row["session_id"] is None or follows):
            updates.append(("session_id", session_id))
        for col, val in updates:
            c.execute(f"UPDATE conversations SET {col} = ?, updated_at = ? WHERE id = ?", (val, now, row["id"]))
        return row["id"], False, archived
    cur = c.execute(
        "INSERT INTO conversations(session_key, session_id, active, title, created_at, updated_at) "
        "VALUES (?, ?, 1, ?, ?, ?)",
        (session_key, session_id, title, now, now),
    )
    return int(cur.lastrowid or 0), True, archived


def archive(c: Connection, conversation_id: int, cause: str, now: str) -> None:
    c.execute(
        "UPDATE conversations SET active = 0, archived_at = ?, archive_cause = ?, updated_at = ? WHERE id = ?",
        (now, cause, now, conversation_id),
    )
    c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conversation_id,))


def reset_conversation(c: Connection, session_key: str, cause: str, now: str) -> tuple[int | None, int]:
    """Archive the active conversation of ``session_key`` (if any) and open a fresh one, inside
    the caller's write transaction; returns (the archived id or None, the new id)."""
    row = find_active(c, session_key, None)
    archived = None
    if row is not None:
        archive(c, row["id"], cause, now)
        archived = row["id"]
    cur = c.execute(
        "INSERT INTO conversations(session_key, session_id, active, created_at, updated_at) VALUES (?, NULL, 1, ?, ?)",
        (session_key, now, now),
    )
    return archived, int(cur.lastrowid or 0)


def family_ids(c: Connection, session_key: str) -> list[int]:
    """The session family: the active conversation plus archived ones with the same key."""
    return [r[0] for r in c.execute("SELECT id FROM conversations WHERE session_key = ? ORDER BY id", (session_key,))]
