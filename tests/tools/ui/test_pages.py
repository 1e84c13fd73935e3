"""The inspector's pages through an in-process HTTP client (no browser): what they read, what
they show of a note's state, how they answer bad input. The store holds a note of each kind a
page must tell apart (current, superseded, partly superseded, expired, deleted)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.supersede.marks import mark_partly
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore
from tools.mcp_server import http_app
from tools.ui.sessions import UiSessions

from ..http_server import OWNER_SECRET

OWNER = {"Authorization": f"Bearer {OWNER_SECRET}"}
COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"
DOOR = "Carol's temporary door code is 4471"
GONE = "This note will be deleted: secret plan X"
DAVE = "Dave lives in Paris and has two cats named Tom and Jerry"
DAVE_NOW = "Dave moved to Berlin last month"
LONG_END = "FINAL-WORDS-OF-LONG-MESSAGE"


@dataclass
class Pages:
    client: TestClient
    memory: MemoryStore
    lcm: Any
    clock: ManualClock
    keys: KeyStore
    book: UiSessions
    secrets: dict[str, str]
    runs: Path
    ids: dict[str, str]
    long_conversation: int

    def get(self, path: str, **headers: str) -> Any:
        return self.client.get(path, headers={**OWNER, **headers})

    def usage(self) -> dict[str, tuple[int, str]]:
        """Every note's retrieval count and last access, by id."""
        hits, _ = self.memory.index.backend.scroll(None, limit=1000, offset=None)
        return {h.payload["id"]: (int(h.payload.get("retrieval_count", 0)),
                                  str(h.payload.get("last_accessed", ""))) for h in hits}


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pages]:
    from lcm import LcmConfig, LcmStore

    home = tmp_path_factory.mktemp("pages")
    keys = KeyStore(home / "keys.json")
    secrets = {"read": keys.add(agent="alice", read_only=True)[1],
               "alice": keys.add(agent="alice")[1]}
    book = UiSessions()
    clock = ManualClock("2026-12-01T00:00:00+00:00")
    runs = home / "nightly_runs.jsonl"
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice", clock=clock) as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as lcm:
        ids = {"tea_first": memory.add("Alice likes green tea from Kyoto", ["alice"], enrich=False).id}
        ids["coffee"] = memory.add(COFFEE, ["Alice"], timestamp="2026-01-01").id
        ids["tea"] = memory.add(TEA, ["Alice"], timestamp="2026-01-05").id
        assert memory.index.load(ids["coffee"], "alice")[0].superseded_by == ids["tea"]
        ids["door"] = memory.add(DOOR, ["carol"], enrich=False, ttl=60).id
        ids["gone"] = memory.add(GONE, ["plans"], enrich=False).id
        memory.delete(ids["gone"])
        ids["dave"] = memory.add(DAVE, ["dave"], enrich=False).id
        ids["dave_now"] = memory.add(DAVE_NOW, ["dave"], enrich=False).id
        assert mark_partly(memory.index, "alice", ids["dave"], ids["dave_now"],
                           ["has two cats named Tom and Jerry"], at="2026-12-01T00:00:00+00:00",
                           decided_by="test")
        clock.advance(3600)  # the door code's hour is over
        lcm.ingest("agent:alice:main", [{"role": "user", "content": f"short message {i}"}
                                        for i in range(3)])
        lcm.ingest("agent:alice:long", [{"role": "user", "content": "START " + "lorem ipsum " * 200
                                         + LONG_END}])
        long_id = lcm.conversation("agent:alice:long").id
        app = http_app(ToolFacade(memory, lcm, agent_id="alice"),
                       guard=GuardConfig(keys=keys, record_secret=OWNER_SECRET, ui_sessions=book),
                       runs_path=runs)
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            yield Pages(client, memory, lcm, clock, keys, book, secrets, runs, ids, long_id)


# ------------------------------------------------------------------------------ F2: reads only


def test_pages_that_search_record_no_usage(pages: Pages) -> None:
    """Searching in the playground, the notes' full text or the graph (GET or HEAD, an owner or
    a read-only key) moves no retrieval count or access time: a person looking is no use."""
    before = pages.usage()
    read_only = {"Authorization": f"Bearer {pages.secrets['read']}"}
    for path in ("/ui/search?q=tea", "/ui/notes?q=tea", "/ui/graph?q=tea"):
        assert pages.get(path).status_code == 200, path
        assert pages.client.head(path, headers=OWNER).status_code in (200, 405), path
        assert pages.client.get(path, headers=read_only).status_code == 200, path
    assert pages.usage() == before


def test_a_search_that_records_no_usage_leaves_no_recent_search(pages: Pages) -> None:
    """``record_usage=False`` also leaves nothing for a later ``get`` to count as an open."""
    before = pages.usage()
    found = pages.memory.search("green tea Kyoto", agent_id="alice", record_usage=False)
    assert found and pages.usage() == before
    pages.memory.get(found[0].id, agent_id="alice")
    assert pages.usage() == before
    with pytest.raises(ValueError):
        pages.memory.search("tea", agent_id="alice", record_usage="no")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ F3: full text


def _ids(page: Any) -> list[str]:
    import re

    # the first cell of each row (a state cell links the note it names)
    return re.findall(r'<tr><td><a href="[^"]*/note/([0-9a-f-]{36})', page.text.split('id="count"', 1)[1])


def test_full_text_lists_only_notes_holding_a_word(pages: Pages) -> None:
    res = pages.get("/ui/notes?q=zzzqqq+nonexistentword")
    assert res.status_code == 200 and _ids(res) == []
    assert "no note holds a word of the query" in res.text and 'id="match-means"' in res.text
    res = pages.get("/ui/notes?q=coffee")
    assert _ids(res) == [pages.ids["tea"]]  # the superseded coffee note is hidden, as without q
    assert pages.get("/ui/notes?q=the").status_code == 400  # no searchable word: said, not all
    assert pages.get("/ui/notes?q=" + "tea+" * 400).status_code == 400  # too long: not cut silently


def test_full_text_honours_every_filter(pages: Pages) -> None:
    res = pages.get("/ui/notes?q=coffee&state=superseded")
    assert _ids(res) == [pages.ids["coffee"]]
    assert pages.ids["tea"] in res.text.split(pages.ids["coffee"], 2)[2]  # its "superseded by"
    assert set(_ids(pages.get("/ui/notes?q=coffee&state=all"))) == {pages.ids["coffee"], pages.ids["tea"]}
    assert _ids(pages.get("/ui/notes?q=door+code")) == []  # expired: hidden by default
    assert _ids(pages.get("/ui/notes?q=door+code&expiry=expired")) == [pages.ids["door"]]
    for kind in ("memory", "knowledge"):
        listed = _ids(pages.get(f"/ui/notes?q=Alice+Dave&type={kind}"))
        assert all(pages.memory.index.load(i, "alice")[0].note_type == kind for i in listed)
    assert len(_ids(pages.get("/ui/notes?q=Alice+Dave&type=memory"))) + len(
        _ids(pages.get("/ui/notes?q=Alice+Dave&type=knowledge"))) == len(
        _ids(pages.get("/ui/notes?q=Alice+Dave")))
    assert _ids(pages.get("/ui/notes?q=Dave&subject=nobody")) == []


# ------------------------------------------------------------------------------ F5: states


def test_each_note_page_names_its_state(pages: Pages) -> None:
    ids = pages.ids
    expected = {"door": "This note is expired at 2026-12-01T00:01:00",
                "gone": "This note is deleted.",
                "dave": f"This note is partly superseded by {ids['dave_now']}, keeping "
                        "'has two cats named Tom and Jerry'",
                "coffee": f"This note is superseded by {ids['tea']}",
                "tea": "This note is current."}
    import html as html_lib
    import re

    for name, words in expected.items():
        res = pages.get(f"/ui/note/{ids[name]}")
        banner = re.search(r'<p id="note-state"[^>]*>(.*?)</p>', res.text)
        assert banner, name
        text = html_lib.unescape(re.sub(r"<[^>]+>", "", banner.group(1)))
        assert text.startswith(words), (name, text)
    # the chain table names each note's state by the same words
    chain = pages.get(f"/ui/note/{ids['coffee']}").text.split("Supersession chain", 1)[1]
    chain = chain.split("Evolution history")[0]
    assert "<td>superseded by <a" in chain and "<td>current</td>" in chain


def test_tables_and_graph_name_states_and_deleted_notes_are_listable(pages: Pages) -> None:
    ids = pages.ids
    table = pages.get("/ui/notes?subject=dave").text
    assert f"partly superseded by" in table and ids["dave_now"] in table
    expired = pages.get("/ui/notes?expiry=expired").text
    assert ids["door"] in expired and "expired at" in expired
    deleted = pages.get("/ui/notes?state=deleted")
    assert deleted.status_code == 200 and ids["gone"] in deleted.text and ">deleted<" in deleted.text
    assert ids["tea"] not in deleted.text.split('id="count"')[1]
    graph = pages.get(f"/ui/graph?note={ids['gone']}").text
    assert 'data-state="deleted"' in graph and 'id="graph-legend"' in graph
    graph = pages.get("/ui/graph?subject=dave").text
    assert 'data-state="partly superseded"' in graph
    playground = pages.get("/ui/search?q=Dave+Paris+cats").text
    assert "partly superseded by" in playground


# ------------------------------------------------------------------------------ F4: long messages


def test_a_long_message_is_cut_visibly_and_readable_whole(pages: Pages) -> None:
    import re

    res = pages.get(f"/ui/conversation/{pages.long_conversation}")
    assert res.status_code == 200 and LONG_END not in res.text
    more = re.search(r'<a href="([^"]+)" class="more">… (\d+) more characters', res.text)
    assert more, "the cut is not marked"
    text = pages.lcm.db.scalar("SELECT content FROM messages WHERE conversation_id = ?",
                               [pages.long_conversation])
    assert int(more.group(2)) == len(text) - 600
    whole = pages.get(more.group(1).replace("&amp;", "&"))
    assert whole.status_code == 200 and LONG_END in whole.text and "START lorem" in whole.text
    # another conversation's message id under this conversation: not found
    other = pages.lcm.conversation("agent:alice:main").id
    msg = pages.lcm.db.scalar("SELECT id FROM messages WHERE conversation_id = ?", [other])
    assert pages.get(f"/ui/conversation/{pages.long_conversation}/message/{msg}").status_code == 404


# ------------------------------------------------------------------------------ F6: run history


def test_a_bad_run_history_line_is_skipped_and_said(pages: Pages) -> None:
    good = '{"finished_at": "2026-12-01T02:30:00Z", "status": "ok", "merges": 3}'
    for bad in ('{"finished_at": "2026-12-02T02:30:00Z", "merges": "many"}', '{"merges": 1e400}',
                '{"merges": -2}', "not json at all", "[1, 2]"):
        pages.runs.write_text(f"{good}\n{bad}\n", encoding="utf-8")
        res = pages.get("/ui/health")
        assert res.status_code == 200, (bad, res.text[-300:])
        assert 'id="runs-skipped"' in res.text and 'data-runs="1"' in res.text, bad
    pages.runs.write_bytes(b'\xff\xfe{"merges": 1}\n' + good.encode() + b"\n")
    res = pages.get("/ui/health")
    assert res.status_code == 200 and "lines 1" in res.text
    pages.runs.write_text(good + "\n", encoding="utf-8")
    assert 'id="runs-skipped"' not in pages.get("/ui/health").text


def test_a_run_history_that_cannot_be_read_is_said_not_a_server_error(pages: Pages) -> None:
    """A folder where the history file should be (or a file the server may not read): the
    page said nothing went wrong by failing whole (500)."""
    kept = pages.runs.read_bytes() if pages.runs.exists() else None
    pages.runs.unlink(missing_ok=True)
    pages.runs.mkdir()
    try:
        res = pages.get("/ui/health")
        assert res.status_code == 200, res.text[-300:]
        assert 'id="runs-unreadable"' in res.text and "IsADirectoryError" in res.text
        assert "no runs yet" in res.text  # the table is there, empty, under the warning
    finally:
        pages.runs.rmdir()
        if kept is not None:
            pages.runs.write_bytes(kept)
    assert 'id="runs-unreadable"' not in pages.get("/ui/health").text


# ------------------------------------------------------------------------------ F10: numbers


def test_bad_numbers_are_a_400_naming_the_parameter(pages: Pages) -> None:
    conv = pages.long_conversation
    for path, field in ((f"/ui/conversation/{2**63}", "conversation id"),
                        ("/ui/conversation/99999999999999999999999", "conversation id"),
                        ("/ui/conversation/%C2%B2", "conversation id"),      # superscript two
                        ("/ui/conversation/%D9%A3", "conversation id"),      # Arabic-Indic three
                        ("/ui/conversations?page=99999999", "page"),
                        (f"/ui/conversation/{conv}?budget=-5", "budget"),
                        (f"/ui/conversation/{conv}?budget=0", "budget"),
                        (f"/ui/conversation/{conv}?budget=99999999999", "budget"),
                        (f"/ui/conversation/{conv}/message/{2**64}", "message id")):
        res = pages.get(path)
        assert res.status_code == 400, (path, res.status_code)
        assert f"{field} must be" in res.text, (path, res.text[-400:])
    assert pages.get(f"/ui/conversation/{conv}?budget=500").status_code == 200
    csrf_free = {**OWNER, "Content-Type": "application/json"}
    for raw in ("99999999999999999999999", 2**70, "٣", -1, True):
        res = pages.client.post("/ui/api/lcm", json={"op": "repair", "conversationId": raw},
                                headers=csrf_free)
        assert res.status_code == 400 and res.json()["error"]["field"] == "conversationId", (raw, res.text)


# ------------------------------------------------------------------------------ F7: --no-lcm


def test_doctor_without_the_conversation_store_is_no_all_clear() -> None:
    from tools.ui.health import verdict

    unchecked = {"ok": True, "memory": {}, "lcm": {"available": False, "reason": "the server runs "
                                                  "without the conversation store (amem serve --no-lcm)"}}
    text = verdict(unchecked)
    assert 'class="ok"' not in text and "NOT checked" in text and "--no-lcm" in text
    clean = {"ok": True, "lcm": {"doctor": {"available": False}, "clean": {}}}
    assert "NOT checked" in verdict(clean)
    assert 'class="ok"' in verdict({"ok": True, "lcm": {"ok": True}})
    assert "problems found" in verdict({"ok": False, "lcm": {"ok": True}})


# ------------------------------------------------------------------------------ F11: small points


def test_status_and_error_code_agree(pages: Pages) -> None:
    alice = {"Authorization": f"Bearer {pages.secrets['alice']}", "Content-Type": "application/json"}
    res = pages.client.post("/ui/api/unsupersede", json={"id": pages.ids["coffee"], "agent": "bob"},
                            headers=alice)
    assert res.status_code == 403 and res.json()["error"]["code"] == "forbidden"
    conv = pages.long_conversation
    res = pages.client.post("/ui/api/lcm", json={"op": "repair", "conversationId": conv},
                            headers={**OWNER, "Content-Type": "application/json"})
    assert (res.status_code, res.json()["error"]["code"]) == (503, "llm_unavailable")


def test_repair_without_an_llm_is_disabled_and_says_why(pages: Pages) -> None:
    import re

    text = pages.get(f"/ui/conversation/{pages.long_conversation}").text
    box = re.search(r'<div class="action" data-action="lcm" data-op="repair".*?</div></div>', text, re.S)
    assert box and "disabled" in box.group(0) and "LLM" in box.group(0)


def test_control_characters_are_shown_as_escapes(pages: Pages) -> None:
    note = pages.memory.add("bell\a escape \x1b[31mRED CR\rover", ["ctl"], enrich=False).id
    text = pages.get(f"/ui/note/{note}").text
    assert "\x1b" not in text and "\a" not in text and "\r" not in text
    assert "bell\\x07 escape \\x1b[31mRED CR\\x0dover" in text
    pages.memory.delete(note)


def test_health_says_why_agents_is_not_counted_and_favicon_needs_no_key(pages: Pages) -> None:
    assert "not counted on this page" in pages.get("/ui/health").text
    res = pages.client.get("/favicon.ico")
    assert res.status_code == 204 and not res.content


def test_a_cross_site_navigation_to_a_login_link_gets_a_page_that_says_what_to_do(pages: Pages) -> None:
    res = pages.client.get("/ui/login?t=whatever", headers={
        "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert res.status_code == 403 and res.headers["content-type"].startswith("text/html")
    assert "address bar" in res.text
    res = pages.client.get("/ui/login?t=whatever", headers={"Sec-Fetch-Site": "cross-site"})
    assert res.json()["error"]["field"] == "Sec-Fetch-Site"  # a script: the JSON error


def test_logout_is_a_post_with_the_csrf_token(pages: Pages) -> None:
    from tools.keys import Principal
    from tools.ui.sessions import COOKIE

    session = pages.book.open(Principal("ui-login", None, owner=True))
    pages.client.cookies.clear()
    cookie = {"Cookie": f"{COOKIE}={session.id}"}
    page = pages.client.get(f"{session.base}/logout", headers=cookie)
    assert page.status_code == 200 and 'id="logout-now"' in page.text
    assert pages.book.lookup(session.id) is not None  # a GET ends nothing
    res = pages.client.post(f"{session.base}/logout", json={}, headers=cookie)
    assert res.status_code == 403 and pages.book.lookup(session.id) is not None
    res = pages.client.post(f"{session.base}/logout", json={},
                            headers={**cookie, "X-Amem-Csrf": session.csrf})
    assert res.status_code == 200 and pages.book.lookup(session.id) is None


# ------------------------------------------------------------------------------ subjects by key


def test_the_subject_filter_and_graph_find_every_spelling(pages: Pages) -> None:
    """The notes about "Alice" and the one about "alice" are one subject's (amem.notefields.
    subject_key); before, subject=alice left out the two stored as "Alice"."""
    ids = pages.ids
    for asked in ("alice", "ALICE"):
        listed = set(_ids(pages.get(f"/ui/notes?subject={asked}")))
        assert {ids["tea_first"], ids["tea"]} <= listed, asked
        graph = pages.get(f"/ui/graph?subject={asked}").text
        assert ids["tea_first"] in graph and ids["tea"] in graph, asked


# ------------------------------------------------------------------------------ tags


def test_the_tag_filter_matches_any_case_in_the_table_full_text_and_playground(
        pages: Pages) -> None:
    """``tag=`` lists the notes holding a tag whatever its case (the search filter's keys,
    ``amem.notefields.tag_key``), through the same door as the other filters: an agent's key
    may not read another agent's tagged notes, and a tag that names nothing is refused."""
    memory = pages.memory  # its own agent: the other tests' counts of alice's notes hold
    run = memory.add("Went for a run before breakfast", tags=["Morning"], enrich=False,
                     agent_id="tagger").id
    paper = memory.add("Read the paper before breakfast", tags=["morning", "news"],
                       enrich=False, agent_id="tagger").id
    night = memory.add("Went for a run after dinner", tags=["evening"], enrich=False,
                       agent_id="tagger").id
    for asked in ("morning", "MORNING", "%23Morning", "nothing,+Morning"):
        page = pages.get(f"/ui/notes?agent=tagger&tag={asked}")
        assert page.status_code == 200 and set(_ids(page)) == {run, paper}, asked
    table = pages.get("/ui/notes?agent=tagger&tag=morning").text
    assert "<td>Morning</td>" in table and 'value="morning"' in table  # as written; kept in the box
    assert set(_ids(pages.get("/ui/notes?agent=tagger&tag=evening,news"))) == {night, paper}
    # the full text and the playground apply it too
    assert _ids(pages.get("/ui/notes?agent=tagger&q=run&tag=Morning")) == [run]
    playground = pages.get("/ui/search?agent=tagger&q=run+breakfast&tag=EVENING")
    assert playground.status_code == 200 and night in playground.text
    assert run not in playground.text and paper not in playground.text
    assert "without the tag filter" in playground.text  # the graph link says what it leaves out
    # bad input is named, on the page and in its status
    bad = pages.get("/ui/notes?agent=tagger&tag=%23")
    assert bad.status_code == 400 and "names no tag" in bad.text
    assert pages.get("/ui/search?agent=tagger&q=run&tag=%23").status_code == 400
    # an agent's key stays in its agent, tag or not
    alice = {"Authorization": f"Bearer {pages.secrets['alice']}"}
    refused = pages.client.get("/ui/notes?agent=tagger&tag=morning", headers=alice)
    assert refused.status_code == 403 and run not in refused.text
    own = pages.client.get("/ui/notes?tag=morning", headers=alice)
    assert own.status_code == 200 and _ids(own) == []


def test_an_agent_the_store_does_not_have_is_named_and_no_other_is(pages: Pages) -> None:
    """``?agent=`` naming an agent without notes showed an empty page and no hint."""
    for path in ("/ui/notes?agent=ghost", "/ui/search?agent=ghost&q=tea", "/ui/graph?agent=ghost"):
        page = pages.get(path)
        assert page.status_code == 200, (path, page.text)
        assert "No agent named &#x27;ghost&#x27; has notes in this store" in page.text, path
    assert 'id="no-such-agent"' not in pages.get("/ui/notes?agent=alice").text
    # an agent's key: its own empty agent is named, no other agent is
    newcomer = {"Authorization": f"Bearer {pages.keys.add(agent='newcomer')[1]}"}
    own = pages.client.get("/ui/notes", headers=newcomer)
    assert own.status_code == 200 and 'id="no-such-agent"' in own.text
    assert "newcomer" in own.text and "has no notes yet" in own.text
    assert "alice" not in own.text.lower()
    other = pages.client.get("/ui/notes?agent=ghost", headers=newcomer)
    assert other.status_code == 403 and "alice" not in other.text.lower()
