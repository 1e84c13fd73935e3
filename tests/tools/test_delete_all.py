"""Delete everything of one agent: the store call, the confirmed tool, the CLI that asks first."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from amem import MemoryStore
from tools import ToolFacade

from .conftest import SEED, Tenants

AMEM = str(Path(sys.executable).with_name("amem"))


def _ids(store: MemoryStore, agent: str) -> set[str]:
    return {n.id for n, _ in store.iter_notes(agent_id=agent, include_inactive=True)}


def test_delete_all_takes_only_that_agents_notes(tenants: Tenants) -> None:
    store = tenants.store
    store.delete(next(iter(_ids(store, tenants.alice))), agent_id=tenants.alice)  # soft first
    mallory = _ids(store, tenants.mallory)
    points, docs = store.index.backend.count(None), store.index.stats.docs
    assert store.delete_all(agent_id=tenants.alice) == len(SEED)  # the soft-deleted one too
    assert _ids(store, tenants.alice) == set() and store.count(agent_id=tenants.alice) == 0
    assert _ids(store, tenants.mallory) == mallory
    assert store.search("vault code", agent_id=tenants.mallory)[0].content.startswith("Mallory")
    # the BM25 statistics lose exactly the deleted documents
    assert store.index.backend.count(None) == points - len(SEED)
    assert store.index.stats.docs == docs - len(SEED)
    assert store.delete_all(agent_id=tenants.alice) == 0  # idempotent


def test_the_tool_needs_confirm_and_erases_only_the_callers_memory(
        tenants: Tenants, facade: ToolFacade) -> None:
    refused = facade.call("memory_delete_all", {"confirm": False})
    assert refused["error"]["code"] == "invalid_argument" and refused["error"]["field"] == "confirm"
    assert facade.call("memory_delete_all", {})["error"]["code"] == "invalid_argument"
    # no argument names another agent: the caller's own id is the only one it can reach
    sneaky = facade.call("memory_delete_all", {"confirm": True, "agent_id": tenants.mallory})
    assert sneaky["error"]["code"] == "invalid_argument"
    assert tenants.store.count(agent_id=tenants.alice) == len(SEED)
    assert facade.call("memory_delete_all", {"confirm": True}) == {"deleted": len(SEED)}
    assert facade.call("memory_list", {})["count"] == 0
    assert tenants.store.count(agent_id=tenants.mallory) == 1
    mallory = ToolFacade(tenants.store, None, agent_id=tenants.mallory)
    assert mallory.call("memory_search", {"query": "vault code"})["matches"] == 1
    tool = next(t for t in facade.registry if t.name == "memory_delete_all")
    assert tool.annotations()["destructiveHint"] is True


# -- the CLI, through the installed script ------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing",
            "AMEM_AGENT": "cli-a"}


def _amem(env: dict[str, str], *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([AMEM, *argv], input=stdin, env=env, capture_output=True, text=True,
                          timeout=120)


def _count(env: dict[str, str], agent: str) -> int:
    out = _amem(env, "list", "--json", "--agent", agent)
    assert out.returncode == 0, out.stderr
    return int(json.loads(out.stdout)["count"])


def _on_a_tty(env: dict[str, str], answer: str) -> tuple[int, str]:
    """``amem delete --all`` with a terminal on stdin, answering the question with ``answer``."""
    master, slave = os.openpty()
    child = subprocess.Popen([AMEM, "delete", "--all"], stdin=slave, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
    os.close(slave)
    assert child.stderr is not None
    try:
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            if select.select([child.stderr], [], [], 0.2)[0]:
                break  # the question is on stderr: answer it
        os.write(master, answer.encode() + b"\n")
        out, err = child.communicate(timeout=120)
    finally:
        os.close(master)
    return child.returncode, err


def test_cli_delete_all_asks_on_a_terminal_and_refuses_a_pipe_without_yes(tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    for text in ("Alice likes tea", "Bob likes coffee"):
        assert _amem(env, "add", text, "--no-enrich").returncode == 0
    assert _amem(env, "add", "Carol keeps bees", "--no-enrich", "--agent", "cli-b").returncode == 0

    piped = _amem(env, "delete", "--all", stdin="yes\n")  # stdin is a pipe: no question asked
    assert piped.returncode == 2 and "--yes" in piped.stderr

    code, err = _on_a_tty(env, "no")
    assert code == 1 and "Erase every note of agent 'cli-a'" in err and "nothing deleted" in err
    assert _count(env, "cli-a") == 2
    code, err = _on_a_tty(env, "yes")
    assert code == 0, err
    assert _count(env, "cli-a") == 0 and _count(env, "cli-b") == 1

    assert _amem(env, "add", "Dave flies kites", "--no-enrich").returncode == 0
    done = _amem(env, "delete", "--all", "--yes", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"agent": "cli-a", "deleted": 1}
    both = _amem(env, "delete", "some-id", "--all", "--yes")
    assert both.returncode == 2 and "not both" in both.stderr
