"""Fixtures of the inspector's browser tests: a real HTTP server on 127.0.0.1 over stores built
from the examples (and a slice of the LoCoMo dev data when it is there), keys of each kind, and
one headless Debian chromium driven by chromium-driver through Selenium for the whole module.

Screenshots go to ``<pytest tmp>/inspector-screenshots`` (kept as test artifacts, never
committed); ``AMEM_UI_SHOTS`` names another folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from benchmarks.datasets import BENCHDATA
from scheduler.record import append_run
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore, Principal
from tools.mcp_server import OwnerAccess
from tools.ui.sessions import UiSessions

from ..http_server import OWNER_SECRET, running_http

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "notes.jsonl"
LOCOMO = BENCHDATA / "locomo_dev.json"
COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"
BOB_SECRET = "Bob's boat is called Wren and is moored at pier 9"
DANA = ("Dana keeps a green bicycle in the garage at home, next to the red canoe and the old "
        "workbench.")
#: LoCoMo turns stored as alice's notes when the dev data is there (enough for two pages)
LOCOMO_TURNS = 90


@dataclass
class Site:
    root: str
    memory: MemoryStore
    lcm: Any
    keys: KeyStore
    book: UiSessions
    secrets: dict[str, str]
    coffee: str
    tea: str
    carol: str
    bob_note: str
    shots: Path
    driver: Any
    locomo_notes: int
    #: agent dana's note with a text folded into it, and the fold's part id (amem separate)
    fold: tuple[str, str] = ("", "")

    def login_link(self) -> str:
        return f"{self.root}/ui/login?t={self.book.issue_login(Principal('ui-login', None, owner=True))}"

    def ui(self, path: str) -> str:
        """The address of inspector page ``path`` in the browser's current session: under the
        session's own path (``/ui/s/<key>/``), where alone its cookie is sent."""
        import re

        found = re.match(r"(https?://[^/]+/ui/s/[A-Za-z0-9_-]+)", str(self.driver.current_url))
        return f"{found.group(1) if found else self.root + '/ui'}/{path}"

    def shot(self, name: str) -> Path:
        """The whole page (the window grown to its height, up to 8000 px, then put back)."""
        path = self.shots / f"{name}.png"
        height = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
        self.driver.set_window_size(1280, min(max(height, 1000), 8000))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(1280, 1000)
        return path


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("Debian's chromium and chromium-driver are not installed "
                    "(apt-get install -y chromium chromium-driver; .ci/run does)")
    return browser, driver


def _driver(browser: str, driver: str) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions",
                "--proxy-server=direct://", "--proxy-bypass-list=*"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def _locomo_turns(limit: int) -> list[dict[str, Any]]:
    if not LOCOMO.exists():
        return []
    sample = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]["conversation"]
    out: list[dict[str, Any]] = []
    for n in range(1, 40):
        for turn in sample.get(f"session_{n}", []):
            out.append({"text": f"{turn['speaker']}: {turn['text']}",
                        "subjects": [turn["speaker"].lower()]})
            if len(out) >= limit:
                return out
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    from lcm import LcmConfig, LcmStore

    from tools.reports import plain_owner_reports

    browser, chromedriver = _chromium()
    home = tmp_path_factory.mktemp("inspector")
    shots = Path(os.environ.get("AMEM_UI_SHOTS") or tmp_path_factory.mktemp("inspector-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    keys = KeyStore(home / "keys.json")
    secrets = {name: keys.add(**kw)[1] for name, kw in {
        "alice": {"agent": "alice"}, "bob": {"agent": "bob"},
        "alice_read": {"agent": "alice", "read_only": True},
        "owner": {"agent": None, "owner": True}}.items()}
    runs = home / "nightly_runs.jsonl"
    for day, (merges, superseded) in enumerate(((3, 1), (5, 0), (2, 2), (7, 1), (4, 3)), 1):
        append_run(runs, {"finished_at": f"2026-11-0{day}T02:31:00+00:00", "status": "ok",
                          "reason": "schedule", "duration": 1.5, "merges": merges,
                          "superseded": superseded, "expired_deleted": 0,
                          "compactions": day, "embedding_debt": 10 - day})
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="alice") as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False, fresh_tail_count=10,
                                           large_file_threshold_tokens=200,
                                           large_files_dir=str(home / "files"))) as lcm:
        for line in EXAMPLES.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            memory.add(item["text"], item.get("subjects", []), enrich=False)
        turns = _locomo_turns(LOCOMO_TURNS)
        if turns:
            memory.add_many(turns, enrich=False)
        coffee = memory.add(COFFEE, ["Alice"], timestamp="2026-01-01").id
        tea = memory.add(TEA, ["Alice"], timestamp="2026-01-05").id
        assert memory.index.load(coffee, "alice")[0].superseded_by == tea
        # a second pair, left superseded for the write-protection test
        carol = memory.add("Carol plays tennis every Sunday", ["Carol"], timestamp="2026-03-01").id
        memory.add("Carol stopped tennis, she plays golf now", ["Carol"], timestamp="2026-03-05")
        assert memory.index.load(carol, "alice")[0].superseded_by
        bob_note = memory.add(BOB_SECRET, ["bob"], enrich=False, agent_id="bob").id
        # a fold, in an agent of its own (the other tests count alice's and bob's notes)
        dana = memory.add(DANA, ["dana"], agent_id="dana").id
        assert memory.add(f"{DANA} It has a wicker basket.", ["dana"],
                          agent_id="dana").status == "folded"
        (entry,) = [e for e in memory.get(dana, agent_id="dana").evolution_history
                    if e["action"] == "fold"]
        lcm.ingest("agent:alice:main", [{"role": "user" if i % 2 == 0 else "assistant",
                                         "content": f"alice turn {i}: planning the Porto trip, day {i % 7}"}
                                        for i in range(60)])
        lcm.compact("agent:alice:main", force=True)
        lcm.ingest("agent:alice:main", [{"role": "user", "content": "the packing list, pasted: "
                                         + " ".join(f"item{i} sunscreen towel" for i in range(300))}])
        lcm.ingest("agent:bob:main", [{"role": "user", "content": "bob's private plan: sell the Wren"}])
        facade = ToolFacade(memory, lcm, agent_id="alice")

        report = plain_owner_reports(memory, lcm, {"state": "never"})
        book = UiSessions()
        guard = GuardConfig(keys=keys, record_secret=OWNER_SECRET, ui_sessions=book)
        with running_http(facade, guard=guard, owner=OwnerAccess(report), runs_path=runs) as url:
            driver = _driver(browser, chromedriver)
            driver.set_page_load_timeout(30)
            try:
                yield Site(url.removesuffix("/mcp"), memory, lcm, keys, book, secrets, coffee, tea,
                           carol, bob_note, shots, driver, len(turns),
                           (dana, entry["triggered_by"]))
            finally:
                driver.quit()
