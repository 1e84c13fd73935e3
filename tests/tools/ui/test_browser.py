"""The inspector clicked through in a real browser (Debian's chromium via chromium-driver).

One browser session for the module, in the order a person would go: log in with the one-time
link, the notes table and its filters, the search playground, a note and the undo of its
supersession (dry run, then confirm), a joined text separated from its note, the graph, the
conversations, health; then tenancy and write protection with agent and read-only keys logged
in through the key form, the key's revocation, and the accessibility basics (labels,
contrast, keyboard). What each page shows is checked against the stores; every page is
photographed into ``site.shots``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from amem.backends.base import IsEmpty, Match, Where
from amem.notefields import SUBJECT_KEYS, TAG_KEYS, not_expired, tag_key, tag_keys

from .conftest import BOB_SECRET, Site

pytestmark = pytest.mark.slow  # a real browser: a few seconds per page


def by_css(site: Site, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(site.driver.find_elements(By.CSS_SELECTOR, css))


def one(site: Site, css: str) -> Any:
    from selenium.webdriver.common.by import By

    return site.driver.find_element(By.CSS_SELECTOR, css)


def wait_text(site: Site, css: str, needle: str, timeout: float = 10) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(site.driver, timeout).until(lambda d: needle in one(site, css).text)
    return str(one(site, css).text)


def submit(site: Site, element: Any) -> None:
    """Submit ``element``'s form and wait until the browser has replaced the document: reading
    the page before that finds the old document's nodes (a flaky "node does not belong to the
    document" seen in CI)."""
    _then_new_page(site, element.submit)


def follow(site: Site, element: Any) -> None:
    """Click a link (a navigation) and wait for the new document, as :func:`submit`."""
    _then_new_page(site, element.click)


def _then_new_page(site: Site, act: Any) -> None:
    """The old document is marked with a window property that a new document lacks. Asking
    an element of the old document whether it went stale (selenium's ``staleness_of``) is
    not enough: chromedriver 150 answered that question mid-navigation with an "unknown
    error: node does not belong to the document" instead of a stale-element error."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    site.driver.execute_script("window.__amemOldPage = true")
    act()
    # mid-navigation a script may fail to run at all: asked again until the new page answers
    WebDriverWait(site.driver, 10, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return window.__amemOldPage !== true && document.readyState === 'complete'"))


def row_ids(site: Site) -> list[str]:
    """The note ids of the page's first table, in order."""
    return [a.text for a in by_css(site, "table:first-of-type tbody td:first-child a")]


def log_in_with_key(site: Site, secret: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    site.driver.get(site.ui("logout"))
    if "Log out" in site.driver.title:  # a session: its button logs out (a POST with the token)
        one(site, "#logout-now").click()
        WebDriverWait(site.driver, 10).until(lambda d: "Log in" in d.title)
    assert "Log in" in site.driver.title
    one(site, "#key").send_keys(secret)
    one(site, "#key-login button[type=submit]").click()
    WebDriverWait(site.driver, 10).until(lambda d: "/ui/s/" in d.current_url
                                         and d.current_url.endswith("/notes"))


def as_owner(site: Site) -> None:
    """A fresh owner session (each test runs alone as well as in the module's order)."""
    site.driver.get(site.login_link())


def live_where(site: Site, agent: str, *extra: Any) -> Where:
    now = site.memory.index.clock.now()
    return Where(must=(Match("agent_id", agent), Match("is_active", True), not_expired(now),
                       IsEmpty("superseded_by"), *extra))


def test_the_one_time_link_logs_in_once_and_the_table_is_the_store(site: Site) -> None:
    d = site.driver
    d.get(site.root + "/ui/notes")  # no session path: the login page, cookie or not
    assert d.current_url.endswith("/ui/login") and "Log in" in d.title  # no session: the login page
    site.shot("00-login")
    link = site.login_link()
    d.get(link)
    assert "/ui/s/" in d.current_url and d.current_url.endswith("/notes"), d.current_url
    cookie = d.get_cookie("amem_ui")
    # the cookie lives under the session's secret path only (no other port's server sees it)
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert d.current_url.endswith(cookie["path"] + "/notes") and cookie["path"].startswith("/ui/s/")
    total = int(one(site, "#count").get_attribute("data-total"))
    assert total == site.memory.index.backend.count(live_where(site, "alice"))
    hits, _ = site.memory.index.backend.scroll(live_where(site, "alice"), limit=50, offset=None)
    assert row_ids(site) == [h.payload["id"] for h in hits]
    assert site.coffee not in row_ids(site)  # the superseded fact is filtered out (count included)
    assert float(one(site, ".timing").get_attribute("data-ms")) < 300
    site.shot("01-notes")
    d.delete_all_cookies()
    d.get(link)  # the link is spent
    assert "used already or has expired" in one(site, "main").text
    d.get(site.login_link())
    assert d.current_url.endswith("/notes") and "/ui/s/" in d.current_url


def test_an_owner_chooses_the_agent(site: Site) -> None:
    as_owner(site)
    choice = one(site, "#agent-choice")
    choice.clear()
    choice.send_keys("bob")
    submit(site, choice)
    assert BOB_SECRET in one(site, "main").text and "agent bob" in one(site, "#who").text
    assert int(one(site, "#count").get_attribute("data-total")) == site.memory.count(agent_id="bob")


def test_filters_paging_and_full_text(site: Site) -> None:
    as_owner(site)
    d = site.driver
    field = one(site, "#f-subject")
    field.clear()
    field.send_keys("alice")
    submit(site, field)
    # by key: the notes about "Alice" and about "alice" (amem.notefields.subject_key)
    want = site.memory.index.backend.count(live_where(site, "alice", Match(SUBJECT_KEYS, "alice")))
    assert int(one(site, "#count").get_attribute("data-total")) == want > 0
    for cell in by_css(site, "table:first-of-type tbody td:nth-child(3)"):
        assert "alice" in [name.casefold() for name in cell.text.split(", ")]
    site.shot("02-notes-filtered")
    # the tag filter, typed in capitals with a '#' (amem.notefields.tag_key): the tea note's
    # own tag, stored in lower case by its offline enrichment
    tag = site.memory.index.load(site.tea, "alice")[0].tags[0]
    d.get(site.ui("notes"))
    field = one(site, "#f-tag")
    field.send_keys(f"#{tag.upper()}")
    submit(site, field)
    want = site.memory.index.backend.count(live_where(site, "alice", Match(TAG_KEYS, tag_key(tag))))
    assert int(one(site, "#count").get_attribute("data-total")) == want > 0
    assert site.tea in row_ids(site) or want > len(row_ids(site))
    for cell in by_css(site, "table:first-of-type tbody td:nth-child(4)"):
        assert tag_key(tag) in tag_keys(cell.text.split(", "))
    d.get(site.ui("notes?state=superseded"))
    assert set(row_ids(site)) == {site.coffee, site.carol}
    d.get(site.ui("notes"))
    if site.locomo_notes:  # two pages of notes
        first = row_ids(site)
        follow(site, one(site, "#next-page"))
        second = row_ids(site)
        assert second and not set(first) & set(second)
    d.get(site.ui("notes?q=peanuts"))
    assert "peanuts" in by_css(site, "table:first-of-type tbody td:nth-child(2)")[0].text
    d.get(site.ui("notes?since=yesterday-ish"))
    assert "since must be an ISO 8601" in one(site, "[role=alert]").text


def test_the_search_playground_says_why_each_result_is_there(site: Site) -> None:
    as_owner(site)
    q = "what does Alice drink"
    site.driver.get(site.ui("search"))
    box = one(site, "#f-q")
    box.send_keys(q)
    submit(site, box)
    expected = site.memory.search(q, limit=10, agent_id="alice")
    ids = [a.text for a in by_css(site, "table tbody td:nth-child(2) a")]
    assert ids == [r.id for r in expected]
    found = [c.text for c in by_css(site, "table tbody td:nth-child(4)")]
    assert all(f in ("BM25 and dense", "BM25 only", "dense only") or f.startswith("linked")
               for f in found), found
    sims = [float(c.text) for c in by_css(site, "table tbody td:nth-child(5)")]
    assert sims == pytest.approx([r.similarity for r in expected], abs=1e-3)
    # the current fact hid the older one: the playground names it
    tea_row = [r for r in by_css(site, "table tbody tr") if site.tea in r.text]
    assert tea_row and site.coffee in tea_row[0].text
    site.shot("03-search")


def test_a_note_its_chain_and_the_undo_with_a_dry_run(site: Site) -> None:
    as_owner(site)
    d = site.driver
    d.get(site.ui(f"note/{site.coffee}"))
    chain = one(site, "main").text
    assert site.tea in chain and "superseded" in chain
    assert "Evolution history" in chain and "Links" in chain
    button = one(site, ".action button.dry-run")
    assert button.is_enabled()
    site.shot("04-note")
    button.click()
    wait_text(site, ".preview", "Dry run")
    assert site.memory.index.load(site.coffee, "alice")[0].superseded_by == site.tea  # nothing yet
    site.shot("05-undo-dry-run")
    one(site, ".preview button.confirm").click()
    # "Done:", not "current again": the dry run's own text says the note "becomes current
    # again", so waiting for that returned before the confirmed change had landed (CI, loaded)
    wait_text(site, ".preview", f"Done: note {site.coffee} is current again")
    assert site.memory.index.load(site.coffee, "alice")[0].superseded_by is None
    site.shot("06-undo-done")


def test_a_joined_text_is_separated_from_its_note(site: Site) -> None:
    """The note's page names the fold's part; Separate shows its dry run, then separates."""
    as_owner(site)
    note, part = site.fold
    site.driver.get(site.ui(f"note/{note}?agent=dana"))
    assert part in [c.text for c in by_css(site, "code.part")]
    button = one(site, '.action[data-action="separate"] button.dry-run')
    button.click()
    wait_text(site, '.action[data-action="separate"] .preview', "Dry run")
    assert "wicker basket" in site.memory.get(note, agent_id="dana", record_usage=False).content
    site.shot("06b-separate-dry-run")
    one(site, '.action[data-action="separate"] .preview button.confirm').click()
    wait_text(site, '.action[data-action="separate"] .preview', f"Done: {part} is its own note")
    assert "wicker basket" not in site.memory.get(note, agent_id="dana",
                                                  record_usage=False).content
    assert site.memory.get(part, agent_id="dana", record_usage=False).is_active


def test_the_graph(site: Site) -> None:
    as_owner(site)
    from tools.ui.graph import by_subject

    d = site.driver
    d.get(site.ui(f"graph?subject=alice"))
    svg = one(site, "svg#graph")
    expected = by_subject(site.memory, "alice", "alice")
    assert int(svg.get_attribute("data-nodes")) == len(expected.nodes) == len(by_css(site, "svg#graph circle"))
    assert int(svg.get_attribute("data-edges")) == len(expected.edges)
    site.shot("07-graph-subject")
    d.get(site.ui(f"graph?q=coffee+tea"))
    assert int(one(site, "svg#graph").get_attribute("data-nodes")) >= 2
    follow(site, by_css(site, "svg#graph a.node")[0])  # a node opens its note
    assert "/note/" in d.current_url and "/ui/s/" in d.current_url
    site.shot("08-graph-search")


def test_conversations_messages_dag_and_context(site: Site) -> None:
    as_owner(site)
    d = site.driver
    d.get(site.ui(f"conversations"))
    assert int(one(site, "#count").get_attribute("data-total")) == 2  # the owner sees every agent's
    site.shot("09-conversations")
    link = [a for a in by_css(site, "table tbody td:first-child a")
            if "agent:alice:main" in a.find_element("xpath", "../..").text][0]
    follow(site, link)
    conv_id = int(d.current_url.split("/conversation/")[1].split("?")[0])
    assert int(one(site, "#message-count").get_attribute("data-total")) == 61
    assert len(by_css(site, "table:nth-of-type(2) tbody tr")) == 50  # one page of messages
    summaries = site.lcm.db.scalar("SELECT count(*) FROM summaries WHERE conversation_id = ?", [conv_id])
    assert summaries > 0 and len(by_css(site, "#dag .sid")) == summaries
    from lcm.operator.browse import context_view

    stored = site.lcm.db.scalar(
        "SELECT sum(coalesce(m.token_count, s.token_count)) FROM context_items ci "
        "LEFT JOIN messages m ON m.id = ci.message_id LEFT JOIN summaries s ON "
        "s.summary_id = ci.summary_id WHERE ci.conversation_id = ?", [conv_id])
    shown = one(site, "#context-tokens")
    assert int(shown.get_attribute("data-stored")) == stored
    view = context_view(site.lcm.db, site.lcm.config, conv_id, 32000)
    assert int(shown.get_attribute("data-tokens")) == view.total_tokens
    assert len(by_css(site, "table:nth-of-type(3) tbody tr")) == len(view.items)
    files = site.lcm.db.query("SELECT file_id FROM large_files WHERE conversation_id = ?", [conv_id])
    shown_files = [c.text for c in by_css(site, "table:nth-of-type(4) tbody td:first-child")]
    assert files and shown_files == [f[0] for f in files]
    site.shot("10-conversation")
    # the repair kit's buttons: a dry run first, then the confirmed change
    before = site.lcm.db.scalar("SELECT content FROM summaries WHERE conversation_id = ?", [conv_id])
    rewrite = [b for b in by_css(site, ".action[data-op=rewrite] button.dry-run")][0]
    rewrite.click()
    box = rewrite.find_element("xpath", "..")
    wait_text(site, ".action[data-op=rewrite] .preview", "Dry run: rewrite")
    site.shot("10b-rewrite-dry-run")
    assert site.lcm.db.scalar("SELECT content FROM summaries WHERE conversation_id = ?", [conv_id]) == before
    box.find_element("css selector", "button.confirm").click()
    wait_text(site, ".action[data-op=rewrite] .preview", "Done")
    repair = one(site, ".action[data-op=repair] button.dry-run")
    # no LLM configured here: the button is disabled and says why
    assert not repair.is_enabled() and "LLM" in one(site, ".action[data-op=repair]").text
    d.get(site.ui(f"conversation/{conv_id}"))
    follow(site, one(site, "a[rel=next]"))
    assert len(by_css(site, "table:nth-of-type(2) tbody tr")) == 11


def test_health(site: Site) -> None:
    as_owner(site)
    site.driver.get(site.ui(f"health"))
    text = one(site, "main").text
    assert "Index build" in text and "active_notes" in text
    notes = site.memory.info().active_notes
    assert f"active_notes\n{notes}" in text or f"active_notes {notes}" in text
    follow(site, one(site, "#run-doctor"))  # doctor reads everything: only when asked
    assert "doctor: no problems found" in one(site, "#doctor-verdict").text
    assert int(one(site, "svg#runs-plot").get_attribute("data-runs")) == 5
    assert len(by_css(site, "svg#runs-plot polyline")) == 4
    site.shot("11-health")


def test_an_agent_key_sees_its_agent_only(site: Site) -> None:
    d = site.driver
    log_in_with_key(site, site.secrets["alice"])
    assert "agent key" in one(site, "#who").text and not by_css(site, "#agent-choice")
    d.get(site.ui(f"notes?q=boat"))
    assert "Wren" not in one(site, "main").text
    d.get(site.ui(f"notes?agent=bob"))
    assert "sees agent 'alice' only" in one(site, "[role=alert]").text
    d.get(site.ui(f"note/{site.bob_note}"))
    assert BOB_SECRET not in one(site, "main").text and "no note" in one(site, "[role=alert]").text
    d.get(site.ui(f"conversations"))
    assert int(one(site, "#count").get_attribute("data-total")) == 1
    assert "agent:bob" not in one(site, "main").text
    bob_conv = site.lcm.conversation("agent:bob:main").id
    d.get(site.ui(f"conversation/{bob_conv}"))
    assert "sell the Wren" not in one(site, "main").text
    d.get(site.ui(f"health"))
    health = one(site, "main").text
    assert "Status of this agent" in health and not by_css(site, "#run-doctor")
    assert "for an owner key" in health
    site.shot("12-agent-key-refused")


def test_a_read_only_key_cannot_change_anything(site: Site) -> None:
    d = site.driver
    superseded = site.memory.index.load(site.carol, "alice")[0].superseded_by
    assert superseded  # something to undo
    log_in_with_key(site, site.secrets["alice_read"])
    d.get(site.ui(f"note/{site.carol}"))
    button = one(site, ".action button.dry-run")
    assert not button.is_enabled() and "read-only" in one(site, ".action").text
    site.shot("13-read-only")
    reply = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.querySelector('meta[name=amem-base]').content + '/api/unsupersede', {method: 'POST', headers: {'Content-Type': 'application/json',"
        " 'X-Amem-Csrf': document.querySelector('meta[name=amem-csrf]').content},"
        " body: JSON.stringify({id: arguments[0], confirm: true})})"
        ".then(r => r.json().then(j => done([r.status, j])));", site.carol)
    assert reply[0] == 403 and "read-only" in reply[1]["error"]["message"]
    conv = site.lcm.conversation("agent:alice:main").id
    d.get(site.ui(f"conversation/{conv}"))
    buttons = by_css(site, ".action button.dry-run")
    assert buttons and not any(b.is_enabled() for b in buttons)  # rewrite, dissolve, repair
    log_in_with_key(site, site.secrets["alice"])
    d.get(site.ui(f"note/{site.carol}"))
    no_csrf = d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(document.querySelector('meta[name=amem-base]').content + '/api/unsupersede', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify({id: arguments[0], confirm: true})}).then(r => done(r.status));",
        site.carol)
    assert no_csrf == 403
    assert site.memory.index.load(site.carol, "alice")[0].superseded_by == superseded


def test_a_revoked_key_ends_its_session(site: Site) -> None:
    d = site.driver
    log_in_with_key(site, site.secrets["bob"])
    key_id = site.secrets["bob"].split("_")[1]
    site.keys.revoke(key_id)
    d.get(site.ui(f"notes"))
    assert d.current_url.endswith("/ui/login")


def _contrast(site: Site, css: str) -> list[float]:
    return list(site.driver.execute_script("""
        function lum(c) {
          const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(x => x / 255)
            .map(x => x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4));
          return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
        }
        function bg(el) {
          while (el) {
            const c = getComputedStyle(el).backgroundColor;
            if (c && !c.startsWith('rgba(0, 0, 0, 0)') && c !== 'transparent') return c;
            el = el.parentElement;
          }
          return 'rgb(255, 255, 255)';
        }
        return Array.from(document.querySelectorAll(arguments[0])).map(el => {
          const a = lum(getComputedStyle(el).color), b = lum(bg(el));
          return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        });""", css))


def test_accessibility_basics(site: Site) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    d = site.driver
    log_in_with_key(site, site.secrets["owner"])
    for page in ("notes", "search?q=tea", "graph?subject=alice", "conversations", "health"):
        d.get(site.ui(f"{page}"))
        assert d.find_element("css selector", "html").get_attribute("lang") == "en"
        for control in by_css(site, "main input:not([type=hidden]), main select"):
            ident = control.get_attribute("id")
            assert ident and by_css(site, f"label[for='{ident}']"), (page, control.get_attribute("name"))
        for table in by_css(site, "main table"):
            assert table.find_element("css selector", "caption").text.strip(), page
        ratios = _contrast(site, "main p, main td, main th, main label, main a, header a, button, caption")
        assert ratios and min(ratios) >= 4.5, (page, min(ratios))
        assert len(by_css(site, "h1")) == 1
    def press(key: str) -> Any:
        ActionChains(d).send_keys(key).perform()
        return d.switch_to.active_element

    d.get(site.ui(f"notes"))
    first = press(Keys.TAB)
    assert first.get_attribute("class") == "skip" and first.text == "Skip to content"
    assert press(Keys.ENTER).get_attribute("id") == "main"  # the skip link lands on the content
    assert press(Keys.TAB).get_attribute("id") == "f-q"  # and the next stop is the first filter
    d.get(site.ui(f"search"))
    press(Keys.TAB)  # the skip link
    labels = [press(Keys.TAB).text for _ in range(6)]
    assert labels[:5] == ["Notes", "Search", "Graph", "Conversations", "Health"], labels
    nav = d.switch_to.active_element  # Enter on a focused link follows it
    d.get(site.ui(f"search"))
    press(Keys.TAB)
    press(Keys.TAB)
    press(Keys.TAB)
    press(Keys.TAB)  # Graph
    press(Keys.ENTER)
    assert "/graph" in d.current_url and "/ui/s/" in d.current_url, (d.current_url, nav.text)
    site.shot("14-keyboard")
