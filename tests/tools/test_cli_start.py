"""An everyday ``amem`` command loads only what it uses: each command is a new process, and
the conversation store, the nightly scheduler's APScheduler and the LLM client's httpx were
~230 ms of every start (importing ``lcm.config`` ran ``lcm/__init__``, which loaded the whole
store; the settings' ``scheduler.config`` loaded APScheduler; an offline store imported the
client to learn that no endpoint was set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_UNUSED = ("lcm.store", "lcm.pg.store", "psycopg", "apscheduler", "httpx")

_RUN_COMMANDS = """
import json, sys
from tools.cli.main import main
codes = []
for argv in {commands!r}:
    try:
        codes.append(main(argv))
    except SystemExit as exc:
        codes.append(exc.code)
print(json.dumps({{"codes": codes, "loaded": sorted(
    m for m in sys.modules if any(m == u or m.startswith(u + ".") for u in {unused!r}))}}))
"""


def _run(home: Path, commands: list[list[str]],
         unused: tuple[str, ...] = _UNUSED) -> dict[str, object]:
    code = _RUN_COMMANDS.format(commands=commands, unused=unused)
    env = {**os.environ, "AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing"}
    env.pop("AMEM_LLM_BASE_URL", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_note_commands_load_no_conversation_store_scheduler_or_llm_client(tmp_path: Path) -> None:
    report = _run(tmp_path / "home", [["add", "The staging database moved to eu-west-2"],
                                      ["search", "where is the staging database"],
                                      ["get", "no-such-note"]])
    assert report["codes"] == [0, 0, 3]  # 3: no such note
    assert report["loaded"] == []


#: what only a write, a maintenance job or a drawn bar needs: a command that reads built the
#: whole write path, tqdm (its version read from the installed metadata) and http.client (a
#: server is called only when its record is there)
_WRITING = ("amem.write", "amem.supersede", "amem.enrich", "amem.consolidate", "amem.separate",
            "amem.purge", "tqdm", "http.client")


def test_a_reading_command_builds_no_write_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wrote = _run(home, [["add", "The staging database moved to eu-west-2"]], _WRITING)
    assert wrote["codes"] == [0] and "amem.write" in wrote["loaded"]  # the probe sees them
    report = _run(home, [["list"], ["search", "where is the staging database"],
                         ["get", "no-such-note"]], _WRITING)
    assert report["codes"] == [0, 0, 3]
    assert report["loaded"] == []


def test_a_conversation_command_still_loads_its_store(tmp_path: Path) -> None:
    # the other side of the same test: the probe sees a module a command does use
    report = _run(tmp_path / "home", [["lcm", "status"]])
    assert report["codes"] == [0]
    assert "lcm.store" in report["loaded"] and "lcm.pg.store" not in report["loaded"]


@pytest.mark.parametrize("package", ["lcm", "scheduler", "amem.llm"])
def test_every_public_name_of_a_lazy_package_resolves(package: str) -> None:
    probe = (f"import importlib; m = importlib.import_module({package!r})\n"
             "missing = [n for n in m.__all__ if getattr(m, n, None) is None]\n"
             "assert not missing, missing\n"
             "assert set(m.__all__) <= set(dir(m))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_a_postgresql_url_loads_its_engine_however_the_store_class_was_imported() -> None:
    # lcm/__init__ no longer loads the engine: LcmStore("postgresql://...") must, or the URL
    # would be refused as "no lcm engine serves postgresql:// URLs"
    probe = ("from lcm.store import LcmStore\n"
             "assert 'postgresql' not in LcmStore._engines\n"
             "try:\n"
             "    LcmStore('postgresql://nobody@127.0.0.1:9/none?connect_timeout=1')\n"
             "except Exception as exc:\n"
             "    print(type(exc).__module__, type(exc).__name__, exc)\n"
             "import sys; print('lcm.pg.store' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no lcm engine" not in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "True"
