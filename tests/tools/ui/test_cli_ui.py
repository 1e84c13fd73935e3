"""``amem ui``: the installed command prints a one-time login link that opens one session;
with ``amem serve --http`` already holding the store, the link is that server's."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder

from ..http_server import free_port
from ..test_cli_console import AMEM, ROOT, base_env
from ..test_cli_server import Server

pytestmark = pytest.mark.slow  # real server processes

NOTE = "Alice keeps her bicycle in the blue shed"


def _env(home: Path) -> dict[str, str]:
    env = base_env(home)
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(), agent_id=env["AMEM_AGENT"]) as store:
        store.add(NOTE, enrich=False)
    return env


def _link(proc: subprocess.Popen[str], deadline: float = 60) -> str:
    assert proc.stdout is not None
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if line.startswith("amem inspector: "):
            return line.split(": ", 1)[1].strip()
        assert proc.poll() is None, proc.communicate()
    raise AssertionError("amem ui printed no link")


def _logs_in(link: str) -> None:
    with httpx.Client(trust_env=False, timeout=30, follow_redirects=False) as http:
        res = http.get(link)
        where = res.headers["location"]
        assert res.status_code == 303 and where.startswith("/ui/s/") and where.endswith("/notes"), res.text
        page = http.get(link.split("/ui/")[0] + where)  # the session's own path: its cookie's
        assert page.status_code == 200 and NOTE in page.text
        http.cookies.clear()
        assert http.get(link).status_code == 401  # one session only


def test_amem_ui_serves_and_prints_a_one_time_link(tmp_path: Path) -> None:
    env = _env(tmp_path)
    port = free_port()
    proc = subprocess.Popen([str(AMEM), "ui", "--no-open", "--port", str(port)], env=env, cwd=ROOT,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        link = _link(proc)
        assert link.startswith(f"http://127.0.0.1:{port}/ui/login?t=")
        _logs_in(link)
    finally:
        proc.send_signal(signal.SIGTERM)  # a clean stop: exit 0
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err


def test_amem_ui_asks_the_running_server(tmp_path: Path) -> None:
    env = _env(tmp_path)
    server = Server(env)
    try:
        done = subprocess.run([str(AMEM), "ui", "--no-open"], env=env, cwd=ROOT, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        link = done.stdout.split("amem inspector: ", 1)[1].split()[0]
        assert link.startswith(server.url.removesuffix("/mcp") + "/ui/login?t=")
        _logs_in(link)
    finally:
        server.stop()
