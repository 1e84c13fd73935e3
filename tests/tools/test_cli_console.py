"""Every ``amem`` command through the real console script, in a subprocess, on a non-empty store.

One store (notes with near-duplicates, a conversation) is built once for the module; each
test runs the installed ``amem`` script next to this interpreter with ``AMEM_HOME`` in a tmp
dir and the hashing embedder. The commands that change the store shape (reembed, import into
a second home) get their own home. Startups cost 1-3 s each, so commands share tests.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Iterator

import pytest

from amem import MemoryStore
from amem.backends.edge import auto_search_threads
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from tools.runtime import Runtime

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[2]
AGENT = "console"
SESSION = f"agent:{AGENT}:main"

pytestmark = pytest.mark.slow


def base_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": AGENT,
                "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def amem(env: dict[str, str], *args: str, code: int = 0, stdin: str | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(AMEM), *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def amem_json(env: dict[str, str], *args: str, code: int = 0) -> object:
    return json.loads(amem(env, *args, "--json", code=code).stdout)


NOTES = ([{"text": f"release {i}: the deploy of service {i} failed with exit code 137",
           "id": f"r{i}"} for i in range(8)]
         + [{"text": "Alice prefers green tea in the morning", "id": "tea"},
            {"text": "Alice prefers green tea in the mornings", "id": "tea2"},
            {"text": "Bob rides a blue bicycle to work", "id": "bike"},
            {"text": "北京的冬天很冷", "id": "zh"}])


@pytest.fixture(scope="module")
def store_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A home with 12 notes (two near-duplicates) imported by the script, and a conversation."""
    home = tmp_path_factory.mktemp("console")
    src = home / "notes.jsonl"
    src.write_text("".join(json.dumps(n, ensure_ascii=False) + "\n" for n in NOTES),
                   encoding="utf-8")
    env = base_env(home)
    report = amem_json(env, "import", str(src), "--no-enrich")
    assert isinstance(report, dict) and report["created"] == len(NOTES)
    with Runtime.load(env) as runtime:
        runtime.lcm.ingest(SESSION, [{"role": "user" if i % 2 == 0 else "assistant",
                                      "content": f"deploy step {i}: the build failed with exit 137"}
                                     for i in range(12)])
    yield env


def test_help_lists_every_command_and_each_has_help(store_env: dict[str, str]) -> None:
    out = amem(store_env, "--help").stdout
    for name in ("add", "search", "list", "get", "delete", "import", "export", "consolidate",
                 "reembed", "serve", "scheduler", "status", "doctor", "tools", "lcm"):
        assert f"    {name}" in out, name
    assert "Exit codes: 0 ok, 1 error, 2 usage/invalid input, 3 not found" in out


def test_note_commands_on_a_non_empty_store(store_env: dict[str, str]) -> None:
    added = amem_json(store_env, "add", "Carol collects old maps of Lisbon", "--subject", "carol")
    assert isinstance(added, dict) and added["status"] == "created"
    piped = amem(store_env, "add", "-", "--no-enrich", stdin="a note read from stdin\n")
    assert piped.stdout.startswith("created ")
    hits = amem_json(store_env, "search", "maps of Lisbon", "--subject", "carol")
    assert isinstance(hits, dict) and hits["results"][0]["id"] == added["id"]
    note = amem_json(store_env, "get", "bike")
    assert isinstance(note, dict) and note["content"] == "Bob rides a blue bicycle to work"
    page = amem(store_env, "list", "-n", "3").stdout
    assert "next page: --offset" in page and len(page.splitlines()) == 4
    assert amem_json(store_env, "delete", added["id"]) == {"id": added["id"], "deleted": True,
                                                            "released": []}
    gone = amem(store_env, "get", added["id"], "--json", code=3)
    assert json.loads(gone.stdout)["error"]["code"] == "not_found"
    assert "amem: error" in gone.stderr


def test_consolidate_on_a_non_empty_store(store_env: dict[str, str]) -> None:
    report = amem_json(store_env, "consolidate")  # crashed: ProgressBar got (stage, done, total)
    assert isinstance(report, dict) and report["notes"] >= 4
    report = amem_json(store_env, "consolidate", "--all-agents")
    assert isinstance(report, dict) and AGENT in report["per_agent"]


def _run_on_a_terminal(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (progress bars draw there), stdout on a pipe."""
    leader, follower = pty.openpty()
    # a terminal of 100x30: a fresh pseudo-terminal is 0 columns wide
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    try:
        proc = subprocess.Popen([str(AMEM), *args], env=env, stdout=subprocess.PIPE,
                                stderr=follower, text=True, cwd=ROOT)
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def test_progress_draws_on_a_terminal_only_on_stderr_and_never_with_quiet(
        store_env: dict[str, str]) -> None:
    code, out, err = _run_on_a_terminal(store_env, "consolidate", "--json")
    assert code == 0 and "consolidate: scan" in err and "100%" in err
    assert json.loads(out)["notes"] >= 1  # stdout holds the result only
    code, out, err = _run_on_a_terminal(store_env, "consolidate", "--json", "--quiet")
    assert code == 0 and "consolidate" not in err and json.loads(out)["notes"] >= 1


def test_export_and_import_between_homes(store_env: dict[str, str], tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    exported = amem_json(store_env, "export", str(dump))
    assert isinstance(exported, dict) and exported["exported"] >= len(NOTES)
    to_stdout = amem(store_env, "export", "--no-vectors")
    assert len(to_stdout.stdout.splitlines()) == exported["exported"]
    other = base_env(tmp_path / "other")
    lines = dump.read_text(encoding="utf-8").splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:-1] + ["{not json"]) + "\n", encoding="utf-8")
    rejected = amem(other, "import", str(broken), "--from-export", code=2)
    assert f"{broken}:{len(lines)}:" in rejected.stderr and "nothing was imported" in rejected.stderr
    loaded = amem_json(other, "import", str(dump), "--from-export")
    assert isinstance(loaded, dict) and loaded["created"] == exported["exported"]
    assert amem_json(other, "get", "zh")["content"] == "北京的冬天很冷"  # type: ignore[index]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "good"}\n{"text": ""}\n', encoding="utf-8")
    assert "bad.jsonl:2:" in amem(other, "import", str(bad), code=2).stderr
    partial = amem(other, "import", str(bad), "--skip-invalid", "--json", code=1)
    assert json.loads(partial.stdout)["created"] == 1
    again = amem(other, "import", str(bad), "--skip-invalid", code=1)
    said = again.stdout + again.stderr  # each skipped line once (it was printed three times)
    assert said.count("bad.jsonl:2:") == 1, said


def test_reembed_in_its_own_home(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    amem(env, "add", "a note to rebuild", "--no-enrich")
    report = amem_json(env, "reembed", "--to", "hashing-32")
    assert isinstance(report, dict) and (report["notes"], report["new_dim"]) == (1, 32)
    assert "reembed" in amem(env, "list", code=1).stderr  # the old embedder no longer fits
    assert amem_json({**env, "AMEM_EMBEDDER": "hashing-32"}, "list")["count"] == 1  # type: ignore[index]


def test_status_doctor_and_tools(store_env: dict[str, str]) -> None:
    status = amem_json(store_env, "status")
    assert isinstance(status, dict) and status["memory"]["notes_of_agent"] >= 4
    assert status["lcm"]["messages"] == 12 and status["nightly"]["state"] == "never"
    # the engine's search threads: the default, or what the environment sets
    assert status["memory"]["search_threads"] == auto_search_threads()
    threaded = amem_json({**store_env, "AMEM_SEARCH_THREADS": "2"}, "status")
    assert threaded["memory"]["search_threads"] == 2  # type: ignore[index]
    doctor = amem_json(store_env, "doctor", "--clean")
    assert isinstance(doctor, dict) and doctor["ok"] is True and "clean" in doctor["lcm"]
    tools = amem_json(store_env, "tools", "--format", "anthropic")
    assert isinstance(tools, list) and all("input_schema" in t for t in tools)
    assert "tokens" in amem(store_env, "tools", "--lazy", "--tokens").stdout


def test_status_names_the_filters_searches_leave_out_until_a_note_fails_one(
        tmp_path: Path) -> None:
    env = base_env(tmp_path)
    amem(env, "add", "Dana keeps bees on the roof", "--no-enrich")
    first = amem_json(env, "add", "Evan repairs old radios", "--no-enrich")
    assert isinstance(first, dict)
    status = amem_json(env, "status")
    assert isinstance(status, dict)
    # one agent, nothing deleted, expiring or replaced: every condition is left out
    assert status["memory"]["filters_left_out"] == ["tenant", "is_active", "expiry",
                                                    "supersession"]
    amem(env, "delete", first["id"])  # a soft delete: the note stays, inactive
    amem(env, "add", "Fay's note", "--no-enrich", "--agent", "fay")
    after = amem_json(env, "status")
    assert after["memory"]["filters_left_out"] == ["expiry", "supersession"]  # type: ignore[index]
    # the tenant and is_active must both be said now: searches name the live key instead
    assert status["memory"]["filters_keyed"] is True
    assert after["memory"]["filters_keyed"] is True  # type: ignore[index]


def test_lcm_commands_on_a_non_empty_store(store_env: dict[str, str]) -> None:
    grep = amem_json(store_env, "lcm", "grep", "exit 137", "--session-key", SESSION)
    assert isinstance(grep, dict) and len(grep["hits"]) == 12
    # no scope given: the agent's main session, as the lcm_grep tool reads it
    unscoped = amem_json(store_env, "lcm", "grep", "exit 137")
    assert unscoped == grep
    described = amem_json(store_env, "lcm", "describe", "msg_1")
    assert isinstance(described, dict) and "deploy step 0" in json.dumps(described)
    expanded = amem_json(store_env, "lcm", "expand", "--query", "deploy", "--all")
    assert isinstance(expanded, dict) and "messages" in expanded
    assert amem_json(store_env, "lcm", "status")["messages"] == 12  # type: ignore[index]
    assert amem_json(store_env, "lcm", "doctor", "--clean") is not None


def test_scheduler_status_and_once(store_env: dict[str, str]) -> None:
    run = amem_json(store_env, "scheduler", "--once")
    assert isinstance(run, dict) and run["status"] == "ok"
    assert amem_json(store_env, "status")["nightly"]["state"] == "ok"  # type: ignore[index]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_serve_starts_and_stops_and_refuses_bad_ports(store_env: dict[str, str]) -> None:
    stdio = amem(store_env, "serve", "--no-scheduler", stdin="")  # the host closes the pipe
    assert stdio.stdout == ""  # stdout is the MCP wire: nothing but protocol
    port = _free_port()
    proc = subprocess.Popen([str(AMEM), "serve", "--http", "--port", str(port)], env=store_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the HTTP server did not listen within 60 s")
        busy = amem(store_env, "serve", "--http", "--port", str(port), code=2)
        assert f"127.0.0.1:{port}" in busy.stderr and "--port" in busy.stderr  # was exit 3
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    refused = amem(store_env, "serve", "--http", "--port", "99999", code=2)  # was 1, OverflowError
    assert "argument --port: must be 1-65535" in refused.stderr


def test_a_corrupt_nightly_record_is_reported_not_a_crash(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "nightly.json").write_text(json.dumps({"last_run": "x", "last_slot": [1]}))
    (tmp_path / "nightly.json").chmod(0o600)  # as amem writes it: only its content is wrong
    status = amem_json(env, "status")  # AttributeError before
    assert isinstance(status, dict) and len(status["nightly"]["record_problems"]) == 2
    doctor = amem_json(env, "doctor")
    assert isinstance(doctor, dict) and any("nightly record" in w for w in doctor["warnings"])
    assert amem(env, "serve", "--no-lcm", stdin="").returncode == 0  # starts the scheduler
    assert amem_json(env, "status")["nightly"]["record_problems"] == []  # type: ignore[index]


def test_exit_codes(store_env: dict[str, str]) -> None:
    assert "text must not be empty" in amem(store_env, "add", "   ", code=2).stderr
    assert amem(store_env, "get", "no-such-note", code=3).stderr.startswith("amem: error")
    cfg = load_config(env={"AMEM_HOME": store_env["AMEM_HOME"]})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder()):  # another process owns it
        assert "store" in amem(store_env, "list", code=4).stderr


def test_list_pages_by_cursor_or_by_count(store_env: dict[str, str]) -> None:
    """``--offset 3`` skips three notes (it was 'offset is not a UUID'), and lands where the
    cursor printed after a page of three lands."""
    first = amem_json(store_env, "list", "-n", "3")
    assert isinstance(first, dict) and first["next_offset"]
    by_cursor = amem_json(store_env, "list", "-n", "2", "--offset", first["next_offset"])
    by_count = amem_json(store_env, "list", "-n", "2", "--offset", "3")
    assert isinstance(by_cursor, dict) and isinstance(by_count, dict)
    assert [n["id"] for n in by_count["notes"]] == [n["id"] for n in by_cursor["notes"]]
    past = amem_json(store_env, "list", "--offset", "100000")
    assert past == {"count": past["count"], "notes": [], "next_offset": None}  # type: ignore[index]


def test_a_reader_that_leaves_early_ends_the_command_quietly(store_env: dict[str, str]) -> None:
    """``amem lcm status | head`` ended with '[Errno 32] Broken pipe' on stderr and exit 1."""
    with subprocess.Popen([str(AMEM), "lcm", "status"], env=store_env, cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader leaves before the command prints anything
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 141, err
    assert "Broken pipe" not in err and "Traceback" not in err, err


def test_lcm_grep_text_names_the_speaker(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(m) for m in [
        {"role": "user", "name": "alice", "content": "Shall we meet on Friday?"},
        {"role": "user", "name": "bob", "content": "Friday works, see you at noon."},
        {"role": "user", "content": "noon suits me as well"}]) + "\n", encoding="utf-8")
    amem(env, "lcm", "ingest", str(chat), "--session-key", f"agent:{AGENT}:main")
    lines = amem(env, "lcm", "grep", "noon", "--mode", "full_text").stdout.splitlines()
    said = sorted(line.rsplit("  ", 1)[1] for line in lines if line.startswith("message"))
    assert said == ["bob: Friday works, see you at noon.", "noon suits me as well"], lines
