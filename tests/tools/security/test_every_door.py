"""Every route of the HTTP app is held by the one guard (``tools.http_guard``), and a request a
web page can send never changes data.

The routes are enumerated from the app itself, so a route added later is in the matrix by
construction; a route the matrix does not know how to call fails the test until it is added.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from tools import ToolFacade
from tools.http_guard import PROOF_PATH, Guard, GuardConfig
from tools.mcp_server import http_app

from ..http_server import refusal
from .conftest import Served

#: how to call each route (a method and a body it accepts); a new route must be added here
CALLS: dict[str, tuple[str, bytes]] = {
    "/mcp": ("POST", b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {'
                     b'"protocolVersion": "2025-06-18", "capabilities": {}, '
                     b'"clientInfo": {"name": "probe", "version": "0"}}}'),
    "/lcm/ingest": ("POST", b'{"messages": [{"role": "user", "content": "planted by a web page"}]}'),
    "/lcm/assemble": ("GET", b""),
    "/lcm/reset": ("POST", b"{}"),
    "/lcm/new": ("POST", b"{}"),
    "/lcm/rotate": ("POST", b'{"apply": true}'),
    PROOF_PATH: ("GET", b""),
    # the inspector (tools.ui): pages, its login, its actions
    "/ui": ("GET", b""),
    "/ui/login": ("GET", b""),
    "/ui/logout": ("GET", b""),
    "/ui/login-link": ("POST", b"{}"),
    "/ui/static/{name}": ("GET", b""),
    "/ui/notes": ("GET", b""),
    "/ui/search": ("GET", b""),
    "/ui/note/{note_id:path}": ("GET", b""),
    "/ui/graph": ("GET", b""),
    "/ui/conversations": ("GET", b""),
    "/ui/conversation/{conversation_id}": ("GET", b""),
    "/ui/conversation/{conversation_id}/message/{item_id}": ("GET", b""),
    "/ui/conversation/{conversation_id}/summary/{item_id}": ("GET", b""),
    "/ui/health": ("GET", b""),
    "/favicon.ico": ("GET", b""),
    "/ui/api/unsupersede": ("POST", b'{"id": "x", "confirm": true}'),
    "/ui/api/separate": ("POST", b'{"id": "x", "part": "p", "confirm": true}'),
    "/ui/api/lcm": ("POST", b'{"op": "repair", "conversationId": "1", "confirm": true}'),
}
QUERY = {"/lcm/assemble": "?budget=1000", PROOF_PATH: "?nonce=" + "ab" * 16}
#: a concrete address of each route whose path has parameters
CONCRETE = {"/ui/static/{name}": "/ui/static/ui.css", "/ui/note/{note_id:path}": "/ui/note/x",
            "/ui/conversation/{conversation_id}": "/ui/conversation/1",
            "/ui/conversation/{conversation_id}/message/{item_id}": "/ui/conversation/1/message/1",
            "/ui/conversation/{conversation_id}/summary/{item_id}": "/ui/conversation/1/summary/s"}
#: the routes a caller without a key reaches: the proof, the inspector's login page and its
#: files, and the browser's icon (empty)
OPEN = {PROOF_PATH, "/ui/login", "/ui/static/{name}", "/favicon.ico"}
MCP_ACCEPT = "application/json, text/event-stream"


def app_paths() -> list[str]:
    app = http_app(ToolFacade(None, None, agent_id="x"))
    assert isinstance(app, Guard), "http_app must return the guarded app"
    return sorted({route.path for route in app.app.routes})


def send(served: Served, path: str, *, key: str | None = None, headers: dict[str, str] | None = None,
         method: str | None = None, content_type: str | None = "application/json") -> httpx.Response:
    default_method, body = CALLS[path]
    method = method or default_method
    sent = {"Accept": MCP_ACCEPT}
    if method != "GET" and content_type is not None:
        sent["Content-Type"] = content_type
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    sent.update(headers or {})
    with httpx.Client(timeout=30) as http:
        return http.request(method, served.root + CONCRETE.get(path, path) + QUERY.get(path, ""),
                            content=body if method != "GET" else None, headers=sent)


def test_the_matrix_knows_every_route() -> None:
    """A route the app serves but this suite cannot call is a door nobody checks."""
    assert set(app_paths()) == set(CALLS), "add the new route to CALLS (and to the matrix below)"


def planted(served: Served) -> int:
    return int(served.lcm.db.scalar(  # type: ignore[attr-defined]
        "SELECT count(*) FROM messages WHERE content = 'planted by a web page'"))


@pytest.mark.parametrize("path", sorted(CALLS))
def test_without_a_key_every_route_but_the_proof_is_refused(served: Served, path: str) -> None:
    for key in (None, "wrong", served.owner[:-2], "amem_000000000000_x"):
        res = send(served, path, key=key)
        if path == PROOF_PATH:
            assert res.status_code == 200 and set(res.json()) == {"proof", "pid"}
            continue
        if path in OPEN:  # the login page and the stylesheet: nothing of the store
            assert res.status_code in (200, 204), (path, res.text)
            assert "amem_" not in res.text and "2468" not in res.text
            continue
        if key is None and path.startswith("/ui"):
            # a browser without a session: a page sends it to the login page, a write is refused
            if CALLS[path][0] == "GET":
                assert res.status_code == 303 and res.headers["location"] == "/ui/login", res.text
            else:
                assert res.status_code == 401 and res.json()["error"]["field"] == "cookie", res.text
            assert "2468" not in res.text
            continue
        assert res.status_code == 401, (path, key, res.text)
        error = refusal(res)
        assert error["code"] == "unauthenticated" and error["field"] == "Authorization"
        assert res.headers["www-authenticate"].startswith("Bearer")
    assert planted(served) == 0


BROWSER: list[tuple[str, dict[str, str], str | None, int, str]] = [
    # (what, headers, content type, status, field)
    ("DNS rebinding", {"Host": "attacker.example"}, "application/json", 421, "Host"),
    ("rebinding with a port", {"Host": "attacker.example:8765"}, "application/json", 421, "Host"),
    ("a foreign page", {"Origin": "http://attacker.example"}, "application/json", 403, "Origin"),
    ("an https page", {"Origin": "https://127.0.0.1"}, "application/json", 403, "Origin"),
    ("a sandboxed frame", {"Origin": "null"}, "application/json", 403, "Origin"),
    ("a cross-site fetch", {"Sec-Fetch-Site": "cross-site"}, "application/json", 403, "Sec-Fetch-Site"),
    ("a same-site page", {"Sec-Fetch-Site": "same-site"}, "application/json", 403, "Sec-Fetch-Site"),
    ("a text/plain post", {}, "text/plain", 415, "Content-Type"),
    ("a form post", {}, "application/x-www-form-urlencoded", 415, "Content-Type"),
    ("a multipart post", {}, "multipart/form-data; boundary=x", 415, "Content-Type"),
    ("a post without a type", {}, None, 415, "Content-Type"),
]


@pytest.mark.parametrize("path", sorted(CALLS))
@pytest.mark.parametrize("case", BROWSER, ids=[c[0] for c in BROWSER])
def test_a_browser_request_never_reaches_a_route(served: Served, path: str,
                                                 case: tuple[str, dict[str, str], str | None, int, str]) -> None:
    """With a valid owner key even (a page that learnt it still cannot use it from a browser)."""
    what, headers, ctype, status, field = case
    method = "POST" if status == 415 else None  # the content-type rule is for methods with bodies
    res = send(served, path, key=served.owner, headers=headers, content_type=ctype, method=method)
    assert res.status_code == status, (what, path, res.text)
    assert refusal(res)["field"] == field, (what, path, res.text)
    assert "access-control-allow-origin" not in res.headers
    assert planted(served) == 0


@pytest.mark.parametrize("path", sorted(CALLS))
def test_no_preflight_is_answered(served: Served, path: str) -> None:
    res = send(served, path, key=served.owner, method="OPTIONS",
               headers={"Origin": "http://127.0.0.1:1", "Access-Control-Request-Method": "POST"})
    assert res.status_code == 405 and "access-control-allow-origin" not in res.headers


def test_local_clients_pass(served: Served) -> None:
    """The checks refuse browsers, not the local spellings of this machine."""
    for host, origin in itertools.product(("127.0.0.1", "localhost", "[::1]"), (None, "http://localhost:3")):
        headers = {"Host": f"{host}:1234"}
        if origin:
            headers["Origin"] = origin
        res = send(served, "/lcm/assemble", key=served.alice, headers=headers)
        assert res.status_code == 200, (host, origin, res.text)


def test_a_route_added_later_is_behind_the_guard(served: Served) -> None:
    """The guard wraps the app, not a list of routes: a route mounted after it is held too."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    ran: list[str] = []

    async def later(request: Any) -> JSONResponse:
        ran.append(request.method)
        return JSONResponse({"ok": True})

    guarded = http_app(ToolFacade(None, None, agent_id="x"), guard=GuardConfig(keys=served.keys))
    inner = guarded.app
    assert isinstance(inner, Starlette)
    inner.router.routes.append(Route("/later", later, methods=["GET", "POST"]))
    client = TestClient(guarded, base_url="http://127.0.0.1")
    assert client.get("/later").status_code == 401
    assert client.post("/later", content=b"x", headers={"Content-Type": "text/plain",
                                                         "Authorization": f"Bearer {served.owner}"}).status_code == 415
    assert client.get("/later", headers={"Host": "evil.example",
                                         "Authorization": f"Bearer {served.owner}"}).status_code == 421
    assert ran == []
    assert client.get("/later", headers={"Authorization": f"Bearer {served.owner}"}).json() == {"ok": True}
    read_only = client.post("/later", content=b"{}", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {served.alice_read}"})
    assert read_only.status_code == 403 and ran == ["GET"]  # a new POST route is a write for read-only keys


@pytest.mark.parametrize("path", sorted(p for p, (m, _) in CALLS.items() if m == "POST"))
def test_a_body_over_the_limit_is_refused_before_it_is_read(served: Served, path: str) -> None:
    from tools.http_guard import DEFAULT_MAX_BODY

    huge = b'{"x": "' + b"y" * DEFAULT_MAX_BODY + b'"}'
    with httpx.Client(timeout=60) as http:
        res = http.post(served.root + CONCRETE.get(path, path), content=huge, headers={
            "Authorization": f"Bearer {served.owner}", "Content-Type": "application/json",
            "Accept": MCP_ACCEPT})
        assert res.status_code == 413 and refusal(res)["code"] == "payload_too_large"
        anonymous = http.post(served.root + CONCRETE.get(path, path), content=huge,
                              headers={"Content-Type": "application/json"})
        assert anonymous.status_code == 401  # no key: refused before the body is read at all
