"""The inspector's browser sessions: one-time login links exchanged for a session cookie.

A browser cannot send ``Authorization: Bearer`` on a navigation, so the inspector logs in once:

* ``amem ui`` (or an owner over HTTP) issues a **one-time login token** bound to a principal
  (a key's or the owner's); it lives ``LOGIN_TTL`` seconds and opens one session only;
* ``GET /ui/login?t=<token>`` redeems it for a **session**: a random id in an ``HttpOnly``,
  ``SameSite=Strict`` cookie, a CSRF token the pages carry, and a random **path key**: the
  session's pages live under ``/ui/s/<path key>/`` and the cookie is scoped to that path.
  Cookies are not kept apart by port (RFC 6265 8.5): a cookie scoped to ``/ui`` went to any
  server on 127.0.0.1, another local user's too. Scoped to a secret path, the browser sends
  it only to addresses under that path, which nothing but this server's own pages link to;
  and the guard accepts it only on its own session's path;
* a key pasted into the login page is sent once as a Bearer header (``POST /ui/login``), and
  the session is bound to that key: revoking the key ends the session on its next request.

The guard (``tools.http_guard``) reads the cookie on ``/ui`` paths only, so a cookie never
opens ``/mcp`` or the host routes; a request that changes data must also carry the session's
CSRF token in ``X-Amem-Csrf`` (besides the guard's JSON-only rule, Origin check and
SameSite). Sessions live in memory: a restarted server asks for a new login.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..keys import Principal

#: the session cookie's name (scoped to ``/ui``)
COOKIE = "amem_ui"
#: the start of a session's own paths: ``/ui/s/<path key>/notes`` is the page ``/ui/notes``
SESSION_PREFIX = "/ui/s/"
#: the header carrying the CSRF token of a write
CSRF_HEADER = "x-amem-csrf"
LOGIN_TTL = 300.0
SESSION_IDLE = 8 * 3600.0
MAX_SESSIONS = 256
#: sessions one key holds at most: its next login ends its own oldest, never another key's
SESSIONS_PER_KEY = 8
MAX_PENDING_LOGINS = 64


@dataclass
class UiSession:
    """One logged-in browser: who it is and the token its writes must echo."""

    id: str
    principal: Principal
    csrf: str
    last: float = field(default_factory=time.monotonic)
    #: the secret path segment of the session's pages (``/ui/s/<path_key>/...``)
    path_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    @property
    def base(self) -> str:
        """The path the session's pages (and its cookie) live under."""
        return f"{SESSION_PREFIX}{self.path_key}"

    def owns_path(self, path_key: str | None) -> bool:
        """Whether a request's path key is this session's (constant time)."""
        return path_key is not None and hmac.compare_digest(self.path_key.encode(), path_key.encode())


class UiSessions:
    """Login tokens and sessions, thread-safe, bounded twice: ``per_key`` sessions a key (its
    own oldest goes first), ``MAX_SESSIONS`` in all (the oldest go first when full). Without
    the first bound, any key (a read-only one too) logging in 256 times logged out everyone."""

    def __init__(self, *, login_ttl: float = LOGIN_TTL, idle: float = SESSION_IDLE,
                 clock: Callable[[], float] = time.monotonic,
                 per_key: int = SESSIONS_PER_KEY) -> None:
        if login_ttl <= 0 or idle <= 0:
            raise ValueError("login_ttl and idle must be positive numbers of seconds")
        if per_key < 1:
            raise ValueError(f"per_key must be at least 1, got {per_key}")
        self.login_ttl = login_ttl
        self.idle = idle
        self.per_key = per_key
        self._clock = clock
        self._logins: dict[str, tuple[Principal, float]] = {}
        self._sessions: dict[str, UiSession] = {}
        self._lock = threading.Lock()

    def issue_login(self, principal: Principal) -> str:
        """A one-time token that opens one session as ``principal``."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._prune()
            while len(self._logins) >= MAX_PENDING_LOGINS:
                self._logins.pop(next(iter(self._logins)))
            self._logins[token] = (principal, self._clock() + self.login_ttl)
        return token

    def redeem(self, token: str) -> UiSession | None:
        """The session a login token opens (``None``: unknown, used or expired)."""
        with self._lock:
            self._prune()
            found = None
            for known in list(self._logins):  # constant-time per candidate: no early exit on a prefix
                if hmac.compare_digest(known.encode(), token.encode()):
                    found = known
            if found is None:
                return None
            principal, _ = self._logins.pop(found)
        return self.open(principal)

    def open(self, principal: Principal) -> UiSession:
        """A new session as ``principal`` (after a redeemed token or a key checked by the guard)."""
        session = UiSession(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(24),
                            self._clock())
        with self._lock:
            self._prune()
            own = [s for s in self._sessions.values() if s.principal.key_id == principal.key_id]
            for old in sorted(own, key=lambda s: s.last)[:max(0, len(own) - self.per_key + 1)]:
                del self._sessions[old.id]
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.last)
                del self._sessions[oldest.id]
            self._sessions[session.id] = session
        return session

    def lookup(self, session_id: str) -> UiSession | None:
        """The live session of a cookie's value, its idle clock restarted."""
        with self._lock:
            self._prune()
            session = self._sessions.get(session_id)
            if session is not None:
                session.last = self._clock()
            return session

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def check_csrf(self, session: UiSession, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(session.csrf.encode(), sent.encode())

    def _prune(self) -> None:
        now = self._clock()
        for token in [t for t, (_, until) in self._logins.items() if until < now]:
            del self._logins[token]
        for sid in [s.id for s in self._sessions.values() if now - s.last > self.idle]:
            del self._sessions[sid]


__all__ = ["COOKIE", "CSRF_HEADER", "SESSION_PREFIX", "UiSession", "UiSessions"]
