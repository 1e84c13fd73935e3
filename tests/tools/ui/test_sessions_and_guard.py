"""The inspector's login and its place behind the guard, without a browser: one-time links,
idle expiry, CSRF, a cookie that opens /ui only, a read-only key logging in, revocation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore, Principal
from tools.mcp_server import http_app
from tools.ui.sessions import COOKIE, UiSessions

OWNER = Principal("ui-login", None, owner=True)


def jar(c: TestClient, sid: str) -> dict[str, str]:
    """The session cookie as a header (the client's own jar emptied, so it is the only one)."""
    c.cookies.clear()
    return {"Cookie": f"{COOKIE}={sid}"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_login_token_opens_one_session_and_expires() -> None:
    clock = Clock()
    book = UiSessions(login_ttl=60, idle=600, clock=clock)
    token = book.issue_login(OWNER)
    session = book.redeem(token)
    assert session is not None and session.principal == OWNER
    assert book.redeem(token) is None  # spent
    late = book.issue_login(OWNER)
    clock.now += 61
    assert book.redeem(late) is None  # expired
    assert book.lookup(session.id) is not None  # 61 s idle < 600
    clock.now += 601
    assert book.lookup(session.id) is None  # idle too long
    with pytest.raises(ValueError):
        UiSessions(login_ttl=0)


def test_csrf_is_the_sessions_own() -> None:
    book = UiSessions()
    a, b = book.open(OWNER), book.open(OWNER)
    assert book.check_csrf(a, a.csrf) and not book.check_csrf(a, b.csrf)
    assert not book.check_csrf(a, None) and not book.check_csrf(a, "")


@pytest.fixture
def client(tmp_path: pytest.TempPathFactory) -> Iterator[tuple[TestClient, UiSessions, KeyStore, dict[str, str]]]:
    keys = KeyStore(tmp_path / "keys.json")  # type: ignore[operator]
    secrets = {"read": keys.add(agent="alice", read_only=True)[1], "bob": keys.add(agent="bob")[1]}
    book = UiSessions()
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice") as memory:
        memory.add("alice likes tea", ["alice"], enrich=False)
        memory.add("bob's boat is the Wren", ["bob"], enrich=False, agent_id="bob")
        app = http_app(ToolFacade(memory, None, agent_id="alice"),
                       guard=GuardConfig(keys=keys, ui_sessions=book))
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as c:
            yield c, book, keys, secrets


def test_the_cookie_opens_the_pages_and_nothing_else(client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    c, book, _, _ = client
    res = c.get(f"/ui/login?t={book.issue_login(OWNER)}")
    sid = res.cookies[COOKIE]
    session = book.lookup(sid)
    assert session is not None
    assert res.status_code == 303 and res.headers["location"] == f"/ui/s/{session.path_key}/notes"
    cookie = res.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert f"Path=/ui/s/{session.path_key}" in cookie
    page = c.get(f"{session.base}/notes", headers=jar(c, sid))
    assert page.status_code == 200 and "alice likes tea" in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    # the same cookie is no key for the MCP endpoint or the host routes
    for path in ("/mcp", "/lcm/assemble?budget=100"):
        res = c.get(path, headers=jar(c, sid))
        assert res.status_code == 401, (path, res.text)
    assert c.get(f"{session.base}/notes", headers=jar(c, "forged")).status_code == 303


def test_a_write_needs_the_csrf_token(client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    c, book, _, _ = client
    session = book.open(OWNER)
    res = c.post(f"{session.base}/api/unsupersede", json={"id": "x"}, headers=jar(c, session.id))
    assert res.status_code == 403 and res.json()["error"]["field"] == "X-Amem-Csrf"
    res = c.post(f"{session.base}/api/unsupersede", json={"id": "x"},
                 headers={"X-Amem-Csrf": session.csrf, **jar(c, session.id)})
    assert res.status_code == 404 and "no note" in res.json()["error"]["message"]  # reached the route


def test_hostile_bytes_in_an_action_are_invalid_argument(
        client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    """The inspector's actions parse their bodies by the one rule of every door (deep nesting,
    lone surrogates: 400 naming the field), not json.loads (a 500 and a traceback)."""
    c, book, _, _ = client
    session = book.open(OWNER)
    headers = {"X-Amem-Csrf": session.csrf, "Content-Type": "application/json",
               **jar(c, session.id)}
    for path in (f"{session.base}/api/unsupersede", f"{session.base}/api/lcm"):
        for body in ('{"id": ' + "[" * 5000 + "]" * 5000 + "}", '{"id": "\\udc80"}'):
            res = c.post(path, content=body.encode(), headers=headers)
            assert res.status_code == 400, (path, res.status_code, res.text)
            assert res.json()["error"]["code"] == "invalid_argument"


def test_a_read_only_key_may_log_in_but_not_write(client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    c, book, _, secrets = client
    res = c.post("/ui/login", json={}, headers={"Authorization": f"Bearer {secrets['read']}"})
    sid = res.cookies[COOKIE]
    session = book.lookup(sid)
    assert session is not None and session.principal.read_only
    assert res.status_code == 200 and res.json()["next"] == f"{session.base}/notes"
    res = c.post(f"{session.base}/api/unsupersede", json={"id": "x", "confirm": True},
                 headers={"X-Amem-Csrf": session.csrf, **jar(c, sid)})
    assert res.status_code == 403 and "read-only" in res.json()["error"]["message"]
    # login links are for owners only
    res = c.post("/ui/login-link", json={}, headers={"Authorization": f"Bearer {secrets['bob']}"})
    assert res.status_code == 403


def test_an_agent_key_session_stays_in_its_agent_and_dies_with_its_key(
        client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    c, book, keys, secrets = client
    res = c.post("/ui/login", json={}, headers={"Authorization": f"Bearer {secrets['bob']}"})
    sid = res.cookies[COOKIE]
    base = res.json()["next"].removesuffix("/notes")
    page = c.get(f"{base}/notes", headers=jar(c, sid))
    assert "Wren" in page.text and "alice likes tea" not in page.text
    refused = c.get(f"{base}/notes?agent=alice", headers=jar(c, sid))
    assert refused.status_code == 403 and "alice likes tea" not in refused.text
    keys.revoke(secrets["bob"].split("_")[1])
    assert c.get(f"{base}/notes", headers=jar(c, sid)).status_code == 303  # back to the login page
    assert book.lookup(sid) is None


def test_one_key_logging_in_again_and_again_ends_only_its_own_sessions() -> None:
    clock = Clock()
    book = UiSessions(clock=clock, per_key=3)
    owner = book.open(OWNER)
    reader = Principal("k-read", "alice", owner=False, read_only=True)
    mine = []
    for _ in range(300):
        clock.now += 1
        mine.append(book.open(reader))
    assert book.lookup(owner.id) is not None  # another key's session stays
    assert [book.lookup(s.id) is not None for s in mine[-4:]] == [False, True, True, True]
    with pytest.raises(ValueError):
        UiSessions(per_key=0)


def test_a_cookie_opens_nothing_off_its_sessions_own_path(
        client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    """The browser sends the cookie to any server on 127.0.0.1 whose path matches the cookie's
    Path (ports do not separate cookies): scoped to the session's secret path, another local
    server never sees it; and replayed on any other path, it opens nothing."""
    import re

    c, book, _, _ = client
    session = book.open(OWNER)
    other = book.open(OWNER)
    for path in ("/ui/notes", "/ui", f"/ui/s/{other.path_key}/notes", "/ui/s/wrong-key/notes",
                 f"/ui/s/{session.path_key[:-1]}/notes"):
        res = c.get(path, headers=jar(c, session.id))
        assert res.status_code == 303 and res.headers["location"] == "/ui/login", path
        assert res.headers["referrer-policy"] == "no-referrer"
    res = c.post("/ui/api/unsupersede", json={"id": "x"},
                 headers={"X-Amem-Csrf": session.csrf, **jar(c, session.id)})
    assert res.status_code == 401
    # on its own path: the page, every link and form under that path, and the script's base
    page = c.get(f"{session.base}/notes", headers=jar(c, session.id))
    assert page.status_code == 200 and page.headers["referrer-policy"] == "no-referrer"
    targets = re.findall(r'(?:href|action)="(/[^"]*)"', page.text)
    assert targets and all(t.startswith(session.base + "/") or t.startswith("/ui/static/")
                           for t in targets), targets
    assert f'<meta name="amem-base" content="{session.base}">' in page.text
    assert c.get(session.base, headers=jar(c, session.id)).headers["location"] == f"{session.base}/notes"
    # a cookie planted beside the real one (another port's server may set one) hides nothing
    planted = {"Cookie": f"{COOKIE}=planted-by-another-server; {COOKIE}={session.id}"}
    c.cookies.clear()
    assert c.get(f"{session.base}/notes", headers=planted).status_code == 200


def test_a_bearer_key_needs_no_session_path(
        client: tuple[TestClient, UiSessions, KeyStore, dict[str, str]]) -> None:
    c, _, _, secrets = client
    c.cookies.clear()
    bob = {"Authorization": f"Bearer {secrets['bob']}"}
    page = c.get("/ui/notes", headers=bob)
    assert page.status_code == 200 and "Wren" in page.text and 'href="/ui/notes' in page.text
    res = c.post("/ui/api/unsupersede", json={"id": "x"}, headers=bob)
    assert res.status_code == 404  # reached the action
