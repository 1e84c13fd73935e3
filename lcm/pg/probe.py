"""The first connection to a PostgreSQL server: a refusal that retrying cannot fix is said at once.

The pool retries a failed connection in the background until its timeout, which is right for a
server that is starting or briefly away, but a wrong password, a missing database or role, an
SSL requirement the server cannot meet or a bad URL parameter failed the same way: 10 s of
retries and raw pool log lines, then "cannot reach the server". One direct connection first
tells the two apart by libpq's message (it carries no SQLSTATE before the session exists).
"""

from __future__ import annotations

import re

from lcm.errors import LcmConfigError

__all__ = ["probe", "permanent_reason", "unreachable_reason"]

#: libpq's words for a refusal no retry fixes (authentication, a missing database or role,
#: SSL, an invalid option); anything else (refused, timed out, starting up) may pass
_PERMANENT = re.compile(
    r"authentication failed|does not exist|no pg_hba\.conf entry|SSL|invalid (URI|connection|\w+ value)|"
    r"permission denied|not permitted to log in|certificate", re.IGNORECASE)  # fmt: skip


def permanent_reason(exc: Exception) -> str | None:
    """The server's (or libpq's) reason when ``exc`` is a refusal no retry fixes, else None."""
    import psycopg

    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.ProgrammingError) or _PERMANENT.search(text):
        return _reason(text)
    return None


def _reason(text: str) -> str:
    """libpq's reason out of its message: "connection failed: connection to server at ...
    failed: FATAL:  password ..." -> the last part."""
    return re.sub(r"^.*failed:\s*(FATAL:\s*)?", "", text) or text


def probe(url: str, shown: str, timeout_s: float) -> None:
    """Connect once to ``url`` (shown as ``shown``, without secrets) and close.

    Raises:
        LcmConfigError: a refusal no retry fixes (``key="databasePath"``), with its reason.
    A failure that may pass (the server down or starting) is left to the pool's retries.
    """
    import psycopg

    try:
        psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout_s))).close()
    except psycopg.Error as exc:
        reason = permanent_reason(exc)
        if reason is None:
            return
        raise LcmConfigError(f"lcm: cannot use the PostgreSQL server at {shown}: {reason} (not retried: check the "
                             "URL's user, password, database and parameters)", key="databasePath") from None


def unreachable_reason(url: str, timeout_s: float) -> str | None:
    """libpq's reason when one direct connection to ``url`` fails now, else None (it answers).

    Asked when the pool has no connection to hand out: the pool keeps retrying a server that
    went away until the caller's wait ends (30 s a call), while a direct attempt is refused at
    once; a server that answers means the pool is only busy, and the caller waits on.
    """
    import psycopg

    try:
        psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout_s))).close()
    except psycopg.Error as exc:
        return _reason(" ".join(str(exc).split()))
    return None
