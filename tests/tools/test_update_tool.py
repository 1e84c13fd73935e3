"""``memory_update``, ``memory_search`` with history, and ``amem update`` / ``amem search --history``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.tools.conftest import Tenants
from tools import ToolFacade

ROOT = Path(__file__).resolve().parents[2]
AMEM = ROOT / ".venv" / "bin" / "amem"


def test_memory_update_edits_the_callers_note_only(tenants: Tenants, facade: ToolFacade) -> None:
    nid = facade.call("memory_add", {"text": "Bob's desk is on the third floor",
                                     "subjects": ["bob"]})["id"]
    out = facade.call("memory_update", {"id": nid, "text": "Bob's desk is on the fifth floor"})
    assert out["status"] == "updated" and out["changed"] == ["text"]
    note = facade.call("memory_get", {"id": nid})
    assert note["content"] == "Bob's desk is on the fifth floor"
    assert note["evolution_history"][-1]["old_content"] == "Bob's desk is on the third floor"
    assert facade.call("memory_update", {"id": nid, "subjects": []})["changed"] == ["subjects"]
    mallory = ToolFacade(tenants.store, None, agent_id=tenants.mallory)
    refused = mallory.call("memory_update", {"id": nid, "text": "rewritten by mallory"})
    assert refused["error"]["code"] == "not_found"
    assert facade.call("memory_get", {"id": nid})["content"] == "Bob's desk is on the fifth floor"
    bad = facade.call("memory_update", {"id": nid})
    assert bad["error"]["code"] == "invalid_argument" and bad["error"]["field"] == "text"


def test_memory_search_hides_superseded_notes_unless_asked(facade: ToolFacade) -> None:
    old = facade.call("memory_add", {"text": "Carol lives in Leeds", "subjects": ["carol"]})
    new = facade.call("memory_add", {"text": "Carol moved to York last spring",
                                     "subjects": ["carol"]})
    assert new["supersedes"] == [old["id"]]
    now = facade.call("memory_search", {"query": "where does Carol live", "limit": 5})
    assert old["id"] not in [r["id"] for r in now["results"]]
    past = facade.call("memory_search", {"query": "where does Carol live", "limit": 5,
                                         "includeSuperseded": True})
    marked = {r["id"]: r["superseded_by"] for r in past["results"]}
    assert marked[old["id"]] == new["id"] and marked[new["id"]] is None


@pytest.mark.slow
def test_amem_update_and_search_history_through_the_installed_script(tmp_path: Path) -> None:
    env = {"AMEM_HOME": str(tmp_path), "AMEM_EMBEDDER": "hashing", "PATH": "/usr/bin:/bin"}

    def amem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AMEM), *args], env=env, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)

    first = json.loads(amem("add", "Dana drinks coffee", "--subject", "Dana", "--json").stdout)
    nid = first["id"]
    done = amem("update", nid, "--text", "Dana drinks black coffee", "--subject", "Dana",
                "--subject", "Eve", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] == ["text", "subjects"]
    newer = json.loads(amem("add", "Dana stopped coffee and drinks tea instead",
                            "--subject", "Dana", "--json").stdout)
    assert newer["supersedes"] == [nid]
    history = json.loads(amem("search", "Dana coffee", "--history", "--json").stdout)["results"]
    assert [(r["content"], r["superseded_by"]) for r in history if r["id"] == nid] == [
        ("Dana drinks black coffee", newer["id"])]
    nothing = amem("update", nid)
    assert nothing.returncode == 2 and "nothing to update" in nothing.stderr
    missing = amem("update", "no-such-note", "--text", "x")
    assert missing.returncode == 3
