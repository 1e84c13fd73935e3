"""Every code block of README.md and of the pages it links in docs/ runs, as a newcomer would
run it, or says why it is not run.

``python`` blocks run as written, each in a fresh interpreter, in a scratch directory with a
scratch ``HOME`` (so ``~/...`` lands there) and ``AMEM_HOME``; they use the default embedder,
like a newcomer, so the model conversion happens once for the module. ``bash`` blocks made
only of ``amem`` commands (not ``amem serve``) run with ``AMEM_HOME`` there and the hashing
embedder; every other block must be listed in ``NOT_RUN`` with the reason, so a new block
cannot slip past unrun. ``json`` blocks must parse.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the README and the reference pages it links to
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
# fences may be indented (a block inside a numbered step): the code is dedented as Markdown does
BLOCK_RE = re.compile(r"(?ms)^[ ]*```(\w*)\n(.*?)^[ ]*```")

#: bash blocks not run here, by a line they contain, with the reason
NOT_RUN = {
    "bash scripts/quickstart.sh": "installs packages into a venv: minutes, and network",
    "bash scripts/test.sh": "runs the whole suite (this test is part of it)",
    "pip install /path/to/amem-checkout": "installs packages (network); "
                                          "tests/test_fresh_clone.py builds the wheel",
    "amem serve --http": "a server that runs until stopped; tests/tools/test_mcp.py serves "
                         "streamable HTTP and calls every tool",
    "python -m benchmarks.retrieval": "a benchmark of minutes; tests/benchmarks cover its parts",
    "amem lcm ingest ~/Downloads/conversations.json": "needs the user's own export; "
        "tests/tools/test_lcm_chat_export_cli.py loads ChatGPT and Claude exports built like it",
    "amem ui": "starts a server and opens a browser; tests/tools/ui/test_cli_ui.py runs the "
               "installed command and tests/tools/ui/test_browser.py drives the pages",
}


def blocks(lang: str) -> list[tuple[str, str]]:
    """``(page:line, code)`` of every block in ``lang`` of the README and the docs pages."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix()
        found += [(f"{name}:{text[:m.start()].count(chr(10)) + 1}", textwrap.dedent(m.group(2)))
                  for m in BLOCK_RE.finditer(text) if m.group(1) == lang]
    return found


def _runnable_bash(code: str) -> bool:
    commands = [ln.split("#")[0].strip() for ln in code.splitlines()]
    commands = [c for c in commands if c]
    return bool(commands) and all(c.startswith("amem ") and not c.startswith("amem serve")
                                  for c in commands)


def _skip_reason(code: str) -> str | None:
    return next((why for key, why in NOT_RUN.items() if key in code), None)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


def _env(scratch: Path, **extra: str) -> dict[str, str]:
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(home), "AMEM_HOME": str(home / "amem"), "PYTHONPATH": str(ROOT),
           "AMEM_LOG_LEVEL": "WARNING"}
    return {**env, **extra}


def test_the_readme_has_runnable_blocks() -> None:
    assert len(blocks("python")) >= 3 and blocks("bash")


def test_every_block_names_its_language() -> None:
    """A fence without a language would be neither run nor parsed here: every block says."""
    untagged = [(page.name, text[:m.start()].count("\n") + 1) for page in PAGES
                for text in [page.read_text(encoding="utf-8")]
                for m in BLOCK_RE.finditer(text) if not m.group(1)]
    assert not untagged, f"code blocks without a language: {untagged}"


@pytest.mark.slow
@pytest.mark.parametrize("line,code", blocks("python"), ids=lambda x: x if "\n" not in x else "")
def test_python_block_runs(line: str, code: str, scratch: Path) -> None:
    work = scratch / f"block-{line.replace('/', '-').replace(':', '-')}"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=_env(scratch),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{line} failed:\n{proc.stderr[-3000:]}"
    # "~/..." is the home directory, never a folder named "~" where the snippet ran.
    assert not (work / "~").exists(), f"{line} created a literal ./~ directory"


@pytest.mark.parametrize("line,code", blocks("bash"), ids=lambda x: x if "\n" not in x else "")
def test_bash_block_runs_or_says_why_not(line: str, code: str, scratch: Path) -> None:
    if _runnable_bash(code) and _skip_reason(code):
        return  # `amem` commands on the user's own files (an export they downloaded): said in NOT_RUN
    if not _runnable_bash(code):
        reason = _skip_reason(code)
        assert reason, (f"{line}: a bash block that is neither only `amem` "
                        f"commands nor listed in NOT_RUN with its reason:\n{code}")
        return
    env = _env(scratch, AMEM_EMBEDDER="hashing")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=scratch, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{line} failed:\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("line,code", blocks("json"), ids=lambda x: x if "\n" not in x else "")
def test_json_block_parses(line: str, code: str) -> None:
    doc = json.loads(code)
    for server in doc.get("mcpServers", {}).values():  # a host config names a real command
        assert "url" in server or Path(server["command"]).name == "amem"


@pytest.mark.slow
def test_the_lcm_snippet_run_twice_stores_its_message_once(tmp_path: Path) -> None:
    """A newcomer runs the conversation-memory example again: it must not double the history
    (it did before the snippet named its message's id)."""
    (code,) = [c for line, c in blocks("python")
               if line.startswith("docs/conversation-memory.md") and "lcm.ingest(" in c]
    env = _env(tmp_path)
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    count = subprocess.run(
        [sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
         ".execute('SELECT count(*) FROM messages').fetchone()[0])",
         str(tmp_path / "home" / ".local" / "share" / "amem" / "lcm.db")],
        capture_output=True, text=True, timeout=60)
    assert count.stdout.strip() == "1", (count.stdout, count.stderr)
