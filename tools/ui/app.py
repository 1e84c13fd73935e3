"""The inspector's routes under ``/ui`` on the HTTP server (``amem serve --http``, ``amem ui``).

Every route sits behind ``tools.http_guard`` like the rest of the app: pages are reached with
the session cookie of ``tools.ui.sessions`` (or a Bearer key), and the principal the guard
admitted decides the agent. An agent's key sees its own agent only (``?agent=`` naming another
is refused); an owner key chooses any agent and sees every conversation and the store-wide
reports. Pages only read. The changes a note's page makes (undoing a supersession, separating
a joined text) are JSON ``POST``s to ``/ui/api/...`` with the session's CSRF token, through
one door (``note_action``): refused to a read-only key and to another agent's key, and run in
two steps, the dry run that says what would change, then the confirmed change.

Pages are built in the server's thread pool (Starlette runs plain functions there) from one
engine page or one search each, and say in their footer how long they took.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amem.kernel import safejson

from ..errors import ToolError
from ..http_guard import FAVICON_PATH, UI_PATH, UI_SESSION_SCOPE_KEY, principal_of
from ..keys import Principal
from .html import CSP, Html, bare, esc, join, page, reset_base, set_base
from .sessions import COOKIE, UiSession, UiSessions

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from amem import MemoryStore
    from lcm import LcmStore

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
_STATIC_FILES = {"ui.css": "text/css", "ui.js": "text/javascript", "LICENSE.txt": "text/plain"}
_HEADERS = {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
            "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class UiDeps:
    """What the pages read: the stores, the server's default agent, the sessions, the owner's
    reports (``report(name, agent, clean)``) and where the nightly run history lives."""

    memory: MemoryStore | None
    lcm: LcmStore | None
    default_agent: str
    sessions: UiSessions
    owner_report: Callable[[str, str, bool], dict[str, Any]] | None = None
    runs_path: Path | None = None
    agent_status: Callable[[str], dict[str, Any]] | None = None
    #: what the request budgets refused, per key (``tools.ratelimit``): the owner's health page
    budgets: Callable[[], dict[str, Any]] | None = None
    #: one key's own budget and refusals, by key id: an agent's health page (never another's)
    own_budget: Callable[[str], dict[str, Any]] | None = None


class Denied(Exception):
    """A page the principal may not see (403), with the reason shown."""


def add_ui_routes(app: Starlette, deps: UiDeps) -> None:
    """Mount the inspector's routes on ``app`` (behind the app's guard)."""
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Route

    def html_response(text: str, status: int = 200, started: float | None = None) -> Response:
        headers = dict(_HEADERS)
        if started is not None:
            headers["Server-Timing"] = f"page;dur={(time.perf_counter() - started) * 1000:.1f}"
        return HTMLResponse(text, status_code=status, headers=headers)

    def view(name: str, title: str, build: Callable[[Request, str, Principal], Html]
             ) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            started = time.perf_counter()
            principal = _principal(request)
            session: UiSession | None = request.scope.get(UI_SESSION_SCOPE_KEY)
            # every link of the page under the session's own path (its cookie goes nowhere else)
            base = set_base(session.base if session is not None else UI_PATH)
            try:
                return build_page(request, principal, session, started)
            finally:
                reset_base(base)

        def build_page(request: Request, principal: Principal, session: UiSession | None,
                       started: float) -> Response:
            try:
                agent = _agent(request, principal, deps.default_agent)
                body = build(request, agent, principal)
                status = 200
            except Denied as exc:
                agent, body, status = principal.agent or deps.default_agent, Html(
                    f'<p class="error" role="alert">{esc(exc)}</p>'), 403
            except Exception as exc:  # a bad filter or a missing note: the page says which
                status, message = _error_status(exc)
                agent = principal.agent or deps.default_agent
                body = Html(f'<p class="error" role="alert">{esc(message)}</p>')
            text = page(title, body, current=name, who=_who(principal), agent=agent,
                        csrf=session.csrf if session else "",
                        can_write=not principal.read_only,
                        timing_ms=(time.perf_counter() - started) * 1000,
                        choose_agent=principal.owner)
            return html_response(text, status, started)

        return endpoint

    # ------------------------------------------------------------------ pages

    def notes(request: Request, agent: str, principal: Principal) -> Html:
        from .notes import no_notes_hint, render_notes

        memory = _need_memory(deps)
        return join([no_notes_hint(memory, agent, owner=principal.owner),
                     render_notes(memory, agent, request.query_params)])

    def search(request: Request, agent: str, principal: Principal) -> Html:
        from .notes import no_notes_hint, render_search

        memory = _need_memory(deps)
        return join([no_notes_hint(memory, agent, owner=principal.owner),
                     render_search(memory, agent, request.query_params)])

    def note(request: Request, agent: str, principal: Principal) -> Html:
        from .notes import render_note

        return render_note(_need_memory(deps), agent, request.path_params["note_id"],
                           can_write=not principal.read_only)

    def graph(request: Request, agent: str, principal: Principal) -> Html:
        from .graph import render_graph
        from .notes import no_notes_hint

        q = request.query_params
        memory = _need_memory(deps)
        return join([no_notes_hint(memory, agent, owner=principal.owner),
                     render_graph(memory, agent, q.get("note", "").strip(),
                                  q.get("subject", "").strip(), q.get("q", "").strip()[:1000])])

    def conversations(request: Request, agent: str, principal: Principal) -> Html:
        from .conversations import render_list

        lcm = _need_lcm(deps)
        return render_list(lcm, None if principal.owner else agent, agent,
                           request.query_params.get("page"))

    def conversation(request: Request, agent: str, principal: Principal) -> Html:
        from ..numbers import whole_number
        from .conversations import MAX_ID, render_conversation

        number = whole_number(request.path_params["conversation_id"], "conversation id",
                              maximum=MAX_ID)
        return render_conversation(_need_lcm(deps), None if principal.owner else agent, agent,
                                   number, request.query_params.get("page"),
                                   request.query_params.get("budget"),
                                   can_write=not principal.read_only,
                                   raw_after=request.query_params.get("after"),
                                   raw_before=request.query_params.get("before"))

    def conversation_item(kind: str) -> Callable[[Request, str, Principal], Html]:
        def build(request: Request, agent: str, principal: Principal) -> Html:
            from ..numbers import whole_number
            from .conversations import MAX_ID, render_item

            number = whole_number(request.path_params["conversation_id"], "conversation id",
                                  maximum=MAX_ID)
            return render_item(_need_lcm(deps), None if principal.owner else agent, agent,
                               number, kind, request.path_params["item_id"])

        return build

    def health(request: Request, agent: str, principal: Principal) -> Html:
        from dataclasses import asdict

        from scheduler.record import read_runs_checked

        from ..reports import lcm_report
        from .health import render_health

        memory = _need_memory(deps)
        unreadable = None
        try:
            runs, skipped = read_runs_checked(deps.runs_path) if deps.runs_path else ([], [])
        except OSError as exc:  # a folder in its place, no permission: said, not a 500
            runs, skipped, unreadable = [], [], f"{type(exc).__name__}: {exc.strerror or exc}"
        doctor = None
        if principal.owner:
            # not the owner's `status` report: it counts the agents by reading every note
            notes = asdict(memory.info())
            if notes.get("agents") is None:  # info() leaves it out: counting reads every note
                notes["agents"] = "not counted on this page (it reads every note): amem status"
            status: dict[str, Any] = {"memory": notes,
                                      "lcm": lcm_report(deps.lcm, "status"),
                                      "last nightly run": runs[-1] if runs else "none recorded"}
            if deps.budgets is not None:
                status["rate limit"] = deps.budgets()
            if request.query_params.get("doctor") == "1" and deps.owner_report is not None:
                doctor = deps.owner_report("doctor", agent, False)
        else:
            status = (deps.agent_status(agent) if deps.agent_status is not None
                      else {"agent": agent, "notes": memory.count(agent_id=agent)})
            if deps.own_budget is not None:  # the key's own counts: a looping client shows here
                status = {**status, "rate limit": deps.own_budget(principal.key_id)}
        return render_health(owner=principal.owner, status=status, doctor=doctor, runs=runs,
                             index_build=memory.index.build.to_dict(), agent=agent,
                             skipped_lines=skipped, history_unreadable=unreadable)

    # ------------------------------------------------------------------ login

    def login(request: Request) -> Response:
        token = request.query_params.get("t")
        if token:
            session = deps.sessions.redeem(token[:200])
            if session is None:
                return html_response(bare("Login link used or expired", Html(
                    '<p class="error" role="alert">This login link was used already or has '
                    "expired. Run <code>amem ui</code> again for a new one, or log in with a "
                    "key below.</p>" + _key_form())), 401)
            return _with_cookie(RedirectResponse(f"{session.base}/notes", status_code=303), session)
        return html_response(bare("Log in", _key_form()))

    def login_with_key(request: Request) -> Response:
        principal = _principal(request)
        session = deps.sessions.open(principal)
        log.info("inspector session opened for key %s", principal.key_id)
        return _with_cookie(JSONResponse({"ok": True, "next": f"{session.base}/notes"}), session)

    def login_link(request: Request) -> Response:
        principal = _principal(request)
        if not principal.owner or request.scope.get(UI_SESSION_SCOPE_KEY) is not None:
            return JSONResponse({"error": {"code": "forbidden", "message": "login links are "
                                           "issued to an owner key or the server's own CLI",
                                           "field": "Authorization"}}, status_code=403)
        token = deps.sessions.issue_login(principal)
        return JSONResponse({"path": f"{UI_PATH}/login?t={token}"})

    def logout_page(request: Request) -> Response:
        # a GET changes nothing (a link or a prefetch must not end the session): it offers the
        # button, whose POST carries the page's CSRF token
        session: UiSession | None = request.scope.get(UI_SESSION_SCOPE_KEY)
        base = set_base(session.base if session is not None else UI_PATH)
        try:
            return html_response(page("Log out", Html(
                "<p>End this browser session? The login link or a key is needed to come back.</p>"
                '<button type="button" id="logout-now">Log out</button>'), current="", who=_who(
                    _principal(request)), agent=None, csrf=session.csrf if session else ""))
        finally:
            reset_base(base)

    def logout(request: Request) -> Response:
        session: UiSession | None = request.scope.get(UI_SESSION_SCOPE_KEY)
        if session is not None:
            deps.sessions.close(session.id)
        response = JSONResponse({"ok": True, "next": f"{UI_PATH}/login"}, headers=_HEADERS)
        if session is not None:
            response.delete_cookie(COOKIE, path=session.base)
        return response

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC_FILES.get(name)
        if kind is None:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response((STATIC / name).read_bytes(), media_type=kind,
                        headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"})

    def favicon(request: Request) -> Response:
        # browsers ask for it on every page; without a route it was a 401 in every console
        return Response(status_code=204, headers={"Cache-Control": "max-age=86400"})

    def home(request: Request) -> Response:
        session: UiSession | None = request.scope.get(UI_SESSION_SCOPE_KEY)
        return RedirectResponse(f"{session.base if session else UI_PATH}/notes", status_code=303,
                                headers=_HEADERS)

    # ------------------------------------------------------------------ actions

    async def note_action(request: Request, fields: tuple[str, ...], verb: str,
                          preview: Callable[[MemoryStore, str, dict[str, Any]], dict[str, Any]],
                          apply: Callable[[MemoryStore, str, dict[str, Any]], dict[str, Any]]
                          ) -> Response:
        """The one door of a note's changes: the body checked (each of ``fields`` a string),
        the agent the key may act for, refused to a read-only key, then the dry run unless
        ``confirm`` is true. The guard has already checked the session, its CSRF token, the
        Origin and the JSON body (``tools.http_guard``)."""
        principal = _principal(request)
        raw = await request.body()  # read whole and bounded by the guard

        def work() -> dict[str, Any]:
            body = safejson.loads(raw, root="body") if raw else None
            shape = "{" + ", ".join(f'"{f}": ...' for f in fields) + ', "agent"?, "confirm"?}'
            if not isinstance(body, dict):
                raise ToolError("invalid_argument", f"send {shape}", field=fields[0])
            for name in fields:
                if not isinstance(body.get(name), str):
                    raise ToolError("invalid_argument", f"send {shape}", field=name)
            agent = _agent_named(body.get("agent"), principal, deps.default_agent)
            if principal.read_only:
                raise ToolError("forbidden", f"key {principal.key_id} is read-only: {verb} needs "
                                "a key with write rights", field="Authorization")
            memory = _need_memory(deps)
            if body.get("confirm") is not True:
                return {"dry_run": True, **preview(memory, agent, body)}
            done = apply(memory, agent, body)
            log.info("inspector: key %s: %s of note %s of agent %s", principal.key_id, verb,
                     body[fields[0]], agent)
            return {"dry_run": False, **done}

        return await _answer(work)

    async def unsupersede(request: Request) -> Response:
        from .notes import unsupersede_preview

        return await note_action(
            request, ("id",), "undo",
            lambda memory, agent, body: unsupersede_preview(memory, agent, body["id"]),
            lambda memory, agent, body: memory.unsupersede(body["id"], agent_id=agent))

    async def separate(request: Request) -> Response:
        from .notes import separate_preview, separated_words

        def apply(memory: MemoryStore, agent: str, body: dict[str, Any]) -> dict[str, Any]:
            result = memory.separate(body["id"], body["part"], agent_id=agent).to_dict()
            return {"done": separated_words(result), **result}

        return await note_action(
            request, ("id", "part"), "separating",
            lambda memory, agent, body: separate_preview(memory, agent, body["id"], body["part"]),
            apply)

    plans = PlanBook()

    async def lcm_action(request: Request) -> Response:
        principal = _principal(request)
        raw = await request.body()

        def work() -> dict[str, Any]:
            body = safejson.loads(raw, root="body") if raw else None
            if not isinstance(body, dict):
                raise ToolError("invalid_argument", 'send {"op": "rewrite"|"dissolve"|"repair", '
                                '"summaryId" or "conversationId", "agent"?, "confirm"?, "plan"?}')
            agent = _agent_named(body.get("agent"), principal, deps.default_agent)
            if principal.read_only:
                raise ToolError("forbidden", f"key {principal.key_id} is read-only: changes need "
                                "a key with write rights", field="Authorization")
            store = _need_lcm(deps)
            if body.get("confirm") is True:
                op, plan = plans.take(principal.key_id, body.get("plan"))
                return lcm_apply(store, op, plan)
            op, plan, preview = lcm_plan(store, None if principal.owner else agent, body)
            return {"dry_run": True, "plan": plans.put(principal.key_id, op, plan), **preview}

        return await _answer(work)

    routes = [
        Route(UI_PATH, home, methods=["GET"]),
        Route(FAVICON_PATH, favicon, methods=["GET"]),
        Route(UI_PATH + "/login", login, methods=["GET"]),
        Route(UI_PATH + "/login", login_with_key, methods=["POST"]),
        Route(UI_PATH + "/login-link", login_link, methods=["POST"]),
        Route(UI_PATH + "/logout", logout_page, methods=["GET"]),
        Route(UI_PATH + "/logout", logout, methods=["POST"]),
        Route(UI_PATH + "/static/{name}", static, methods=["GET"]),
        Route(UI_PATH + "/notes", view("notes", "Notes", notes), methods=["GET"]),
        Route(UI_PATH + "/search", view("search", "Search playground", search), methods=["GET"]),
        Route(UI_PATH + "/note/{note_id:path}", view("notes", "Note", note), methods=["GET"]),
        Route(UI_PATH + "/graph", view("graph", "Graph", graph), methods=["GET"]),
        Route(UI_PATH + "/conversations", view("conversations", "Conversations", conversations),
              methods=["GET"]),
        Route(UI_PATH + "/conversation/{conversation_id}",
              view("conversations", "Conversation", conversation), methods=["GET"]),
        Route(UI_PATH + "/conversation/{conversation_id}/message/{item_id}",
              view("conversations", "Message", conversation_item("message")), methods=["GET"]),
        Route(UI_PATH + "/conversation/{conversation_id}/summary/{item_id}",
              view("conversations", "Summary", conversation_item("summary")), methods=["GET"]),
        Route(UI_PATH + "/health", view("health", "Health", health), methods=["GET"]),
        Route(UI_PATH + "/api/unsupersede", unsupersede, methods=["POST"]),
        Route(UI_PATH + "/api/separate", separate, methods=["POST"]),
        Route(UI_PATH + "/api/lcm", lcm_action, methods=["POST"]),
    ]
    app.router.routes.extend(routes)


class PlanBook:
    """The dry runs shown and not yet confirmed: a confirmation applies exactly the plan the
    page showed (the kit refuses it if the rows changed since), for the key that planned it."""

    MAX = 64

    def __init__(self) -> None:
        import threading

        self._plans: dict[str, tuple[str, str, Any]] = {}
        self._lock = threading.Lock()

    def put(self, key_id: str, op: str, plan: Any) -> str:
        import secrets

        token = secrets.token_urlsafe(16)
        with self._lock:
            while len(self._plans) >= self.MAX:
                self._plans.pop(next(iter(self._plans)))
            self._plans[token] = (key_id, op, plan)
        return token

    def take(self, key_id: str, token: Any) -> tuple[str, Any]:
        with self._lock:
            found = self._plans.get(token) if isinstance(token, str) else None
            if found is None or found[0] != key_id:
                raise ToolError("invalid_argument", "no such dry run (applied, expired or "
                                "another key's): run the dry run again", field="plan")
            del self._plans[token]
        return found[1], found[2]


def lcm_plan(store: LcmStore, agent: str | None, body: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """The dry run of one repair-kit change, checked against the caller's conversations."""
    from lcm.operator.dissolve import plan_dissolve
    from lcm.operator.repair import RepairKit

    from ..numbers import whole_number
    from .conversations import MAX_ID, conversation

    op = body.get("op")
    if op not in ("rewrite", "dissolve", "repair"):
        raise ToolError("invalid_argument", "op must be rewrite, dissolve or repair", field="op")
    summary_id = body.get("summaryId")
    if op in ("rewrite", "dissolve"):
        if not isinstance(summary_id, str) or not summary_id:
            raise ToolError("invalid_argument", f"{op} needs summaryId", field="summaryId")
        rows = store.db.query("SELECT conversation_id FROM summaries WHERE summary_id = ?", [summary_id])
        if not rows:
            raise ToolError("not_found", f"no summary {summary_id[:80]!r}", field="summaryId")
        conversation(store, agent, int(rows[0][0]))  # another agent's: not found, as a missing one
    else:
        raw = body.get("conversationId")
        if raw is None:
            raise ToolError("invalid_argument", "repair needs conversationId", field="conversationId")
        conversation_id = whole_number(raw, "conversationId", maximum=MAX_ID)
        conversation(store, agent, conversation_id)
    if op == "dissolve":
        plan: Any = plan_dissolve(store.db, summary_id)  # type: ignore[arg-type]
        effect = (f"dissolve {plan.summary_id}: {len(plan.restored)} sources return to the context "
                  f"({plan.restored_tokens} tokens); stored context {plan.context_tokens_before} -> "
                  f"{plan.context_tokens_after} tokens")
        return op, plan, {"effect": effect, "diff": ""}
    kit = RepairKit.of(store)
    plan = kit.plan_rewrite(summary_id) if op == "rewrite" else kit.plan_repair(  # type: ignore[arg-type]
        conversation_id=conversation_id)
    skipped = "; ".join(f"{s.summary_id}: {s.reason}" for s in plan.skipped[:5])
    effect = (f"{op}: {len(plan.rewrites)} summaries rewritten, token change {plan.token_delta:+d}"
              + (f"; skipped {len(plan.skipped)} ({skipped})" if plan.skipped else ""))
    return op, plan, {"effect": effect, "diff": "".join(r.diff for r in plan.rewrites)[:20000]}


def lcm_apply(store: LcmStore, op: str, plan: Any) -> dict[str, Any]:
    from lcm.operator.dissolve import apply_dissolve
    from lcm.operator.repair import RepairKit

    if op == "dissolve":
        done: Any = apply_dissolve(store.db, plan)
    else:
        if not plan.rewrites:
            return {"dry_run": False, "applied": False, "done": "nothing to write"}
        done = RepairKit.of(store).apply(plan)
    log.info("inspector: %s applied to conversation %s", op, done.conversation_id)
    return {"dry_run": False, "applied": True, "done": f"{op} applied", **done.to_dict()}


def _principal(request: Request) -> Principal:
    principal = principal_of(request.scope)
    if principal is None:  # the guard admits no one to these routes without one
        raise RuntimeError("an inspector route was reached without the guard's principal")
    return principal


def _agent(request: Request, principal: Principal, default: str) -> str:
    return _agent_named(request.query_params.get("agent") or None, principal, default)


def _agent_named(named: Any, principal: Principal, default: str) -> str:
    """The agent a page shows: an agent key's own; an owner's choice (the server's default)."""
    from amem.notes import check_agent

    if named is not None and not isinstance(named, str):
        raise ToolError("invalid_argument", "agent must be a string", field="agent")
    if principal.owner:
        agent = named or default
    else:
        agent = principal.agent or default
        if named and named != agent:
            raise Denied(f"key {principal.key_id} sees agent {agent!r} only, not {named[:100]!r}")
    try:
        check_agent(agent, field="agent")
    except ValueError as exc:
        raise ToolError("invalid_argument", str(exc), field="agent") from None
    return agent


def _need_memory(deps: UiDeps) -> MemoryStore:
    if deps.memory is None:
        raise ToolError("unavailable", "this server runs without a note store")
    return deps.memory


def _need_lcm(deps: UiDeps) -> LcmStore:
    if deps.lcm is None:
        raise ToolError("unavailable", "this server runs without conversation memory (--no-lcm)")
    return deps.lcm


async def _answer(work: Callable[[], dict[str, Any]]) -> Response:
    """An action's ``work`` run off the event loop, answered as JSON; a failure is the tools'
    structured error with its HTTP status."""
    import anyio
    from starlette.responses import JSONResponse

    try:
        return JSONResponse(await anyio.to_thread.run_sync(work))
    except Exception as exc:
        status, message = _error_status(exc)
        return JSONResponse({"error": {"code": _error_code(exc, status), "message": message,
                                       "field": getattr(exc, "field", None)}},
                            status_code=status)


#: the code of a failure that carries none, by its status (a 403 said "invalid_argument")
_CODES = {400: "invalid_argument", 403: "forbidden", 404: "not_found", 503: "unavailable",
          500: "internal"}


def _error_code(exc: Exception, status: int) -> str:
    """The error's code, agreeing with its status: its own when it has one, else the status's."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and not isinstance(exc, Denied) else _CODES.get(status, "error")


def _error_status(exc: Exception) -> tuple[int, str]:
    """The HTTP status and message of a page's failure (a caller's error names what is off)."""
    from amem.kernel.errors import MemoryToolError

    if isinstance(exc, Denied):
        return 403, str(exc)
    code = getattr(exc, "code", None)
    if isinstance(exc, (ToolError, MemoryToolError)) or code is not None:
        message = getattr(exc, "message", None) or str(exc)
        return {"not_found": 404, "forbidden": 403, "unavailable": 503,
                "llm_unavailable": 503}.get(str(code), 400), message
    if isinstance(exc, ValueError):
        return 400, str(exc)
    log.exception("inspector page failed")
    return 500, f"the page failed ({type(exc).__name__}); the server's log has the details"


def _who(principal: Principal) -> str:
    if principal.key_id in ("server-record", "ui-login"):
        return "owner (this data directory)"
    kind = "owner key" if principal.owner else "agent key"
    return f"{kind} {principal.key_id}"


def _with_cookie(response: Response, session: UiSession) -> Response:
    # Path: the session's secret path. Cookies are not kept apart by port, so a cookie for
    # /ui went to every server on 127.0.0.1; under /ui/s/<key> only to this session's pages.
    response.set_cookie(COOKIE, session.id, path=session.base, httponly=True, samesite="strict",
                        secure=False)  # 127.0.0.1 over plain HTTP: a Secure cookie would never be sent
    for k, v in _HEADERS.items():
        response.headers.setdefault(k, v)
    return response


def _key_form() -> Html:
    return Html(
        '<form id="key-login" aria-label="Log in with a key">'
        '<div class="field"><label for="key">Key</label>'
        '<input id="key" name="key" type="password" autocomplete="off" required '
        'aria-describedby="key-hint"><small id="key-hint">An amem key (amem keys add). It is sent '
        "once to open a session, and not kept by the page.</small></div>"
        '<button type="submit">Log in</button>'
        '<p class="error" role="alert" id="login-error"></p></form>')


__all__ = ["UiDeps", "add_ui_routes"]
