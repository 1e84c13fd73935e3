"""The four packages stay fully typed: mypy --strict reports nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mypy_strict_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports",
         "--cache-dir", str(ROOT / ".mypy_cache"), "amem", "lcm", "tools", "scheduler"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]


#: a small app on the documented API, as a user would type-check it (docs/python-api.md)
_APP = '''
from __future__ import annotations
from amem import MemoryStore, Note
from lcm import LcmStore, IngestResult

def main() -> None:
    with MemoryStore(":memory:") as store:
        added = store.add("Alice prefers green tea", subjects=["alice"], enrich=False,
                          metadata={"src": "chat"}, ttl=3600, agent_id="me")
        note: Note = store.get(added.id)
        hits = store.search("what does Alice drink?", limit=5)
        print(note.content, [h.similarity for h in hits], store.add_many([{"text": "x"}], batch=8))
    with LcmStore(":memory:") as lcm:
        stored: IngestResult = lcm.ingest("agent:a1:main", [{"role": "user", "content": "hi"}])
        print(stored.stored)
'''


@pytest.mark.slow
def test_a_users_app_type_checks_and_a_misspelt_argument_does_not(tmp_path: Path) -> None:
    """``add`` took ``**options: Any``: mypy passed ``store.add("x", enrihc=False)``, which
    fails only when it runs. The documented arguments are now the signature."""
    # one mypy run over both apps (a run costs seconds): the errors must all be the misspelt one's
    (tmp_path / "app.py").write_text(_APP)
    (tmp_path / "misspelt.py").write_text(_APP.replace("enrich=False", "enrihc=False")
                                          .replace("batch=8", "bacth=8"))
    ran = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / ".cache"),
                          str(tmp_path / "app.py"), str(tmp_path / "misspelt.py")],
                         cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=600)
    errors = [line for line in ran.stdout.splitlines() if ": error:" in line]
    assert ran.returncode == 1 and errors, ran.stdout[-3000:]
    assert all(line.startswith("misspelt.py") for line in errors), ran.stdout[-3000:]
    assert '"enrihc"' in ran.stdout and '"bacth"' in ran.stdout, ran.stdout[-3000:]
