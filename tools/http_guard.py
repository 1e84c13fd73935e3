"""One guard in front of every route of ``amem serve --http``: ``/mcp``, ``/lcm/*``, the
owner's resources, the server's proof, 404s, and whatever is added later.

It is an ASGI middleware around the whole Starlette app (``guard_app``), so a route cannot be
mounted beside it; ``tests/tools/security`` enumerates the app's routes and sends each one the
requests below. Each request passes these checks in order; a refusal is the tools' structured
error ``{"error": {code, message, field}}`` with its HTTP status (on the MCP endpoint, a
JSON-RPC error carrying that object as its ``data``, which MCP clients show), and nothing
behind it runs:

1. **Host** must name this machine (``127.0.0.1``, ``localhost``, ``[::1]``, any port): a
   page whose domain was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name. 421.
2. **Origin**, when sent, must be one of those too, and ``Sec-Fetch-Site``, when sent, must be
   ``same-origin`` or ``none``: browsers send them, other clients need not. 403.
3. **What a browser sends without a CORS pre-check never changes data.** A form or a
   ``fetch`` with ``text/plain`` may ``POST`` to any address unasked; here a ``POST`` (or
   ``PUT``/``PATCH``) must say ``Content-Type: application/json``, which a browser sends
   cross-origin only after a pre-check this server never answers. ``OPTIONS`` is refused.
   415 / 405.
4. **A key** (``tools.keys``) in ``Authorization: Bearer``, or the server record's secret (an
   owner key for the server's life, for the ``amem`` CLI of the directory's owner). 401
   without; ``--insecure-no-auth`` lets every caller in as the owner, and says so in the log.
   With budgets configured, requests that fail here share one budget (``tools.ratelimit``:
   every local client is 127.0.0.1): past it they are refused with 429 ``rate_limited``,
   held like any refusal, so a flood of bad keys (or key guessing) is slowed to its pace. A
   request with no key, a malformed header or a secret not shaped like a key is charged
   without any comparison; one shaped like a key is checked first (a dictionary lookup and at
   most one SHA-256), since it may be valid: a valid key is charged to its own buckets only,
   so the flood never refuses it. (An inspector request without its session cookie is not
   charged: it is sent to the login page, which anyone may load.)
5. **The agent** is the key's: ``X-Amem-Agent`` may only repeat an agent key's own agent
   (403 for another); an owner key may name any. The guard writes the header the routes read,
   so every route sees the agent the key allows and nothing else.
6. **Read-only keys** change nothing: a non-GET request outside the MCP endpoint is refused
   (403); on the MCP endpoint each tool is checked by the server (``tools.mcp_server``).
7. **Bodies** over the limit are refused (413) before they are read whole.
8. **MCP sessions** are counted per key; an opening request over the key's cap is refused
   (429 naming the cap), so one client that abandons sessions exhausts only its own share.
   Idle sessions expire in the SDK's session manager after the same idle time.
9. **Request budgets** (``tools.ratelimit``), when configured: each admitted caller (a key's
   id; the record secret and the ``--insecure-no-auth`` stand-in are one caller each) has a
   bucket for requests that change data and one for reads. What a request costs, and from
   which bucket, is ``tools.ratecost``'s one rule: a write costs the items it writes (an
   ingest of 500 messages, 500 tokens, capped at the burst), a read one token.
   A request over its budget is refused (429 ``rate_limited`` with ``Retry-After``, naming
   the budget and the wait) before any route sees it, so a refused write writes nothing and
   another caller's budget is untouched; the refusal is answered after the wait, up to
   ``hold_s``, so a client looping on refusals is slowed to its budget's pace. Closing an
   MCP session (``DELETE``) is never refused: it frees the server.

Unauthenticated requests reach only the server's proof (``PROOF_PATH``): the CLI checks
with it that the server on the recorded port is the one that wrote the record, before it
sends the record's secret (``tools.remote``), and the inspector's login page and its static
files (``GET /ui/login``, ``GET /ui/static/...``), and ``GET /favicon.ico`` (an empty 204).

**The inspector** (``/ui``, ``tools.ui``) is the one place a browser navigates to, and a
browser sends no Bearer header on a navigation. On ``/ui`` paths only, step 4 also accepts the
session cookie of ``tools.ui.sessions`` (``HttpOnly``, ``SameSite=Strict``, opened by a
one-time login link or a key sent once), and only under its own session's secret path: a
request to ``/ui/s/<path key>/rest`` is routed as ``/ui/rest`` with the key kept in the scope,
and a cookie whose session has another key (or a path without one) opens nothing. The cookie
is scoped to that path, so the browser sends it to no other server on 127.0.0.1 (cookies are
not kept apart by port). The session is bound to its key, so a revoked key ends it. A request that changes data with a cookie must also echo the session's CSRF token
in ``X-Amem-Csrf``. A page requested without either goes to the login page (303). The cookie
never opens ``/mcp`` or the host routes.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from .errors import ToolError, error_result
from .keys import KeyFileError, KeyStore, Principal
from .numbers import ascii_digits
from .ratecost import request_cost
from .ratelimit import Kind, RateLimiter, RateLimits, Refusal
from .tenancy import AGENT_HEADER, decode_header
from .ui.sessions import COOKIE, CSRF_HEADER, SESSION_PREFIX, UiSession, UiSessions

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: where the scope carries the request's principal for the routes behind the guard
PRINCIPAL_SCOPE_KEY = "amem.principal"
#: the one route an unauthenticated caller reaches (the server's proof of identity)
PROOF_PATH = "/amem/proof"
#: the inspector's pages (``tools.ui``): the only paths a session cookie opens
UI_PATH = "/ui"
#: what browsers ask every page for: an empty answer, to anyone (it holds nothing)
FAVICON_PATH = "/favicon.ico"
#: where the scope carries the inspector session a cookie opened
UI_SESSION_SCOPE_KEY = "amem.ui_session"
#: where the scope carries the session path key a request came under (``/ui/s/<key>/...``)
UI_PATH_KEY_SCOPE_KEY = "amem.ui_path_key"
_PATH_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_SESSION_IDLE = 600.0
DEFAULT_SESSIONS_PER_KEY = 64
_SESSION_HEADER = b"mcp-session-id"
_JSON_TYPES = ("application/json",)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: a body larger than this is costed (parsed) in a worker thread: 8 MB of JSON takes ~70 ms,
#: which on the event loop would stall every other request
_COST_ON_LOOP_BYTES = 256 * 1024
#: the JSON-RPC error code of a refusal on the MCP endpoint (the implementation-defined server
#: error range); its ``data`` is the structured error, whose ``code`` says which refusal
REFUSED_RPC_CODE = -32000
_STATUS = {"unauthenticated": 401, "forbidden": 403, "misdirected": 421,
           "unsupported_media_type": 415, "method_not_allowed": 405, "payload_too_large": 413,
           "too_many_sessions": 429, "rate_limited": 429, "invalid_argument": 400,
           "unavailable": 503, "login_required": 303}


@dataclass(frozen=True)
class GuardConfig:
    """How the guard admits callers.

    Attributes:
        keys: the key file (``None``: no keys, only the record secret opens).
        record_secret: the server record's token, an owner key while the server runs.
        insecure_no_auth: admit every caller as the owner (a trusted sandbox only).
        mcp_path: the MCP endpoint, whose tools are checked one by one for read-only keys.
        max_body: largest request body in bytes.
        session_idle: seconds an MCP session may go without a request before it expires.
        sessions_per_key: most open MCP sessions of one key.
        ui_sessions: the inspector's browser sessions (``None``: no cookie opens anything).
        rate_limits: each caller's request budgets (``tools.ratelimit``; ``None``: none, as for
            an app built by a test or a custom host; ``amem serve`` always passes its own).
    """

    keys: KeyStore | None = None
    record_secret: str | None = None
    insecure_no_auth: bool = False
    mcp_path: str = "/mcp"
    max_body: int = DEFAULT_MAX_BODY
    session_idle: float = DEFAULT_SESSION_IDLE
    sessions_per_key: int = DEFAULT_SESSIONS_PER_KEY
    ui_sessions: UiSessions | None = None
    rate_limits: RateLimits | None = None

    def __post_init__(self) -> None:
        if self.max_body <= 0:
            raise ValueError(f"max_body must be positive, got {self.max_body}")
        if not self.session_idle > 0:
            raise ValueError(f"session_idle must be a positive number of seconds, got {self.session_idle}")
        if self.sessions_per_key <= 0:
            raise ValueError(f"sessions_per_key must be positive, got {self.sessions_per_key}")


def principal_of(scope: Any) -> Principal | None:
    """The principal the guard admitted a request as (``None`` off HTTP: stdio, in memory)."""
    found = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, MutableMapping) else None
    return found if isinstance(found, Principal) else None


class Refused(Exception):
    """A refusal: the structured error's ``code``, ``message`` and ``field``, the response's
    extra ``headers``, ``details`` added to the error object (what a client acts on), and the
    seconds its answer is ``held`` back (a request over a budget)."""

    def __init__(self, code: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None,
                 details: dict[str, Any] | None = None, hold: float = 0.0) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field
        self.headers = headers or {}
        self.details = details or {}
        self.hold = hold


#: the page a browser navigating to the inspector from another site is shown (a login link
#: clicked in a web mail or chat): the JSON refusal told a newcomer nothing
_CROSS_SITE_PAGE = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Open this link from '
    'the address bar · amem inspector</title></head><body><main><h1>Open this link from the '
    "address bar</h1><p>The amem inspector was opened from another web site, and it opens no "
    "page for other sites (so that a page you visit cannot use your session).</p><p>Copy the "
    "link, paste it into your browser's address bar and press Enter.</p></main></body></html>")


def _navigation(scope: Scope) -> bool:
    """A browser loading an inspector page (not a script's request, not another route)."""
    path = scope.get("path", "")
    if scope.get("method") != "GET" or not (path == UI_PATH or path.startswith(UI_PATH + "/")):
        return False
    modes = [v for k, v in scope.get("headers", []) if k.lower() == b"sec-fetch-mode"]
    return modes == [b"navigate"]


async def _refuse(send: Send, refused: Refused, scope: Scope | None = None, *,
                  rpc: bool = False) -> None:
    """Answer ``refused`` with its HTTP status. ``rpc``: the request came to the MCP endpoint,
    whose clients surface only a JSON-RPC error (the SDK's client shows "Server returned an
    error response" for any other body): the structured error rides in its ``data``."""
    error = error_result(refused.code, refused.message, refused.field)
    error["error"].update(refused.details)
    if rpc:
        error = {"jsonrpc": "2.0", "id": None, "error": {
            "code": REFUSED_RPC_CODE, "message": refused.message, "data": error["error"]}}
    body = json.dumps(error).encode()
    ctype = b"application/json"
    if scope is not None and refused.field in ("Sec-Fetch-Site", "Origin") and _navigation(scope):
        body, ctype = _CROSS_SITE_PAGE.encode(), b"text/html; charset=utf-8"
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()),
               (b"referrer-policy", b"no-referrer")]
    headers += [(k.lower().encode(), v.encode()) for k, v in refused.headers.items()]
    await send({"type": "http.response.start", "status": _STATUS.get(refused.code, 400),
                "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------------------ sessions


@dataclass
class _Session:
    key_id: str
    in_flight: int = 0
    last: float = field(default_factory=time.monotonic)


class SessionBook:
    """Open MCP sessions per key, as the SDK's session manager keeps them: a session lives
    while a request of it is in flight, and until ``idle`` seconds after its last one; a
    ``DELETE`` or a 404 for its id ends it. Counts a session only after the SDK gave it an
    id; an opening request in flight holds a place meanwhile, so a burst cannot overshoot.
    """

    def __init__(self, cap: int, idle: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap = cap
        # a second of grace: the book forgets a session after the SDK does, never before,
        # so a key never holds more than its cap
        self.idle = idle + 1.0
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, int] = {}
        self._lock = threading.Lock()

    def open_count(self, key_id: str) -> int:
        with self._lock:
            self._prune()
            return self._count(key_id)

    def reserve(self, key_id: str) -> bool:
        """Hold a place for an opening request; ``False`` when the key is at its cap."""
        with self._lock:
            self._prune()
            if self._count(key_id) >= self.cap:
                return False
            self._opening[key_id] = self._opening.get(key_id, 0) + 1
            return True

    def opened(self, key_id: str, session_id: str | None) -> None:
        """The opening request ended: with the session's id when the SDK opened one."""
        with self._lock:
            left = self._opening.get(key_id, 1) - 1
            if left:
                self._opening[key_id] = left
            else:
                self._opening.pop(key_id, None)
            if session_id:
                self._sessions[session_id] = _Session(key_id, last=self._clock())

    def begin(self, session_id: str, key_id: str) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.key_id == key_id:
                session.in_flight += 1

    def end(self, session_id: str, key_id: str, *, closed: bool) -> None:
        """A request of the session ended (``closed``: it ended the session). Only the key
        that opened a session moves it: the SDK answers another key's request for it with
        404 and keeps it, so the book must keep counting it too."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.key_id != key_id:
                return
            session.in_flight = max(0, session.in_flight - 1)
            session.last = self._clock()
            if closed:
                del self._sessions[session_id]

    def _count(self, key_id: str) -> int:
        return (sum(1 for s in self._sessions.values() if s.key_id == key_id)
                + self._opening.get(key_id, 0))

    def _prune(self) -> None:
        now = self._clock()
        for sid in [sid for sid, s in self._sessions.items()
                    if not s.in_flight and now - s.last > self.idle]:
            del self._sessions[sid]


# ------------------------------------------------------------------------------ the guard


class Guard:
    """The ASGI middleware of the module docstring, around ``app``."""

    def __init__(self, app: ASGIApp, config: GuardConfig, *,
                 read_tools: frozenset[str] = frozenset(),
                 limiter: RateLimiter | None = None,
                 body_hints: Mapping[str, str] | None = None) -> None:
        """``read_tools``: the MCP tools that change nothing (a call of any other counts
        against the write budget); ``limiter``: the budgets' buckets, when the server reports
        them (else built here from ``config.rate_limits``, on the system clock);
        ``body_hints``: by path, what a body refused as too large should have been instead
        (the routes know it, the guard only says it: a chat app's export posted to the
        hosts' ingest route loads from its file)."""
        self.app = app
        self.config = config
        self.body_hints = dict(body_hints or {})
        self.sessions = SessionBook(config.sessions_per_key, config.session_idle)
        self.read_tools = read_tools
        if limiter is None and config.rate_limits is not None:
            limiter = RateLimiter(config.rate_limits)
        self.limiter = limiter
        if config.insecure_no_auth:
            log.warning("amem serve: AUTHENTICATION IS OFF (--insecure-no-auth): every local "
                        "process and user can read, change and delete every agent's memory. "
                        "Use this only in a sandbox that nothing else shares.")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # websockets: no route here speaks them
            await send({"type": "websocket.close", "code": 1008})
            return
        _strip_session_path(scope)
        try:
            principal = self._admit(scope)
            receive, body = await self._bounded_body(scope, receive)
            if principal is not None:  # None: the proof route, reached without a key
                await self._charge(scope, principal, body)
        except Refused as refused:
            if refused.hold:
                import anyio

                # Answered after the wait (at most ``hold_s``), on the event loop's timer: no
                # worker, no lock. A client that loops on refusals without reading Retry-After
                # is slowed to its budget's pace; answered at once, a looping client sent 55
                # refusals for every request it was allowed, and their HTTP work alone slowed
                # other keys 3x (benchmarks.rate_flood_bench).
                await anyio.sleep(refused.hold)
            await _refuse(send, refused, scope, rpc=self._rpc(scope))
            return
        if principal is None:
            await self.app(scope, receive, send)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        scope["user"] = _sdk_user(principal)  # the SDK binds each MCP session to its key
        if scope["path"] == self.config.mcp_path:
            await self._mcp(scope, receive, send, principal)
        else:
            await self.app(scope, receive, send)

    def _rpc(self, scope: Scope) -> bool:
        """A request to the MCP endpoint: its refusals are JSON-RPC errors (``_refuse``)."""
        return bool(scope.get("path") == self.config.mcp_path)

    # ------------------------------------------------------------------ admission

    def _admit(self, scope: Scope) -> Principal | None:
        headers = _Headers(scope)
        host = headers.one("host") or ""
        if _hostname(host) not in LOCAL_HOSTS:
            raise Refused("misdirected", f"this server answers only for 127.0.0.1, localhost "
                          f"and [::1], not Host {host[:100]!r}", "Host")
        origin = headers.one("origin")
        if origin is not None and (not origin.startswith("http://")
                                   or _hostname(origin[len("http://"):]) not in LOCAL_HOSTS):
            raise Refused("forbidden", f"requests from web pages of {origin[:100]!r} are "
                          "refused: this server is for local clients", "Origin")
        site = headers.one("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise Refused("forbidden", f"a {site[:40]} request from a web page is refused: this "
                          "server is for local clients", "Sec-Fetch-Site")
        method = scope["method"]
        if method == "OPTIONS":
            raise Refused("method_not_allowed", "OPTIONS is not served: this server answers no "
                          "cross-origin pre-check", "method")
        if method in _BODY_METHODS:
            ctype = (headers.one("content-type") or "").split(";")[0].strip().lower()
            if ctype not in _JSON_TYPES:
                raise Refused("unsupported_media_type", f"a {method} must send Content-Type: "
                              f"application/json, not {ctype[:80] or 'none'!r}", "Content-Type")
        path = scope["path"]
        if method == "GET" and (path in (PROOF_PATH, FAVICON_PATH, UI_PATH + "/login")
                                or path.startswith(UI_PATH + "/static/")):
            return None
        in_ui = path == UI_PATH or path.startswith(UI_PATH + "/")
        if in_ui and headers.one("authorization") is None and not self.config.insecure_no_auth:
            principal = self._ui_session(scope, headers, method)
        else:
            principal = self._authenticate(headers)
        self._narrow(scope, headers, principal)
        # logging in to the inspector (or out) with a read-only key changes no data
        session_door = path in (UI_PATH + "/login", UI_PATH + "/logout") and method == "POST"
        if (principal.read_only and method not in ("GET", "HEAD") and path != self.config.mcp_path
                and not session_door):
            raise Refused("forbidden", f"key {principal.key_id} is read-only; {method} "
                          f"{scope['path'][:100]} changes data", "Authorization")
        return principal

    def _authenticate(self, headers: "_Headers") -> Principal:
        raw = headers.one("authorization")
        if self.config.insecure_no_auth:
            return Principal("insecure", None, owner=True, insecure=True)
        if raw is None:
            raise self._no_key("this server needs a key: send Authorization: Bearer <key> (the "
                               "data directory's owner issues one with `amem keys add --agent "
                               "ID`)")
        scheme, _, secret = raw.partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise self._no_key("the Authorization header must be 'Bearer <key>'")
        record = self.config.record_secret
        if record and hmac.compare_digest(secret.encode(), record.encode()):
            return Principal("server-record", None, owner=True)
        principal = None
        if self.config.keys is not None:
            try:
                principal = self.config.keys.authenticate(secret)
            except KeyFileError as exc:
                log.error("refusing every key: %s", exc)
                raise Refused("unavailable", "the server cannot read its key file; its log "
                              "says why") from None
        if principal is None:
            raise self._no_key("the key is not valid (unknown, revoked, or mistyped)")
        return principal

    def _no_key(self, why: str) -> Refused:
        """The refusal of a request without a valid key: 401 saying ``why``, or 429 once the
        budget all such requests share is spent (held like any refusal)."""
        refusal = self.limiter.failed_auth() if self.limiter is not None else None
        if refusal is None:
            return Refused("unauthenticated", why, "Authorization",
                           {"WWW-Authenticate": 'Bearer realm="amem"'})
        wait = refusal.retry_after_s
        return Refused(
            "rate_limited", f"too many requests without a valid key from local clients "
            f"({refusal.per_minute:g} a minute, bursts of {refusal.burst}, all callers "
            f"together); this request was refused: retry in {wait} s, with a valid key",
            "Authorization", {"Retry-After": str(wait)},
            {"retry_after_s": wait, "limit": {"kind": "auth", "per_minute": refusal.per_minute,
                                              "burst": refusal.burst}}, hold=refusal.hold)

    def _ui_session(self, scope: Scope, headers: "_Headers", method: str) -> Principal:
        """The principal of the inspector's session cookie (``tools.ui.sessions``), accepted
        only under its own session's path (``/ui/s/<path key>/``): a cookie shown elsewhere
        (copied, or sent by the browser to another local server and replayed) opens nothing.
        Every ``amem_ui`` cookie sent is tried: a cookie planted beside the real one (another
        port's server can set cookies for 127.0.0.1) must not hide it."""
        book = self.config.ui_sessions
        path_key = scope.get(UI_PATH_KEY_SCOPE_KEY)
        session: UiSession | None = None
        if book is not None and path_key:
            for session_id in _cookies(headers.one("cookie"), COOKIE):
                found = book.lookup(session_id)
                if found is not None and found.owns_path(path_key):
                    session = found
                    break
        if session is not None and not self._key_alive(session.principal):
            book.close(session.id)  # type: ignore[union-attr]  # a session implies its book
            session = None
        if session is None:
            if method == "GET":
                raise Refused("login_required", "log in to the inspector first: `amem ui` "
                              "prints a one-time login link", "cookie",
                              {"Location": UI_PATH + "/login"})
            raise Refused("unauthenticated", "no inspector session: log in again (`amem ui` "
                          "prints a one-time login link)", "cookie")
        if method not in ("GET", "HEAD") and not book.check_csrf(  # type: ignore[union-attr]
                session, headers.one(CSRF_HEADER)):
            raise Refused("forbidden", "this change lacks the page's CSRF token; reload the "
                          "page and try again", "X-Amem-Csrf")
        scope[UI_SESSION_SCOPE_KEY] = session
        return session.principal

    def _key_alive(self, principal: Principal) -> bool:
        """A session bound to an issued key lives only while the key does."""
        keys = self.config.keys
        if keys is None or principal.key_id in ("server-record", "insecure", "ui-login"):
            return True
        try:
            return keys.exists(principal.key_id)
        except KeyFileError as exc:
            log.error("refusing the inspector session: %s", exc)
            return False

    def _narrow(self, scope: Scope, headers: "_Headers", principal: Principal) -> None:
        """Check ``X-Amem-Agent`` against the key, and write the header the routes read."""
        raw = headers.one(AGENT_HEADER.lower())
        if raw is None:
            if principal.agent is not None:
                headers.put(AGENT_HEADER.lower(), quote(principal.agent, safe=""))
            return
        if principal.owner:  # any agent: the routes check the header as they always have
            return
        try:
            agent = decode_header(raw, AGENT_HEADER)
        except ToolError as exc:
            raise Refused(exc.code, exc.message, exc.field) from None
        if not principal.may_act_as(agent):
            raise Refused("forbidden", f"key {principal.key_id} acts as agent "
                          f"{principal.agent!r} only, not {agent[:100]!r}", AGENT_HEADER)

    async def _bounded_body(self, scope: Scope, receive: Receive) -> tuple[Receive, bytes]:
        """``receive`` for the app and the body: for a method with a body, the body read
        here first, no further than the limit (a false or absent Content-Length cannot get
        past it); the budgets read what an MCP request calls from it."""
        if scope["method"] in ("GET", "HEAD"):
            return receive, b""
        limit = self.config.max_body
        hint = self.body_hints.get(scope["path"])
        hint = f" ({hint})" if hint else ""
        declared = _Headers(scope).one("content-length")
        if declared is not None and ascii_digits(declared) and int(declared) > limit:
            raise Refused("payload_too_large", f"the body is {declared} bytes; the limit is {limit}{hint}", "body")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                chunks_done = b"".join(chunks)
                return _replay(chunks_done, receive, first=message), chunks_done
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise Refused("payload_too_large", f"the body is over the limit of {limit} bytes{hint}", "body")
            chunks.append(chunk)
            if not message.get("more_body", False):
                body = b"".join(chunks)
                return _replay(body, receive), body

    # ------------------------------------------------------------------ budgets

    async def _charge(self, scope: Scope, principal: Principal, body: bytes) -> None:
        """Take the request's cost (``tools.ratecost``) from its caller's bucket; refused when
        the bucket has too little (step 9)."""
        if self.limiter is None:
            return

        def cost() -> tuple[Kind, int] | None:
            return request_cost(scope["method"], scope["path"], body,
                                mcp_path=self.config.mcp_path, read_tools=self.read_tools)

        if len(body) > _COST_ON_LOOP_BYTES:
            import anyio.to_thread

            charge = await anyio.to_thread.run_sync(cost)
        else:
            charge = cost()
        if charge is None:
            return  # closing an MCP session frees the server: never held back
        kind, tokens = charge
        refusal = self.limiter.check(principal.key_id, kind, cost=tokens, owner=principal.owner,
                                     agent=principal.agent)
        if refusal is not None:
            raise _rate_limited(principal, refusal)

    # ------------------------------------------------------------------ MCP sessions

    async def _mcp(self, scope: Scope, receive: Receive, send: Send, principal: Principal) -> None:
        book = self.sessions
        session_id = _Headers(scope).one(_SESSION_HEADER.decode())
        if session_id is None and scope["method"] == "POST":
            if not book.reserve(principal.key_id):
                raise_to = Refused("too_many_sessions", f"key {principal.key_id} has "
                                   f"{book.cap} open MCP sessions, its cap; close one (DELETE) or "
                                   f"wait {self.config.session_idle:g} s for an idle one to expire",
                                   "Mcp-Session-Id", {"Retry-After": "30"})
                await _refuse(send, raise_to, rpc=True)
                return
            opened: list[str] = []

            async def watch_open(message: Message) -> None:
                if message["type"] == "http.response.start" and message["status"] < 400:
                    opened.extend(v.decode("latin-1") for k, v in message.get("headers", [])
                                  if k.lower() == _SESSION_HEADER)
                await send(message)

            try:
                await self.app(scope, receive, watch_open)
            finally:
                book.opened(principal.key_id, opened[0] if opened else None)
            return
        if session_id is None:
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        book.begin(session_id, principal.key_id)
        try:
            await self.app(scope, receive, watch)
        finally:
            ended = bool(status) and (status[0] == 404 or (scope["method"] == "DELETE" and status[0] < 400))
            book.end(session_id, principal.key_id, closed=ended)


def _rate_limited(principal: Principal, refusal: Refusal) -> Refused:
    """The 429 of a request over its caller's budget: what was refused, the budget, the wait."""
    who = f"key {principal.key_id}" + (f" (agent {principal.agent!r})" if principal.agent else "")
    what = "change data" if refusal.kind == "write" else "only read"
    wait = refusal.retry_after_s
    # a request of many items says so: its wait is the refill of all it costs, not of one token
    costs = (f"; this request counts as {refusal.cost} (one per item it writes, at most the "
             f"burst)" if refusal.cost > 1 else "")
    return Refused(
        "rate_limited", f"{who} is over its budget of requests that {what} ({refusal.per_minute:g} "
        f"a minute, bursts of {refusal.burst}){costs}; nothing of this request was done: retry "
        f"in {wait} s", None, {"Retry-After": str(wait)},
        {"retry_after_s": wait, "limit": {"kind": refusal.kind, "per_minute": refusal.per_minute,
                                          "burst": refusal.burst, "cost": refusal.cost}},
        hold=refusal.hold)


def _replay(body: bytes, receive: Receive, first: Message | None = None) -> Receive:
    """A ``receive`` that hands over the buffered body once, then the client's own messages
    (a disconnect while the app streams its answer)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            if first is not None:
                return first
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _sdk_user(principal: Principal) -> Any:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token="-", client_id=f"amem-key:{principal.key_id}", scopes=[]))


def _cookies(header: str | None, name: str) -> list[str]:
    """Every value a ``Cookie`` header gives ``name`` (at most 8), in the order sent."""
    found = []
    for part in (header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name and value:
            found.append(value)
    return found[:8]


def _strip_session_path(scope: Scope) -> None:
    """``/ui/s/<path key>/rest`` routed as ``/ui/rest``, the key kept in the scope for the
    cookie check: the routes know one set of paths, the session's own prefix is the guard's."""
    path = scope.get("path", "")
    if not path.startswith(SESSION_PREFIX):
        return
    key, _, rest = path[len(SESSION_PREFIX):].partition("/")
    if not key or len(key) > 100 or not set(key) <= _PATH_KEY_CHARS:
        return  # not a session path: routed as it is (a 404, or the login page)
    scope[UI_PATH_KEY_SCOPE_KEY] = key
    scope["path"] = UI_PATH + ("/" + rest if rest else "")
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        prefix = (SESSION_PREFIX + key).encode()
        if raw.startswith(prefix):
            scope["raw_path"] = UI_PATH.encode() + raw[len(prefix):]


def _hostname(host: str) -> str:
    """The host part of a ``Host`` / ``Origin`` authority (``[::1]:8765`` -> ``::1``)."""
    try:
        return (urlsplit(f"//{host}").hostname or "").lower()
    except ValueError:
        return ""


class _Headers:
    """The scope's headers by lower-case name; a header sent twice is refused."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def one(self, name: str) -> str | None:
        wanted = name.encode("latin-1")
        values = [v for k, v in self.scope.get("headers", []) if k.lower() == wanted]
        if len(values) > 1:
            raise Refused("invalid_argument", f"the {name} header was sent {len(values)} times", name)
        return values[0].decode("latin-1") if values else None

    def put(self, name: str, value: str) -> None:
        wanted = name.encode("latin-1")
        kept = [(k, v) for k, v in self.scope.get("headers", []) if k.lower() != wanted]
        self.scope["headers"] = [*kept, (wanted, value.encode("latin-1"))]


def guard_app(app: Any, config: GuardConfig, *, read_tools: frozenset[str] = frozenset(),
              limiter: RateLimiter | None = None,
              body_hints: Mapping[str, str] | None = None) -> Guard:
    """``app`` behind the guard; the Starlette app stays reachable as ``guard.app``."""
    return Guard(app, config, read_tools=read_tools, limiter=limiter, body_hints=body_hints)
