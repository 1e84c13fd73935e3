"""The host's way into conversation memory over ``amem serve --http``: ``POST /lcm/ingest`` and
``GET /lcm/assemble``, beside ``/mcp``.

Over MCP the model only reads its history (the ``lcm_*`` tools); the host that runs the model
writes it. These two routes are for that host, and are not tools: the model never sees them.

* ``POST /lcm/ingest`` takes ``{"sessionKey"?, "sessionId"?, "messages": [{role, content,
  ...}], "afterTurn"?}`` and answers ``LcmStore.ingest``'s result. Idempotent and replay-guarded
  as ``ingest`` is: a re-sent batch stores nothing twice, a flood of identical messages is
  refused whole. With ``afterTurn`` (the default) a conversation that owes deferred compaction
  pays it after the answer has gone (``LcmStore.after_turn``: one bounded sweep, in the same
  worker pool), so the debt does not wait for the nightly job.
* ``GET /lcm/assemble?budget=N[&sessionKey=&prompt=&model=&contextWindow=&provider=
  &cacheReadTokens=&cacheWriteTokens=]`` answers the context to send the model
  (``LcmStore.assemble``; a compaction debt it records keeps the model, provider and cache counts).
* ``POST /lcm/reset`` takes ``{"sessionKey"?, "cause"?}``: the host's ``/reset``
  (``LcmStore.reset``: the active conversation archived, a fresh one for the same key).
* ``POST /lcm/new`` takes ``{"sessionKey"?}``: the host's ``/new`` (``LcmStore.new_context``: the
  active context emptied, the conversation and its history kept). Neither is a tool: a model
  that could reset its own context (or be talked into it) would lose its working state.
* ``POST /lcm/rotate`` takes ``{"sessionKey"?, "apply"?, "maxRounds"?}``: ``rotate``
  (:mod:`lcm.operator.rotate`: a checked backup of the conversation, then its context compacted
  to the fresh tail in one transaction). A dry run (the plan and its token impact) unless
  ``apply`` is true; it may run up to the server's ``max_timeout`` (600 s), and an answer cut
  there says a write may still complete (a new dry run shows whether it did). Restoring a backup is the CLI's only (``amem lcm rotate --restore FILE``):
  a route that opens a file the request names would let a host read the server's files.

All sit behind the server's guard (``tools.http_guard``: Host and Origin checks, a key, a
JSON content type for the POST, a read-only key refused here). Identity is the MCP routes'
exactly (``tools.mcp_server.facade_for_headers``): the agent of the ``X-Amem-Agent`` header,
which the guard has checked against the key or set to the key's agent (the server's agent
without either), and a session key that must be that
agent's own (``tools.tenancy.session_key_for``): ``sessionKey`` in the request, else the
``X-Amem-Session`` header, else the agent's ``agent:<agent>:main``. Another agent's key is
``forbidden``, and so is a ``sessionId`` that would hand the key a conversation written without
a session key (no agent's). A body over ``MAX_BODY_BYTES`` is refused (413) before it is read whole. Every
call runs in the server's worker pool under its deadline (``tools.runner``). Errors are the
tools' structured errors (``{"error": {code, message, field}}``) with the HTTP status of their
code, and never carry a server path.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import ToolError, error_result, is_error, redact
from .http_guard import principal_of
from .numbers import ascii_digits
from .tenancy import session_key_for

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from lcm import LcmStore

    from .facade import ToolFacade
    from .runner import CallRunner

log = logging.getLogger(__name__)

INGEST_PATH = "/lcm/ingest"
ASSEMBLE_PATH = "/lcm/assemble"
RESET_PATH = "/lcm/reset"
NEW_PATH = "/lcm/new"
ROTATE_PATH = "/lcm/rotate"
#: largest request body accepted, in bytes (a turn with a large tool output is well below it;
#: ``amem lcm ingest`` sends 500 messages a batch)
MAX_BODY_BYTES = 8 * 1024 * 1024
#: most messages one request may carry
MAX_MESSAGES = 5000
MAX_SESSION_ID_CHARS = 500
_STATUS = {"invalid_argument": 400, "replay_flood": 409, "forbidden": 403, "not_found": 404,
           "payload_too_large": 413, "timeout": 504, "unavailable": 503, "concurrent_change": 409,
           "disk_full": 507, "store_locked": 503,
           # the conversation store cannot serve this now; the request was fine: a server down or
           # migrated by newer code, an operation its engine lacks, a host missing its largeFilesDir
           "store_unavailable": 503, "schema_too_new": 503, "unsupported_on_engine": 503,
           "engine_error": 503, "config_error": 503}
_INGEST_FIELDS = ("sessionKey", "sessionId", "messages", "afterTurn")


def add_host_routes(app: "Starlette", runner: "CallRunner", identify: Callable[[Any], "ToolFacade"]) -> None:
    """Mount the two routes on ``app``; ``identify(headers)`` is the facade a request runs as."""
    from starlette.background import BackgroundTask
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def reply(result: dict[str, Any], background: BackgroundTask | None = None) -> "Response":
        status = _STATUS.get(result["error"]["code"], 500) if is_error(result) else 200
        return JSONResponse(result, status_code=status, background=background)

    async def ingest(request: "Request") -> "Response":
        try:
            target = identify(request.headers)
            body = await _read_json(request)
            key, session_id, messages, after = _ingest_args(target, body)
        except ToolError as exc:
            if exc.code == "payload_too_large" and exc.field == "body":  # an export, often: say where it goes
                exc = ToolError(exc.code, f"{exc.message}; {EXPORT_HINT}", field=exc.field)
            return reply(exc.to_dict())
        store = _need_lcm(target)  # _ingest_args checked it already; this names its type
        result = await runner.run(target.agent_id, "lcm ingest",
                                  lambda: _guarded(lambda: _ingest(store, key, session_id, messages)))
        if is_error(result) or not after or not result.get("compaction_debt"):
            return reply(result)

        async def pay() -> None:  # after the answer: the host does not wait for compaction
            paid = await runner.run(target.agent_id, "lcm after_turn",
                                    lambda: _guarded(lambda: _after_turn(store, key)))
            if is_error(paid):
                log.warning("lcm: after-turn compaction of %s failed: %s", key, paid["error"]["message"])

        return reply({**result, "after_turn": "scheduled"}, BackgroundTask(pay))

    async def assemble(request: "Request") -> "Response":
        try:
            target = identify(request.headers)
            args = _assemble_args(target, request.query_params)
        except ToolError as exc:
            return reply(exc.to_dict())
        # A GET, so the guard lets a read-only key through; but at the threshold assemble
        # compacts or records debt, which are writes: such a key gets the context as it stands.
        principal = principal_of(request.scope)
        if principal is not None and principal.read_only:
            args["read_only"] = True
        store = _need_lcm(target)  # _assemble_args checked it already; this names its type
        return reply(await runner.run(target.agent_id, "lcm assemble",
                                      lambda: _guarded(lambda: store.assemble(**args).to_dict())))

    def lifecycle(name: str, fields: tuple[str, ...],
                  call: Callable[["LcmStore", str, dict[str, Any]], dict[str, Any]], *,
                  timeout: float | None = None) -> Callable[..., Any]:
        async def route(request: "Request") -> "Response":
            try:
                target = identify(request.headers)
                body = await _read_json(request)
                key, extra = _lifecycle_args(target, body, fields)
            except ToolError as exc:
                return reply(exc.to_dict())
            store = _need_lcm(target)
            return reply(await runner.run(target.agent_id, f"lcm {name}",
                                          lambda: _guarded(lambda: call(store, key, extra)), timeout=timeout))
        return route

    reset = lifecycle("reset", ("sessionKey", "cause"),
                      lambda store, key, extra: store.reset(key, extra.get("cause") or "reset").to_dict())
    new = lifecycle("new", ("sessionKey",), lambda store, key, extra: store.new_context(key).to_dict())
    # a rotation summarizes a whole conversation's history: it may wait the server's longest deadline
    rotate = lifecycle("rotate", ("sessionKey", "apply", "maxRounds"), _rotate, timeout=runner.limits.max_timeout)
    app.router.routes.extend([Route(INGEST_PATH, ingest, methods=["POST"]),
                              Route(ASSEMBLE_PATH, assemble, methods=["GET"]),
                              Route(RESET_PATH, reset, methods=["POST"]),
                              Route(NEW_PATH, new, methods=["POST"]),
                              Route(ROTATE_PATH, rotate, methods=["POST"])])


async def _read_json(request: "Request") -> Any:
    """The body as JSON, read no further than ``MAX_BODY_BYTES``."""
    declared = request.headers.get("content-length")
    if declared is not None and ascii_digits(declared) and int(declared) > MAX_BODY_BYTES:
        raise ToolError("payload_too_large", f"the body is {declared} bytes; the limit is {MAX_BODY_BYTES}",
                        field="body")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:  # a body sent without (or with a false) length
            raise ToolError("payload_too_large", f"the body is over the limit of {MAX_BODY_BYTES} bytes",
                            field="body")
        chunks.append(chunk)
    from amem.kernel import safejson
    from amem.kernel.errors import InvalidArgumentError

    try:  # bad UTF-8, bad JSON, deep nesting, lone surrogates: one rule (amem.kernel.safejson)
        return safejson.loads(b"".join(chunks))
    except InvalidArgumentError as exc:
        raise ToolError("invalid_argument", str(exc), field=exc.field) from None


#: how a refused chat export is told where it loads
EXPORT_HINT = ("a ChatGPT or Claude data export is loaded from its file on the server's machine with "
                "`amem lcm ingest FILE` (each conversation under a key of its own, streamed, however large)")


def _refuse_export(body: Any) -> None:
    """Refuse a chat app's data export posted as the body (its array, one of its conversations, or
    its conversations as ``messages``): this route takes one session's turns, and an export is
    many conversations, each stored under its own key, by the command that reads the file."""
    from .chats import detect

    def conversation(item: Any) -> bool:  # a message that merely has such a field is a message
        return detect(item) is not None and "role" not in item and "messages" not in item

    where = None
    if conversation(body) or (isinstance(body, list) and body and conversation(body[0])):
        where = "body"
    elif isinstance(body, dict) and isinstance(body.get("messages"), list):
        where = next((f"messages[{i}]" for i, m in enumerate(body["messages"]) if conversation(m)), None)
    if where is None:
        return
    raise ToolError("invalid_argument", f"{where} is a chat app's conversation, not a message: "
                    f"{INGEST_PATH} takes one session's messages; {EXPORT_HINT}", field=where)


def _ingest_args(target: "ToolFacade", body: Any) -> tuple[str, str | None, list[Any], bool]:
    _refuse_export(body)
    if not isinstance(body, dict):
        raise ToolError("invalid_argument", "the body must be a JSON object with messages", field="body")
    unknown = sorted(set(body) - set(_INGEST_FIELDS))
    if unknown:
        raise ToolError("invalid_argument", f"unknown fields {unknown}; expected {list(_INGEST_FIELDS)}",
                        field=unknown[0])
    key = _session_key(target, body.get("sessionKey"))
    session_id = body.get("sessionId")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()
                                   or len(session_id) > MAX_SESSION_ID_CHARS
                                   or any(unicodedata.category(ch).startswith("C") for ch in session_id)):
        raise ToolError("invalid_argument", f"sessionId must be a non-empty string of at most "
                        f"{MAX_SESSION_ID_CHARS} characters without control characters", field="sessionId")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ToolError("invalid_argument", "messages must be a non-empty list of {role, content} objects",
                        field="messages")
    if len(messages) > MAX_MESSAGES:
        raise ToolError("payload_too_large", f"{len(messages)} messages; the limit is {MAX_MESSAGES} a request",
                        field="messages")
    after = body.get("afterTurn", True)
    if not isinstance(after, bool):
        raise ToolError("invalid_argument", "afterTurn must be true or false", field="afterTurn")
    _need_lcm(target)
    return key, session_id, messages, after


def _lifecycle_args(target: "ToolFacade", body: Any, fields: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The session key of a ``/lcm/reset``, ``/lcm/new`` or ``/lcm/rotate`` body (the caller's
    own only), and its other fields, checked (``fields`` says which the route takes)."""
    if not isinstance(body, dict):
        raise ToolError("invalid_argument", f"the body must be a JSON object (fields {list(fields)})", field="body")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ToolError("invalid_argument", f"unknown fields {unknown}; expected {list(fields)}", field=unknown[0])
    cause = body.get("cause")
    if cause is not None and (not isinstance(cause, str) or not cause.strip() or len(cause) > 200):
        raise ToolError("invalid_argument", "cause must be a non-empty string of at most 200 characters",
                        field="cause")
    apply = body.get("apply", False)
    if not isinstance(apply, bool):
        raise ToolError("invalid_argument", "apply must be true or false", field="apply")
    rounds = body.get("maxRounds", 20)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 100:
        raise ToolError("invalid_argument", "maxRounds must be an integer from 1 to 100", field="maxRounds")
    _need_lcm(target)
    return _session_key(target, body.get("sessionKey")), {"cause": cause, "apply": apply, "max_rounds": rounds}


def _rotate(store: "LcmStore", key: str, extra: dict[str, Any]) -> dict[str, Any]:
    from lcm.operator.rotate import apply_rotate, plan_rotate

    plan = plan_rotate(store, key)
    return (apply_rotate(store, plan, max_rounds=extra["max_rounds"]) if extra["apply"] else plan).to_dict()


def _session_key(target: "ToolFacade", requested: Any) -> str:
    """The request's key (the caller's own only), else the family its headers chose."""
    if requested is None:
        return target.session_key
    return session_key_for(target.agent_id, requested, field="sessionKey")


def _need_lcm(target: "ToolFacade") -> "LcmStore":
    if target.lcm is None:
        raise ToolError("unavailable", "this server was started without the conversation store (lcm)")
    return target.lcm


def _assemble_args(target: "ToolFacade", query: Any) -> dict[str, Any]:
    allowed = ("sessionKey", "budget", "prompt", "model", "contextWindow", "provider", "cacheReadTokens",
               "cacheWriteTokens")
    unknown = sorted(set(query.keys()) - set(allowed))
    if unknown:
        raise ToolError("invalid_argument", f"unknown parameters {unknown}; expected {list(allowed)}",
                        field=unknown[0])
    for name in query.keys():
        if len(query.getlist(name)) > 1:
            raise ToolError("invalid_argument", f"{name} was given {len(query.getlist(name))} times", field=name)
    args: dict[str, Any] = {"session_key": _session_key(target, query.get("sessionKey")),
                            "token_budget": _positive(query.get("budget"), "budget", required=True)}
    if query.get("prompt") is not None:
        args["prompt"] = query["prompt"]
    if query.get("model") is not None:
        args["model"] = query["model"]
    if query.get("contextWindow") is not None:
        args["context_window"] = _positive(query["contextWindow"], "contextWindow")
    if query.get("provider") is not None:
        args["provider"] = query["provider"]
    # the host's prompt-cache telemetry of this turn, kept on a compaction debt row (0 allowed)
    for name, key in (("cacheReadTokens", "cache_read_tokens"), ("cacheWriteTokens", "cache_write_tokens")):
        raw = query.get(name)
        if raw is not None:
            if not ascii_digits(raw) or len(raw) > 12:
                raise ToolError("invalid_argument", f"{name} must be an integer >= 0", field=name)
            args[key] = int(raw)
    _need_lcm(target)
    return args


def _positive(raw: str | None, field: str, *, required: bool = False) -> int | None:
    if raw is None:
        if required:
            raise ToolError("invalid_argument", f"{field} is required (a positive integer)", field=field)
        return None
    if not ascii_digits(raw) or len(raw) > 12 or int(raw) <= 0:
        raise ToolError("invalid_argument", f"{field} must be a positive integer; got {raw[:40]!r}", field=field)
    return int(raw)


def _ingest(store: "LcmStore", key: str, session_id: str | None, messages: list[Any]) -> dict[str, Any]:
    if session_id is not None and store.conversation(key) is None:
        # lcm gives a key that has no conversation yet the active conversation its session id
        # names when that one has no key (lossless-claw's adoption). Such a conversation was
        # written without a key (a script on the library): it is no agent's, and adopting it
        # would hand its whole history to whichever agent sends the id first.
        found = store.conversation(session_id=session_id)
        if found is not None and found.session_key is None:
            # (the conversation's id is not said: it is no business of this caller's)
            raise ToolError("forbidden", f"sessionId {session_id[:100]!r} names a conversation "
                            "that has no session key and so belongs to no agent; send these "
                            "messages without sessionId (or with another), or have the data "
                            "directory's owner ingest them", field="sessionId")
    result: dict[str, Any] = store.ingest(key, messages, session_id=session_id).to_dict()
    result["session_key"] = key
    # what the after-turn payment will look at: the debt of this key's active conversation
    result["compaction_debt"] = store.db.one(
        "SELECT 1 FROM compaction_debt d JOIN conversations c ON c.id = d.conversation_id AND c.active = 1 "
        "WHERE c.session_key = ?", (key,)) is not None  # fmt: skip
    return result


def _after_turn(store: "LcmStore", key: str) -> dict[str, Any]:
    paid = store.after_turn(key)
    return {"compaction": None if paid is None else paid.to_dict()}


def _guarded(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()``, every failure turned into a structured error (as ``ToolFacade.call`` does)."""
    from amem.kernel.errors import MemoryToolError

    try:
        return work()
    except ToolError as exc:
        return error_result(exc.code, redact(exc.message), exc.field)
    except MemoryToolError as exc:
        code = getattr(exc, "code", "internal")
        return error_result(str(code), redact(str(exc)), getattr(exc, "field", None))
    except Exception as exc:  # never a traceback to the host; the log keeps it
        log.exception("lcm host route failed unexpectedly")
        return error_result("internal", f"the request failed unexpectedly ({type(exc).__name__}); "
                            "the server log has the details")
