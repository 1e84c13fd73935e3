"""The CLI while ``amem serve --http`` holds the store: the installed ``amem`` script asks the
running server (found through ``<home>/server.json``) and prints what it prints without one.

One real server subprocess on a free port; the local answers are taken with the server
stopped, the same store in the same state, so the outputs must be equal byte for byte.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.kernel.files import private_dir
from lcm.largefiles import LEFTOVER_AGE_S
from tools.cli import main
from tools.remote import find_server, record_path

from .http_server import free_port
from .test_cli_console import AMEM, ROOT, amem, base_env

pytestmark = pytest.mark.slow

NOTES = ["Alice prefers green tea over coffee", "Bob rides a blue bicycle to work",
         "The staging database moved to db-2.internal on Monday", "x" * 400 + " a long note"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("served")
    # heat off: a search records its hits, and heat would change the next search's scores
    env = base_env(home, AMEM_HEAT="false")
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(), agent_id="console") as store:
        for text in NOTES:
            store.add(text, enrich=False)
        other = store.add("a note of another agent", enrich=False, agent_id="other").id
        # tags as an older amem wrote them: the doctor names them (amem.tagtidy)
        store.index.update_payload(other, "other", {"tags": ["#", "Maps", "#maps"]})
    return env


class Server:
    """``amem serve --http`` on a free port, stopped with SIGINT as a user would."""

    def __init__(self, env: dict[str, str], *extra: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}/mcp"
        port = self.url.split(":")[2].split("/")[0]
        self.proc = subprocess.Popen([str(AMEM), "serve", "--http", "--port", port,
                                      "--no-scheduler", *extra], env=env, cwd=ROOT, text=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        record = record_path(env["AMEM_HOME"])
        deadline = time.monotonic() + 60
        while not (record.exists() and _answers(self.url)):
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the server did not start within 60 s"
            time.sleep(0.1)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=60)
        return err


def _answers(url: str) -> bool:
    from tools.remote import port_is_open

    return port_is_open(url)


#: the access counters a read updates by design (get and search record it): compared apart
VOLATILE = ("last_accessed", "retrieval_count")


def local_output(env: dict[str, str], *args: str) -> str:
    """What the command prints with the store opened here (in this process: the baseline)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(args), env=env) == 0
    return out.getvalue()


def steady(text: str) -> str:
    kept = [line for line in text.splitlines() if not line.startswith(VOLATILE)]
    assert len(kept) == len(text.splitlines()) - len(VOLATILE)  # both counters were shown
    return "\n".join(kept)


@pytest.fixture(scope="module")
def served(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """What the commands print through the server (with the store held by it), then locally."""
    commands = {"search": ["search", "bicycle", "-n", "3", "--json"], "list": ["list", "--json"],
                "status": ["status", "--json"], "doctor": ["doctor", "--json"]}
    server = Server(env)
    record = record_path(env["AMEM_HOME"])
    try:
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        # writes first, so both sides read the same state: an add as agent w, and a delete by
        # the CLI's default agent of w's note, which it cannot see
        # with tags: the server's memory_add takes them as the local add does
        added = json.loads(amem(env, "add", "Carol collects maps", "--json", "--agent", "w",
                                "--tag", "maps", "--tag", "#Old Maps").stdout)
        assert added["status"] == "created" and added["enriched_by"] == "given"
        tagged = json.loads(amem(env, "get", added["id"], "--agent", "w", "--json").stdout)
        assert "for agent 'console'" in amem(env, "delete", added["id"], code=3).stderr
        # a tag naming nothing is refused by the server, by name, and nothing is stored
        tag_refused = amem(env, "add", "Dana maps rivers", "--tag", "#", code=2).stderr
        # the get before status: a get of a note the server's search returned records usage
        # heat, a payload write that status counts (a note moved out of the index)
        remote = {name: amem(env, *commands[name]).stdout for name in ("search", "list")}
        note = json.loads(remote["list"])["notes"][0]["id"]
        remote["get"] = amem(env, "get", note).stdout
        remote.update({name: amem(env, *commands[name]).stdout for name in ("status", "doctor")})
        # the served store's tags are not tidied by --fix through the server, and it says so
        unfixed = json.loads(amem(env, "doctor", "--fix", "--json").stdout)
        modules = {name: routed_modules(env, *args) for name, args in
                   [("list", ["list"]), ("get", ["get", note]), ("status", ["status"]),
                    ("search", ["search", "bicycle"]), ("doctor", ["doctor"])]}
        # --server with another spelling of the url: the record's secret goes only to the
        # record's url, and without a key of its own the CLI sends nothing there
        denied = amem(env, "status", "--server", server.url.replace("127.0.0.1", "localhost"),
                      code=1)
        assert "no key for" in denied.stderr and "AMEM_SERVER_TOKEN" in denied.stderr
        # the conversation database is SQLite, which the server does not lock
        assert json.loads(amem(env, "lcm", "status", "--json").stdout)["conversations"] == 0
        # so `doctor --fix` removes a killed large-file write's old .tmp with a server running
        # too (lcm's own clean, in the CLI's process); the server's report no longer names it
        left = Path(env["AMEM_HOME"]) / "lcm-files" / "c1" / "file_00000000000000aa.txt.tmp"
        private_dir(left.parent)  # 0700, as lcm makes it
        left.write_text("half")
        os.utime(left, (time.time() - LEFTOVER_AGE_S - 60,) * 2)
        fixed = json.loads(amem(env, "doctor", "--fix", "--json").stdout)
        assert fixed["lcm_leftovers_removed"] == ["c1/" + left.name] and not left.exists()
        assert not [w for w in fixed["warnings"] if "leftover" in w]
    finally:
        err = server.stop()
    assert not record.exists(), err  # removed on a clean exit
    local = {name: local_output(env, *commands[name]) for name in ("search", "list")}
    local["get"] = local_output(env, "get", note)
    local.update({name: local_output(env, *commands[name]) for name in ("status", "doctor")})
    yield {**{f"remote_{k}": v for k, v in remote.items()},
           **{f"local_{k}": v for k, v in local.items()}, "added": added["id"],
           "modules": json.dumps(modules), "tag_refused": tag_refused,
           "tagged": json.dumps(tagged["tags"]), "unfixed": json.dumps(unfixed)}


#: what a routed command must not load: the SDK's client and the store's engine, numpy and model
HEAVY = ("mcp", "numpy", "onnxruntime", "qdrant_edge")
_PROBE = """
import json, sys
from tools.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


def routed_modules(env: dict[str, str], *args: str) -> dict[str, object]:
    """Which of ``HEAVY`` a command run in a fresh interpreter has loaded when it ends."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("name", ["search", "list", "doctor"])
def test_output_through_the_server_is_the_local_output(served: dict[str, str], name: str) -> None:
    assert served[f"remote_{name}"] == served[f"local_{name}"]


def test_status_through_the_server_is_the_local_status(served: dict[str, str]) -> None:
    """Equal but for the size of lcm's database file, which counts its write-ahead log: that
    shrinks when the last connection closes (the server's, here), whatever the store holds."""
    remote, local = (json.loads(served[f"{side}_status"]) for side in ("remote", "local"))
    for status in (remote, local):
        assert status["lcm"].pop("size_bytes") > 0
    # the server keeps the notes' ranking fields in RAM (amem.backends._edge_table); a
    # one-shot command does not
    table = remote["memory"].pop("rank_table")
    assert table["state"] in ("reading back", "filling", "filled")
    assert local["memory"].pop("rank_table") is None
    # the server counts its callers' requests against their budgets (tools.ratelimit); a
    # one-shot command serves no caller
    budgets = remote.pop("rate_limit")
    assert budgets["on"] is True and budgets["refused"] == 0
    assert budgets["keys"]["server-record"]["writes"] >= 1  # the add of the fixture
    assert "rate_limit" not in local
    # the retrieval counts of the searches after the remote status (the server's, written as
    # it stops, and the local one's, as its process ends) move those notes out of the index:
    # counted after the remote status, each point once
    moved = [side["memory"]["index_build"].pop("points_moved") for side in (remote, local)]
    assert 1 <= moved[0] <= moved[1] <= local["memory"]["points"], moved
    assert remote == local


def test_get_through_the_server_is_the_local_get(served: dict[str, str]) -> None:
    assert steady(served["remote_get"]) == steady(served["local_get"])


def test_a_routed_command_loads_neither_the_sdk_nor_the_store(served: dict[str, str]) -> None:
    """A routed command is the CLI, a few JSON-RPC requests and the printing: on the code
    before it loaded the MCP SDK's client and opened the store up to its lock (numpy, the
    engine), 1.1-1.4 s of CPU against 0.4-0.5 s for the same command run directly."""
    modules = json.loads(served["modules"])
    assert modules == {name: {"code": 0, "loaded": []}
                       for name in ("list", "get", "status", "search", "doctor")}


def test_what_the_commands_saw(served: dict[str, str]) -> None:
    """The equal outputs are real answers: the agent's own notes, whole, and no one else's."""
    page = json.loads(served["remote_list"])
    assert page["count"] == len(NOTES)
    assert {n["content"] for n in page["notes"]} == set(NOTES)  # the long note unclipped
    status = json.loads(served["remote_status"])
    assert status["memory"]["agents"] == 3 and status["memory"]["notes_of_agent"] == len(NOTES)
    assert "bicycle" in json.loads(served["remote_search"])["results"][0]["content"]
    assert json.loads(served["remote_doctor"])["memory"]["active_notes"] == len(NOTES) + 2


def test_a_stale_or_foreign_record_is_ignored_and_a_stdio_server_explained(
        env: dict[str, str]) -> None:
    home = env["AMEM_HOME"]
    record = record_path(home)
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder()):  # this process holds it
        def write(data: dict[str, object], mode: int = 0o600) -> None:
            record.write_text(json.dumps(data))
            os.chmod(record, mode)

        write({"transport": "http", "pid": 2 ** 22 + 7, "url": "http://127.0.0.1:9/mcp",
               "token": "t"})
        stale = amem(env, "search", "tea", code=4)
        assert "no longer running" in stale.stderr and "in use" in stale.stderr
        assert "removed" in stale.stderr and not record.exists()  # a dead pid's record goes
        write({"transport": "stdio", "pid": os.getpid()})
        stdio = amem(env, "get", "anything", code=4)
        assert "on stdio" in stdio.stderr and "--http" in stdio.stderr
        for data, mode, why in (
                ({"url": "http://127.0.0.1:9/mcp"}, 0o644, "not a private file"),
                ({"url": "http://10.0.0.9:8765/mcp"}, 0o600, "not on this machine"),
                ({"url": "http://127.0.0.1:9/mcp", "pid": os.getppid()}, 0o600, "holds the store")):
            write({"transport": "http", "pid": os.getpid(), "token": "t", **data}, mode)
            with contextlib.redirect_stderr(io.StringIO()) as said:
                assert find_server(home, holder_pid=os.getpid()) is None
            assert why in said.getvalue()
        # every other check passes, but nothing at the url proves it wrote the record
        write({"transport": "http", "pid": os.getpid(), "url": "http://127.0.0.1:9/mcp",
               "token": "t"})
        with contextlib.redirect_stderr(io.StringIO()) as said:
            assert find_server(home, holder_pid=os.getpid()) is None
        assert "does not answer" in said.getvalue() and record.exists()  # maybe starting: kept
    record.unlink()


def test_export_through_the_server_is_the_export_of_the_stopped_store(
        env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> None:
    # `amem export` needed the store itself: a served store could be backed up only by a copy of
    # its files (a tar taken during adds held 18 of 34 acknowledged notes) or not at all
    out = tmp_path_factory.mktemp("export")
    server = Server(env)
    try:
        done = json.loads(amem(env, "export", str(out / "served.jsonl"), "--json").stdout)
        mine = json.loads(amem(env, "export", str(out / "other.jsonl"), "--agent", "other",
                               "--json").stdout)
        # another agent's key reads no export, and says whose it is
        key = json.loads(amem(env, "keys", "add", "--agent", "console", "--json").stdout)["secret"]
        denied = amem({**env, "AMEM_SERVER_TOKEN": key}, "export", str(out / "denied.jsonl"),
                      "--server", server.url, code=2)  # forbidden: a usage error
    finally:
        server.stop()
    assert done["through_server"] is True and done["exported"] >= len(NOTES) + 1
    assert "for the owner of the data directory" in denied.stderr
    assert not (out / "denied.jsonl").exists()  # nothing written under the name on a refusal
    local = json.loads(amem(env, "export", str(out / "local.jsonl"), "--json").stdout)
    assert local["through_server"] is False and local["exported"] == done["exported"]
    # the same notes, vectors and fields, in the same order, byte for byte
    assert (out / "served.jsonl").read_bytes() == (out / "local.jsonl").read_bytes()
    others = [json.loads(line)["note"] for line in (out / "other.jsonl").read_text().splitlines()]
    assert mine["exported"] == len(others) >= 1 and {n["agent_id"] for n in others} == {"other"}


def test_tags_go_through_the_server_and_a_bad_one_is_refused(served: dict[str, str]) -> None:
    # the server refused every --tag before (its memory_add took no tags)
    assert json.loads(served["tagged"]) == ["maps", "#Old Maps"]
    assert "names no tag" in served["tag_refused"] and "tags" in served["tag_refused"]
    page = json.loads(served["remote_list"])
    assert "Dana maps rivers" not in {n["content"] for n in page["notes"]}


def test_doctor_fix_through_the_server_says_the_tags_were_not_tidied(
        served: dict[str, str]) -> None:
    unfixed = json.loads(served["unfixed"])
    assert unfixed["memory"]["untidy_tags"] == 1 and "tags_tidied" not in unfixed["memory"]
    assert any(w.startswith("tags were not tidied") for w in unfixed["warnings"])
    # still there afterwards, as the local doctor (run with the server stopped) finds them
    assert json.loads(served["local_doctor"])["memory"]["untidy_tags"] == 1
