"""The inspector's Separate action (``/ui/api/separate``), in-process: each join's part id in a
note's history, the action offered to whoever may write the note's agent, the dry run and the
confirmed separation, and the door it goes through (session, CSRF token, Origin, JSON only,
read-only keys, tenancy): a web page of another origin cannot trigger it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient

from amem import MemoryStore, load_config
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore, Principal
from tools.mcp_server import http_app
from tools.ui.sessions import COOKIE, UiSessions

from ..http_server import OWNER_SECRET

OWNER = Principal("ui-login", None, owner=True)
FOLDING = {"fold_threshold": 0.8, "pending_threshold": 0.6}
FIRST = "Alice keeps a green bicycle in the garage at home."
SECOND = "Alice keeps a green bicycle in the garage at home. It has a wicker basket."


@dataclass
class Site:
    client: TestClient
    memory: MemoryStore
    book: UiSessions
    secrets: dict[str, str]
    note: str
    part: str

    def session(self, principal: Principal = OWNER) -> tuple[str, dict[str, str]]:
        """A logged-in browser session: its base path and the headers its own pages send."""
        session = self.book.open(principal)
        self.client.cookies.clear()
        return session.base, {"Cookie": f"{COOKIE}={session.id}", "X-Amem-Csrf": session.csrf}

    def joined(self) -> bool:
        """Whether the part is still in the note (nothing separated it)."""
        note = self.memory.get(self.note, record_usage=False, agent_id="alice")
        return (note.content == f"{FIRST}\n\n{SECOND.removeprefix(FIRST + ' ')}"
                and not any(e["action"] == "separated" for e in note.evolution_history))


@pytest.fixture
def site(tmp_path: object) -> Iterator[Site]:
    from pathlib import Path

    keys = KeyStore(Path(str(tmp_path)) / "keys.json")
    secrets = {"alice": keys.add(agent="alice")[1], "bob": keys.add(agent="bob")[1],
               "read": keys.add(agent="alice", read_only=True)[1]}
    book = UiSessions()
    with MemoryStore(":memory:", config=load_config(overrides=FOLDING),
                     embedder=HashingEmbedder(dim=256), agent_id="alice",
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as memory:
        note = memory.add(FIRST).id
        assert memory.add(SECOND).status == "folded"
        (entry,) = [e for e in memory.get(note).evolution_history if e["action"] == "fold"]
        app = http_app(ToolFacade(memory, None, agent_id="alice"),
                       guard=GuardConfig(keys=keys, record_secret=OWNER_SECRET, ui_sessions=book))
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            yield Site(client, memory, book, secrets, note, entry["triggered_by"])


def test_the_history_names_each_part_and_offers_separate(site: Site) -> None:
    base, headers = site.session()
    page = site.client.get(f"{base}/note/{site.note}", headers=headers).text
    # the history's part column and the joined texts' table both name the part
    assert len(re.findall(rf'<code class="part">{site.part}</code>', page)) == 2, page[-3000:]
    action = re.search(r'<div class="action" data-action="separate"[^>]*>', page)
    assert action and f'data-part="{site.part}"' in action.group() \
        and f'data-id="{site.note}"' in action.group()
    assert "disabled" not in page[action.end():action.end() + 200]
    # a read-only key sees the parts, and the button disabled with the reason
    site.client.cookies.clear()
    login = site.client.post("/ui/login", json={}, headers={
        "Authorization": f"Bearer {site.secrets['read']}"})
    sid = login.cookies[COOKIE]
    site.client.cookies.clear()
    page = site.client.get(f"{login.json()['next'].removesuffix('/notes')}/note/{site.note}",
                           headers={"Cookie": f"{COOKIE}={sid}"}).text
    assert f'data-part="{site.part}"' in page and "read-only" in page
    assert re.search(r'data-action="separate"[^>]*><button type="button" class="dry-run" '
                     r'disabled', page)


def test_dry_run_then_confirm_separates(site: Site) -> None:
    base, headers = site.session()
    body = {"id": site.note, "part": site.part, "agent": "alice"}
    dry = site.client.post(f"{base}/api/separate", json=body, headers=headers)
    assert dry.status_code == 200, dry.text
    shown = dry.json()
    assert shown["dry_run"] and site.part in shown["effect"]
    # the diff names the lines that go, and nothing else
    assert [line for line in shown["diff"].splitlines() if line[:1] in "+-"
            and line[:3] not in ("+++", "---")] == ["-", "-It has a wicker basket."]
    assert site.joined()  # a dry run changes nothing
    done = site.client.post(f"{base}/api/separate", json={**body, "confirm": True},
                            headers=headers)
    assert done.status_code == 200, done.text
    assert done.json()["note"] == site.part and site.part in done.json()["done"]
    assert site.memory.get(site.note, agent_id="alice").content == FIRST
    assert site.memory.get(site.part, agent_id="alice").content == SECOND
    # the page now says the part was separated, and offers it no more
    page = site.client.get(f"{base}/note/{site.note}", headers=headers).text
    assert 'data-action="separate"' not in page and site.part in page
    again = site.client.post(f"{base}/api/separate", json=body, headers=headers)
    assert again.status_code == 400 and again.json()["error"]["field"] == "part"


def test_a_page_of_another_origin_cannot_separate(site: Site) -> None:
    """What a hostile page in the same browser can send: the session cookie rides along, but
    it is refused for its Origin, its fetch metadata, its form body, or its missing token."""
    base, headers = site.session()
    url, body = f"{base}/api/separate", {"id": site.note, "part": site.part, "confirm": True}
    for extra, field in (({"Origin": "http://evil.example"}, "Origin"),
                         ({"Origin": "null"}, "Origin"),
                         ({"Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site")):
        res = site.client.post(url, json=body, headers={**headers, **extra})
        assert res.status_code == 403 and res.json()["error"]["field"] == field, res.text
    cookie_only = {"Cookie": headers["Cookie"]}
    form = site.client.post(url, content=b"id=x&part=y&confirm=true",
                            headers={**cookie_only, "Content-Type": "text/plain"})
    assert form.status_code == 415, form.text
    res = site.client.post(url, json=body, headers=cookie_only)  # no token: a guess
    assert res.status_code == 403 and res.json()["error"]["field"] == "X-Amem-Csrf"
    assert site.joined()
    # the same request from the page itself goes through
    res = site.client.post(url, json=body, headers=headers)
    assert res.status_code == 200 and not site.joined()


def test_read_only_and_other_agents_keys_are_refused(site: Site) -> None:
    url, body = "/ui/api/separate", {"id": site.note, "part": site.part, "confirm": True}
    json_type = {"Content-Type": "application/json"}
    read = site.client.post(url, json=body, headers={
        "Authorization": f"Bearer {site.secrets['read']}", **json_type})
    assert read.status_code == 403 and "read-only" in read.json()["error"]["message"]
    bob = {"Authorization": f"Bearer {site.secrets['bob']}", **json_type}
    res = site.client.post(url, json=body, headers=bob)  # alice's note reads as missing
    assert res.status_code == 404 and res.json()["error"]["code"] == "not_found"
    res = site.client.post(url, json={**body, "agent": "alice"}, headers=bob)
    assert res.status_code == 403
    res = site.client.post(url, json={"id": site.note}, headers=bob)
    assert res.status_code == 400 and res.json()["error"]["field"] == "part"
    assert site.joined()
    # the note's own agent may
    alice = {"Authorization": f"Bearer {site.secrets['alice']}", **json_type}
    res = site.client.post(url, json=body, headers=alice)
    assert res.status_code == 200 and not site.joined()
