"""The ``amem`` command line through ``main(argv, env=...)`` and one real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from tools.cli import main
from tools.facade import catalogue as facade_catalogue

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing",
            "AMEM_AGENT": "cli-agent"}


def run(capsys: pytest.CaptureFixture[str], env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv), env=env)
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys: pytest.CaptureFixture[str], env: dict[str, str], *argv: str) -> object:
    code, out, err = run(capsys, env, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_note_lifecycle(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    added = run_json(capsys, env, "add", "Alice prefers green tea", "--subject", "alice")
    assert added["status"] == "created"
    code, out, _ = run(capsys, env, "add", "Bob rides a blue bicycle", "--no-enrich")
    assert code == 0 and out.startswith("created ")
    code, table, _ = run(capsys, env, "search", "green tea", "-n", "1")
    assert code == 0 and table.splitlines()[0].split()[:4] == ["#", "score", "via", "id"]
    assert "Alice prefers green tea" in table
    hits = run_json(capsys, env, "search", "bicycle")["results"]
    assert hits[0]["content"] == "Bob rides a blue bicycle"
    listed = run_json(capsys, env, "list")
    assert listed["count"] == 2
    note = run_json(capsys, env, "get", added["id"])
    assert note["content"] == "Alice prefers green tea" and note["subjects"] == ["alice"]
    assert run_json(capsys, env, "delete", added["id"]) == {"id": added["id"], "deleted": True,
                                                             "released": []}
    code, out, err = run(capsys, env, "get", added["id"], "--json")
    assert code == 3 and json.loads(out)["error"]["code"] == "not_found" and "amem: error" in err
    # Another agent sees nothing.
    assert run_json(capsys, env, "list", "--agent", "someone-else")["count"] == 0


def test_add_takes_tags_and_search_finds_them_in_any_case(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    """`amem add --tag`: a note tagged as it is stored (a new user could tag only by
    importing a file, or by an update after the add)."""
    added = run_json(capsys, env, "add", "Booked the Lisbon flight", "--tag", "Travel",
                     "--tag", "Road Trip")
    assert isinstance(added, dict) and added["status"] == "created"
    note = run_json(capsys, env, "get", added["id"])
    assert isinstance(note, dict) and note["tags"] == ["Travel", "Road Trip"]
    for wanted in ("travel", "#TRAVEL", "road-trip"):
        found = run_json(capsys, env, "search", "Lisbon", "--tag", wanted)
        assert isinstance(found, dict)
        assert [h["id"] for h in found["results"] if h["via"] == "match"] == [added["id"]], wanted
    code, _, err = run(capsys, env, "add", "Packed for Porto", "--tag", "#")
    assert code == 2 and "names no tag" in err
    listed = run_json(capsys, env, "list")
    assert isinstance(listed, dict) and listed["count"] == 1  # the refused add stored nothing


def test_exit_codes(capsys: pytest.CaptureFixture[str], env: dict[str, str], tmp_path: Path) -> None:
    assert run(capsys, env, "frobnicate")[0] == 2
    assert run(capsys, env, "search")[0] == 2  # missing argument
    code, _, err = run(capsys, env, "add", "   ")
    assert code == 2 and "text must not be empty" in err
    code, _, err = run(capsys, {**env, "AMEM_RRF_K": "zero"}, "list")
    assert code == 2 and "AMEM_RRF_K" in err
    # A store owned by another handle: exit 4 and a message naming what to do.
    cfg = load_config(env={"AMEM_HOME": env["AMEM_HOME"]})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder()):
        code, _, err = run(capsys, env, "list")
    assert code == 4 and "store" in err


def test_import_export_round_trip(capsys: pytest.CaptureFixture[str], env: dict[str, str],
                                  tmp_path: Path) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text('{"text": "first imported note"}\nnot json\n'
                   '{"text": "second imported note", "subjects": ["x"]}\n', encoding="utf-8")
    code, out, err = run(capsys, env, "import", str(src), "--no-enrich", "--json")
    assert code == 2 and json.loads(out)["error"]["field"] == "file" and f"{src}:2:" in err
    assert run_json(capsys, env, "list")["count"] == 0  # checked whole first: nothing written
    code, out, _ = run(capsys, env, "import", str(src), "--no-enrich", "--skip-invalid", "--json")
    report = json.loads(out)
    assert code == 1 and report["created"] == 2 and report["skipped"] == 1
    assert report["errors"][0].startswith(f"{src}:2:")
    exported = tmp_path / "dump.jsonl"
    assert run_json(capsys, env, "export", str(exported))["exported"] == 2
    other = {**env, "AMEM_HOME": str(tmp_path / "other")}
    assert run_json(capsys, other, "import", str(exported), "--from-export")["created"] == 2
    assert run_json(capsys, other, "list")["count"] == 2
    code, _, err = run(capsys, env, "import", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no such file" in err


def test_status_doctor_tools_and_lcm(capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    run_json(capsys, env, "add", "a note for the status", "--no-enrich")
    status = run_json(capsys, env, "status")
    assert status["memory"]["notes_of_agent"] == 1 and status["memory"]["embedder"].startswith("hashing")
    assert status["lcm"]["conversations"] == 0
    assert status["nightly"]["state"] == "never"
    doctor = run_json(capsys, env, "doctor", "--clean")
    assert doctor["ok"] is True and "clean" in doctor["lcm"]
    tools = run_json(capsys, env, "tools", "--format", "openai")
    catalogue = len(facade_catalogue())  # every tool the facade offers
    assert len(tools) == catalogue and tools[0]["type"] == "function"
    sizes = run_json(capsys, env, "tools", "--lazy", "--tokens")
    assert sizes["tools"] == catalogue and sizes["tokens"] > 0  # lazy lists every tool, shorter
    assert run_json(capsys, env, "lcm", "status")["messages"] == 0
    assert run_json(capsys, env, "lcm", "grep", "anything", "--all")["hits"] == []
    assert run_json(capsys, env, "lcm", "doctor")["ok"] is True
    code, _, err = run(capsys, env, "lcm", "describe", "nonsense")
    assert code == 2 and "not an lcm id" in err
    assert run(capsys, env, "lcm", "expand")[0] == 2


def test_scheduler_arguments_are_forwarded(capsys: pytest.CaptureFixture[str],
                                          env: dict[str, str]) -> None:
    code, out, _ = run(capsys, env, "scheduler", "--status", "--json")
    assert code == 0 and json.loads(out)["state"] == "never"


@pytest.mark.slow
def test_console_script_subprocess(tmp_path: Path) -> None:
    env = {"AMEM_HOME": str(tmp_path), "AMEM_EMBEDDER": "hashing", "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tools.cli", "add", "piped note", "--json"],
                          env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "created"
    done = subprocess.run([sys.executable, "-m", "tools.cli", "search", "piped"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and "piped note" in done.stdout
    assert "\r" not in done.stderr  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("port", ["0", "65536", "99999", "-1", "http"])
def test_serve_refuses_a_port_outside_1_to_65535(capsys: pytest.CaptureFixture[str],
                                                env: dict[str, str], port: str) -> None:
    code, _, err = run(capsys, env, "serve", "--http", "--port", port)
    assert code == 2 and "argument --port" in err  # 99999 was exit 1 "unexpected OverflowError"
