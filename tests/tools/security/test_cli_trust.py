"""The CLI talks only to the server it started, and a stopped server leaves nothing behind.

A real ``amem serve --http``: killed with SIGKILL, an impostor takes its port, and no command
of the CLI sends the record's secret there (the impostor records every request it gets). A
server stopped with SIGTERM removes its record and closes its stores, as with Ctrl-C.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from tools.remote import find_server, load_record, record_path

from ..test_cli_console import amem, base_env
from ..test_cli_server import Server

pytestmark = pytest.mark.slow


class Impostor:
    """Whatever takes a port: answers 200 with JSON shaped like a proof, and keeps every
    request (line, headers, body) it was sent."""

    def __init__(self, port: int) -> None:
        seen = self.seen = []  # type: list[str]

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode("latin-1") if length else ""
                seen.append(f"{self.requestline}\n{self.headers}\n{body}")
                data = json.dumps({"proof": "0" * 64, "pid": os.getpid()}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = base_env(tmp_path / "home")
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(), agent_id="console") as store:
        store.add("Alice prefers green tea", enrich=False)
    return env


@contextlib.contextmanager
def impostor_after_kill(env: dict[str, str]) -> Iterator[tuple[Server, Impostor, str]]:
    server = Server(env)
    record = load_record(record_path(env["AMEM_HOME"]))
    assert record is not None and record.token
    server.proc.send_signal(signal.SIGKILL)
    server.proc.communicate(timeout=30)  # closes its pipes too
    impostor = Impostor(int(server.url.split(":")[2].split("/")[0]))
    try:
        yield server, impostor, record.token
    finally:
        impostor.close()


def test_after_kill_9_the_cli_never_sends_the_secret_to_whatever_took_the_port(
        env: dict[str, str]) -> None:
    home = env["AMEM_HOME"]
    with impostor_after_kill(env) as (server, impostor, token):
        # the store is free again: the command runs here, the stale record is removed
        local = amem(env, "search", "tea", "--json")
        assert "green tea" in local.stdout
        assert not record_path(home).exists() and "no longer running" in local.stderr
        # the record written again, now naming a live pid (this test's): the impostor is asked
        # for the proof, cannot give it, and gets nothing else
        rewritten = {"transport": "http", "pid": os.getpid(), "url": server.url, "token": token}
        for args, code in ((["status", "--server", server.url], 1), (["search", "tea", "--server", server.url], 1)):
            record_path(home).write_text(json.dumps(rewritten))
            os.chmod(record_path(home), 0o600)
            refused = amem(env, *args, code=code)
            assert "did not prove" in refused.stderr and "nothing was sent" in refused.stderr
            assert not record_path(home).exists() and "removed" in refused.stderr
        # the store held (by this process) and the record pointing at the impostor: the CLI
        # would route through the server; it asks for the proof and stops there
        cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
        with MemoryStore(None, config=cfg, embedder=HashingEmbedder()):
            record_path(home).write_text(json.dumps(rewritten))
            os.chmod(record_path(home), 0o600)
            busy = amem(env, "search", "tea", code=4)
            assert "not the amem server" in busy.stderr and not record_path(home).exists()
    assert impostor.seen, "the impostor was never asked: the test proves nothing"
    for request in impostor.seen:
        assert token not in request, request
        assert request.startswith("GET /amem/proof?nonce=") and "authorization" not in request.lower()


def test_a_server_that_does_not_answer_yet_is_ignored_not_removed(env: dict[str, str]) -> None:
    """A record whose server is starting (pid alive, port not yet open) is kept."""
    home = env["AMEM_HOME"]
    record_path(home).write_text(json.dumps({"transport": "http", "pid": os.getpid(),
                                             "url": "http://127.0.0.1:9/mcp", "token": "t"}))
    os.chmod(record_path(home), 0o600)
    with contextlib.redirect_stderr(io.StringIO()) as said:
        assert find_server(home) is None
    assert "does not answer" in said.getvalue() and record_path(home).exists()


def test_sigterm_stops_the_server_like_ctrl_c(env: dict[str, str]) -> None:
    home = Path(env["AMEM_HOME"])
    server = Server(env)
    assert record_path(home).exists()
    # (a server with keys says nothing of auth in status: that line is for --insecure-no-auth)
    assert "server_auth" not in json.loads(amem(env, "status", "--json").stdout)
    server.proc.send_signal(signal.SIGTERM)
    _, err = server.proc.communicate(timeout=60)
    assert server.proc.returncode == 0, (server.proc.returncode, err)
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert not record_path(home).exists(), err
    wal = [p for p in home.rglob("*-wal") if p.stat().st_size]
    assert not wal, wal  # the conversation store was closed (its write-ahead log checkpointed)


def test_insecure_no_auth_says_so_everywhere(env: dict[str, str]) -> None:
    """The sandbox switch admits callers without a key, and the log, the record and `amem
    status` all say so; the browser checks stay on."""
    import httpx

    server = Server(env, "--insecure-no-auth")
    try:
        record = load_record(record_path(env["AMEM_HOME"]))
        assert record is not None and record.auth == "none"
        status = json.loads(amem(env, "status", "--json").stdout)  # routed through the server
        assert status["server_auth"].startswith("OFF: this server runs with --insecure-no-auth")
        root = server.url.removesuffix("/mcp")
        with httpx.Client(timeout=30) as http:
            assert http.get(root + "/lcm/assemble?budget=100").status_code == 200  # no key
            assert http.get(root + "/lcm/assemble?budget=100",
                            headers={"Host": "attacker.example"}).status_code == 421
            assert http.post(root + "/lcm/ingest", content=b'{"messages": []}',
                             headers={"Content-Type": "text/plain"}).status_code == 415
    finally:
        err = server.stop()
    assert "AUTHENTICATION IS OFF" in err


def test_a_symlinked_record_is_never_followed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"transport": "http", "pid": os.getpid(),
                                  "url": "http://127.0.0.1:9/mcp", "token": "t"}))
    os.chmod(target, 0o600)
    record_path(home).symlink_to(target)
    with contextlib.redirect_stderr(io.StringIO()) as said:
        assert find_server(home) is None
    assert "symbolic link" in said.getvalue()
    assert load_record(record_path(home)) is None and target.exists()
