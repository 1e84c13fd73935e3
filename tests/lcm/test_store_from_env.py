"""``LcmStore()`` with neither a path nor a config opens the store ``amem lcm ...`` opens, read
from the environment as the CLI reads it (``MemoryStore()`` did; ``LcmStore()`` read nothing
and refused: "LcmStore needs a path"), and an explicit ``config=`` reads no environment. In a
child process: the environment is the input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = """
import json
from lcm import LcmConfig, LcmStore
with LcmStore() as store:
    store.ingest("agent:s:main", [{"role": "user", "content": "written by a script: 4711"}])
    said = {"path": store.db.path, "fresh_tail": store.config.fresh_tail_count}
try:  # an explicit config reads no environment: no path, no home
    LcmStore(config=LcmConfig())
except ValueError as exc:
    said["explicit"] = str(exc)
print(json.dumps(said))
"""


def test_no_argument_store_opens_what_the_cli_opens(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "amem.toml").write_text('embedder = "hashing"\n[lcm]\nfreshTailCount = 7\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(tmp_path / "home"), "AMEM_CONFIG": str(tmp_path / "amem.toml"),
                "LCM_LOG_FILE_ENABLED": "false", "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.splitlines()[-1])
    assert Path(said["path"]) == tmp_path / "home" / "lcm.db"
    assert said["fresh_tail"] == 7  # the file's [lcm] table, as the CLI reads it
    assert "needs a path" in said["explicit"]
    assert main(["lcm", "grep", "4711", "--all", "--json"], env=env) == 0
    assert "written by a script" in capsys.readouterr().out  # the CLI sees the script's turn
    # AMEM_LCM_URL names the store for both
    env["AMEM_LCM_URL"] = str(tmp_path / "elsewhere.db")
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(json.loads(done.stdout.splitlines()[-1])["path"]) == tmp_path / "elsewhere.db"


@pytest.mark.parametrize("file_home, env_home", [(None, None), ("~/notes-home", None),
                                                 ("/srv/file-home", "/srv/env-home"),
                                                 (None, "/srv/env-home")])
@pytest.mark.parametrize("in_table", [False, True])
def test_the_conversation_store_finds_the_home_the_note_store_reads(
        tmp_path: Path, file_home: str | None, env_home: str | None, in_table: bool) -> None:
    # lcm may use amem's kernel only: its home rule (amem.kernel.home) must be load_config's
    import tomllib

    from amem.config import load_config
    from amem.kernel.home import configured_home

    line = f'home = "{file_home}"\n' if file_home else ""
    text = ("[amem]\n" + line if in_table else line) + "[lcm]\nfreshTailCount = 7\n"
    (tmp_path / "amem.toml").write_text(text)
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), **({"AMEM_HOME": env_home} if env_home else {})}
    doc = tomllib.loads(text)
    assert configured_home(doc, env) == load_config(tmp_path / "amem.toml", env=env).home
