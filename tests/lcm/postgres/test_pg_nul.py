"""NUL characters (U+0000), which SQLite keeps and PostgreSQL text cannot hold: refused by line and by message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LcmValidationError
from lcm.pg.copy import copy_sqlite_to_postgres
from lcm.pg.db import PgDatabase

from ..conftest import chat

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[3]
KEY = "agent:a1:nul"


def test_ingest_names_the_line_of_a_nul_and_never_says_both_nothing_and_kept(pg_clean_url: str, tmp_path: Path) -> None:
    lines = [{"role": "user", "content": f"line {i}" + ("\x00" if i == 1100 else "")} for i in range(1, 1201)]
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(tmp_path / "h"), "AMEM_EMBEDDER": "hashing", "AMEM_LCM_URL": pg_clean_url,
                "PYTHONPATH": str(ROOT)})  # fmt: skip
    done = subprocess.run([str(AMEM), "lcm", "ingest", str(src), "--session-key", KEY], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "line 1100" in done.stderr and "messages[" not in done.stderr, done.stderr
    assert "nothing was stored" not in done.stderr.lower() and "1000 messages before it are kept" in done.stderr
    assert "fix that line" in done.stderr


def test_migrate_refuses_a_nul_up_front_naming_the_message_then_replaces_it_when_asked(
        pg_clean_url: str, tmp_path: Path, clock: ManualClock) -> None:  # fmt: skip
    with LcmStore(str(tmp_path / "lcm.db"), LcmConfig(log_file_enabled=False), clock=clock) as local:
        local.ingest(KEY, [*chat(2), {"role": "user", "content": "has\x00nul byte"}, *chat(2, start=2)])
        destination = PgDatabase(pg_clean_url)
        try:
            with pytest.raises(LcmValidationError) as err:
                copy_sqlite_to_postgres(local.db, destination)
            assert err.value.field == "source"
            said = str(err.value)
            assert "msg_3 (conversation 1, session 'agent:a1:nul', position 3" in said and "--replace-nul" in said
            assert destination.scalar("SELECT count(*) FROM messages") == 0  # nothing copied
            report = copy_sqlite_to_postgres(local.db, destination, replace_nul=True)
            assert report.rows["messages"] == 5 and report.nul_replaced[0].startswith("msg_3 ")
            assert destination.scalar("SELECT content FROM messages WHERE id = 3") == "has\ufffdnul byte"
        finally:
            destination.close()
