"""amem import's plain-text summary says what the import did to older facts (not only --json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AMEM = Path(sys.executable).with_name("amem")


def test_import_summary_names_superseded_facts(tmp_path: Path) -> None:
    src = tmp_path / "facts.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in (
        "Alice drinks coffee every morning",
        "Alice stopped drinking coffee and now drinks tea")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update(AMEM_HOME=str(tmp_path / "home"), AMEM_EMBEDDER="hashing")
    done = subprocess.run([str(AMEM), "import", str(src), "-q"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "superseded 1 older notes (judged: offline)" in done.stdout, done.stdout
