"""Scopes: which conversations a call reaches (session modes, active conversations, families, recall scopes).

A recall names its reach by a session key (or several: an agent's families), one conversation
id, or ``all_conversations``. A conversation outside that reach must answer exactly like one
that does not exist, so the checks live here once, in front of every recall stage.
"""

from __future__ import annotations

from collections.abc import Sequence

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.models import Conversation
from lcm.recall import MAX_ROWID
from lcm.sessions import family_ids, find_active, glob_match, row_to_conversation

__all__ = ["Scopes", "SessionKeys"]

#: one session key, or several (an agent's families: ``allConversations`` for one tenant)
SessionKeys = str | Sequence[str] | None


class Scopes:
    """Session and scope resolution over one handle (SQLite or a server)."""

    def __init__(self, db: Handle, config: LcmConfig) -> None:
        self.db = db
        self.config = config

    def session_mode(self, session_key: str | None) -> str:
        """``normal``, ``ignored`` (``ignoreSessionPatterns``) or ``stateless``."""
        if session_key is None:
            return "normal"
        if any(glob_match(p, session_key) for p in self.config.ignore_session_patterns):
            return "ignored"
        # Whatever skipStatelessSessions says: a stateless session reads, never writes (the
        # reference lets it write when the flag is false; see docs/lcm-reference.md).
        if any(glob_match(p, session_key) for p in self.config.stateless_session_patterns):
            return "stateless"
        return "normal"

    def conversation(self, session_key: str | None, session_id: str | None) -> Conversation | None:
        """The active conversation for a key (or session id), or None."""
        with self.db.reading() as c:
            row = find_active(c, session_key, session_id)
        return None if row is None else row_to_conversation(row)

    def conversations(self, session_key: str | None) -> list[Conversation]:
        """Every conversation (or the session family of ``session_key``), oldest first."""
        if session_key is None:
            rows = self.db.query("SELECT * FROM conversations ORDER BY id")
        else:
            rows = self.db.query("SELECT * FROM conversations WHERE session_key = ? ORDER BY id", (session_key,))
        return [row_to_conversation(r) for r in rows]

    def session_keys(self, prefix: str) -> list[str]:
        """The distinct session keys starting with ``prefix`` (exact, no wildcards)."""
        return [r[0] for r in self.db.query(
            "SELECT DISTINCT session_key FROM conversations WHERE substr(session_key, 1, ?) = ? "
            "ORDER BY session_key", (len(prefix), prefix))]  # fmt: skip

    def active_id(self, session_key: str) -> int | None:
        """The id of ``session_key``'s active conversation, or None."""
        with self.db.reading() as c:
            row = find_active(c, session_key, None)
        return None if row is None else int(row["id"])

    def families(self, session_key: str | Sequence[str]) -> list[int]:
        """The conversation ids of the session families of one key or several, sorted."""
        keys = [session_key] if isinstance(session_key, str) else list(session_key)
        with self.db.reading() as c:
            return sorted({cid for key in keys for cid in family_ids(c, key)})

    def scope(self, session_key: SessionKeys, conversation_id: int | None, all_conversations: bool) -> list[int] | None:
        """The conversation ids a recall may read (None: all). A conversation outside the
        session family (or families) answers exactly like one that does not exist."""
        if all_conversations:
            return None
        if conversation_id is not None:
            if isinstance(conversation_id, bool) or not isinstance(conversation_id, int):
                raise LcmValidationError("conversation_id must be an integer", field="conversation_id")
            family = self.families(session_key) if session_key else None
            exists = 0 < conversation_id <= MAX_ROWID and (
                self.db.one("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)) is not None
            )
            if not exists or (family is not None and conversation_id not in family):
                raise LcmNotFoundError(f"no conversation {conversation_id}", id=str(conversation_id))
            return [conversation_id]
        if session_key:
            return self.families(session_key)
        raise LcmValidationError("give session_key, conversation_id or all_conversations=True", field="session_key")

    def family(self, session_key: SessionKeys, conversation_id: int | None, all_conversations: bool) -> list[int] | None:
        """Like :meth:`scope`, but naming no scope at all means no restriction (trusted callers)."""
        if session_key is None and conversation_id is None:
            return None
        return self.scope(session_key, conversation_id, all_conversations)
