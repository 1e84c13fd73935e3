"""LCM_DATABASE_PATH=postgresql://...: the installed ``amem`` CLI keeps conversation history on a PostgreSQL server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[3]
KEY = "agent:host:main"


def _amem(env: dict[str, str], *args: str, code: int = 0) -> Any:
    done = subprocess.run([str(AMEM), *args, "--json"], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == code, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout) if code == 0 else done


def test_two_hosts_share_history_through_a_postgres_url(pg_clean_url: str, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"role": r, "content": f"invoice {i} is paid ({r})"}) + "\n"
                           for i, r in enumerate(["user", "assistant"] * 3)), encoding="utf-8")  # fmt: skip
    # two "hosts": separate homes (separate local SQLite files), one server
    host_a = {**base, "AMEM_HOME": str(tmp_path / "a"), "AMEM_EMBEDDER": "hashing", "LCM_DATABASE_PATH": pg_clean_url}
    host_b = {**host_a, "AMEM_HOME": str(tmp_path / "b")}
    assert _amem(host_a, "lcm", "ingest", str(src), "--session-key", KEY)["stored"] == 6
    hits = _amem(host_b, "lcm", "grep", "invoice 4", "--mode", "full_text", "--session-key", KEY)["hits"]
    assert [h["id"] for h in hits] == ["msg_5"]
    assert not (tmp_path / "b" / "lcm.db").exists() and not (ROOT / "postgresql:").exists()
    # an operation not ported yet says so by name, with its code, instead of answering wrongly
    status = _amem(host_b, "lcm", "status")
    assert status["messages"] == 6 and status["path"].startswith("postgresql://") and status["size_bytes"] > 0
    assert _amem(host_b, "lcm", "doctor")["ok"] is True
    # semantic recall works on the server too: one host embeds, the other searches by meaning
    assert _amem(host_a, "lcm", "embed")["embedded_messages"] == 6
    assert _amem(host_b, "lcm", "status")["embedding"]["debt"] == 0
    near = _amem(host_b, "lcm", "grep", "invoice 4 is paid (user)", "--mode", "semantic", "--session-key", KEY)
    assert near["hits"][0]["id"] == "msg_5" and near["not_embedded"] == 0


def test_amem_lcm_migrate_copies_the_local_store_to_the_server(pg_clean_url: str, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    local = {**base, "AMEM_HOME": str(tmp_path / "a"), "AMEM_EMBEDDER": "hashing"}
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps({"role": "user", "content": f"receipt {i} filed"}) + "\n" for i in range(4)),
                   encoding="utf-8")  # fmt: skip
    assert _amem(local, "lcm", "ingest", str(src), "--session-key", KEY)["stored"] == 4
    bad = _amem(local, "lcm", "migrate", "--to", "/tmp/not-a-server.db", code=2)
    assert "invalid_argument" in bad.stdout + bad.stderr and "postgresql://" in bad.stdout + bad.stderr
    report = _amem(local, "lcm", "migrate", "--to", pg_clean_url)
    assert report["rows"]["messages"] == 4 and report["rows"]["conversations"] == 1
    # verified before it committed: every reference resolves, nothing carried from a damaged source
    assert set(report["verified"].values()) == {0} and report["carried_from_source"] == {}
    remote = {**local, "AMEM_HOME": str(tmp_path / "b"), "LCM_DATABASE_PATH": pg_clean_url}
    hits = _amem(remote, "lcm", "grep", "receipt 2", "--session-key", KEY)["hits"]
    assert [h["id"] for h in hits] == ["msg_3"]
    again = _amem(local, "lcm", "migrate", "--to", pg_clean_url, code=2)  # never merged into a used database
    assert "already holds conversations" in again.stdout + again.stderr


def _host_with_one_message(pg_url: str, tmp_path: Path) -> dict[str, str]:
    """A host (home ``a``) whose AMEM_LCM_URL names the server, with one message ingested."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"role": "user", "content": "the ledger closes on Friday"}) + "\n",
                   encoding="utf-8")
    host = {**base, "AMEM_HOME": str(tmp_path / "a"), "AMEM_EMBEDDER": "hashing", "AMEM_LCM_URL": pg_url}
    assert _amem(host, "lcm", "ingest", str(src), "--session-key", KEY)["stored"] == 1
    return host


def test_amem_lcm_url_names_the_shared_history(pg_clean_url: str, tmp_path: Path) -> None:
    host_a = _host_with_one_message(pg_clean_url, tmp_path)
    assert not (tmp_path / "a" / "lcm.db").exists()  # nothing local: the server holds it
    # lossless-claw's variable naming the same server agrees; naming another store is refused
    host_b = {**host_a, "AMEM_HOME": str(tmp_path / "b"), "LCM_DATABASE_PATH": pg_clean_url}
    assert _amem(host_b, "lcm", "status")["messages"] == 1
    clash = _amem({**host_b, "LCM_DATABASE_PATH": str(tmp_path / "other.db")}, "lcm", "status", code=2)
    assert "AMEM_LCM_URL" in clash.stderr and "config_error" in clash.stdout


def test_a_host_on_a_server_keeps_its_event_log_in_its_home(pg_clean_url: str, tmp_path: Path) -> None:
    """A server has no data directory for the event log, so a host on PostgreSQL kept none and
    its ingests, compactions and repairs left no record; the host's home holds it now."""
    host = _host_with_one_message(pg_clean_url, tmp_path)
    log = tmp_path / "a" / "lcm-log.jsonl"
    assert _amem(host, "lcm", "status")["event_log"] == str(log)
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in events if e.get("event") == "ingest"] == ["ingest"], events
    off = {**host, "AMEM_HOME": str(tmp_path / "b"), "LCM_LOG_FILE_ENABLED": "false"}
    assert _amem(off, "lcm", "status")["event_log"] is None  # turned off stays off
