"""``amem backup DIR`` / ``amem restore DIR`` through the installed script: a whole home (every
agent's notes, the conversation store, the keys) into a new directory and back into an empty
home, with a server running too; refusals that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_console import amem, base_env
from .test_cli_server import Server


def _notes(env: dict[str, str]) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in amem(env, "export", "-").stdout.splitlines()]
    return sorted(({**r["note"], "vector": r.get("vector")} for r in rows),
                  key=lambda n: str(n["id"]))


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    env = base_env(tmp_path / "home")
    amem(env, "add", "Alice drinks green tea every morning", "--no-enrich")
    amem(env, "add", "Bob rides a blue bicycle to work", "--no-enrich", "--agent", "bob")
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "remember the blue door code 4711"})
                    + "\n", encoding="utf-8")
    amem(env, "lcm", "ingest", str(chat), "--session-key", f"agent:{env['AMEM_AGENT']}:main")
    amem(env, "keys", "add", "--agent", "bob")
    return env


def test_a_home_backed_up_and_restored_into_an_empty_home_is_the_same(
        home: dict[str, str], tmp_path: Path) -> None:
    done = json.loads(amem(home, "backup", str(tmp_path / "bk"), "--json").stdout)
    assert done["notes"] == {"file": "notes.jsonl", "count": 2, "through_server": False}
    assert done["conversations"]["file"] == "lcm.db" and done["keys"] == "keys.json"
    assert done["left_out"] == []
    files = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "bk").iterdir()}
    assert files == {"notes.jsonl": 0o600, "lcm.db": 0o600, "keys.json": 0o600,
                     "manifest.json": 0o600}
    again = amem(home, "backup", str(tmp_path / "bk"), code=2).stderr  # never over a backup
    assert "already exists" in again

    fresh = base_env(tmp_path / "fresh")
    restored = json.loads(amem(fresh, "restore", str(tmp_path / "bk"), "--json").stdout)
    assert restored["notes"]["created"] == 2
    assert _notes(fresh) == _notes(home)  # every agent's notes, ids, fields and vectors
    grep = amem(fresh, "lcm", "grep", "door code", "--json").stdout
    assert "4711" in grep
    assert "agent 'bob'" in amem(fresh, "keys", "list").stdout
    # a second restore into the now full home is refused and changes nothing
    refused = amem(fresh, "restore", str(tmp_path / "bk"), code=2).stderr
    assert "already holds" in refused and "nothing was restored" in refused
    assert len(_notes(fresh)) == 2


def test_a_backup_while_the_server_holds_the_store_has_every_note(
        home: dict[str, str], tmp_path: Path) -> None:
    server = Server(home)
    try:
        amem(home, "add", "Carol keeps bees on the roof", "--agent", "carol")  # through it
        done = json.loads(amem(home, "backup", str(tmp_path / "bk"), "--json").stdout)
    finally:
        server.stop()
    assert done["notes"]["through_server"] is True and done["notes"]["count"] == 3
    lines = (tmp_path / "bk" / "notes.jsonl").read_text().splitlines()
    assert {json.loads(line)["note"]["agent_id"] for line in lines} == {
        home["AMEM_AGENT"], "bob", "carol"}


def test_what_a_backup_cannot_hold_is_said_and_a_failed_one_leaves_nothing(
        home: dict[str, str], tmp_path: Path) -> None:
    served = {**home, "AMEM_LCM_URL": "postgresql://amem@127.0.0.1:9/amem"}
    done = amem(served, "backup", str(tmp_path / "pg"), "--json")
    assert "not in the backup: the conversations: they live on a PostgreSQL server" in done.stderr
    assert json.loads(done.stdout)["conversations"] is None
    assert not (tmp_path / "pg" / "lcm.db").exists()
    # a conversation store that cannot be copied: an error, and no backup directory at all
    broken = {**home, "AMEM_LCM_URL": str(tmp_path / "not-a-db")}
    (tmp_path / "not-a-db").write_bytes(b"this is no SQLite database, just text" * 200)
    err = amem(broken, "backup", str(tmp_path / "bad"), code=1).stderr
    assert "Traceback" not in err
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.*"))
    # not a backup
    (tmp_path / "empty").mkdir()
    assert "not a backup made by `amem backup`" in amem(home, "restore", str(tmp_path / "empty"),
                                                        code=2).stderr
