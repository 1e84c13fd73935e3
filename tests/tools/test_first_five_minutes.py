"""The README's "First five minutes" host entry works as written, through the official MCP client.

The test reads the ``mcpServers`` entry from the README section itself (so a change to the
README is what gets tested), puts this install's paths where the README says "absolute path",
and starts it over stdio exactly as a host does: the SDK's default environment plus the
entry's ``env``. Then it makes the two calls the README promises (remember, then recall) with
the default embedder, as a newcomer's host would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "/absolute/path/to/amem-checkout"


def _readme_entry() -> dict[str, Any]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## First five minutes")
    section = text[start:text.index("\n## ", start + 1)]
    match = re.search(r"(?ms)^[ ]*```json\n(.*?)^[ ]*```", section)
    assert match, "the First five minutes section lost its host entry"
    entry: dict[str, Any] = json.loads(textwrap.dedent(match.group(1)))["mcpServers"]["amem"]
    return entry


def _quickstart_agent() -> str:
    """The agent scripts/quickstart.sh imports the examples as (its AMEM_AGENT default)."""
    script = (ROOT / "scripts" / "quickstart.sh").read_text(encoding="utf-8")
    match = re.search(r'AMEM_AGENT="\$\{AMEM_AGENT:-([^}]+)\}"', script)
    assert match, "scripts/quickstart.sh no longer names the agent it imports as"
    return match.group(1)


def _localise(value: str, bin_dir: Path, home: Path) -> str:
    # The README's placeholder checkout becomes this install: its venv's scripts and a
    # scratch data directory (the README's store path would be the checkout's ./.amem).
    return (value.replace(f"{PLACEHOLDER}/.venv/bin", str(bin_dir))
                 .replace(f"{PLACEHOLDER}/.amem", str(home)))


def _host_params(home: Path, cwd: Path) -> StdioServerParameters:
    """The README's entry as a host starts it, with its store at ``home``."""
    entry = _readme_entry()
    bin_dir = Path(sys.executable).parent
    command = _localise(entry["command"], bin_dir, home)
    env = {key: _localise(val, bin_dir, home) for key, val in entry.get("env", {}).items()}
    assert Path(command).exists(), f"the README's command resolves to nothing here: {command}"
    return StdioServerParameters(command=command, args=list(entry["args"]), env=env,
                                 cwd=str(cwd))


@pytest.mark.slow
def test_the_host_entry_sees_what_the_quickstart_imported(tmp_path: Path) -> None:
    """One agent from quickstart to host: the entry's agent lists the imported examples (it
    listed none when the quickstart wrote as ``default`` and the entry served ``me``)."""
    home = tmp_path / "amem-home"
    notes = ROOT / "examples" / "notes.jsonl"
    imported = subprocess.run(
        [str(Path(sys.executable).parent / "amem"), "import", str(notes), "-q"],
        env={**os.environ, "AMEM_HOME": str(home), "AMEM_AGENT": _quickstart_agent()},
        capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    examples = len([line for line in notes.read_text(encoding="utf-8").splitlines() if line.strip()])

    async def host() -> dict[str, Any]:
        from mcp.client.stdio import stdio_client

        with open(tmp_path / "server-stderr.log", "w") as errlog:
            async with Client(stdio_client(_host_params(home, tmp_path), errlog=errlog)) as client:
                listed = await client.call_tool("memory_list", {"limit": 100})
                assert not listed.is_error, listed.content
                return listed.structured_content or {}

    listed = anyio.run(host)
    assert listed["count"] == examples, (listed.get("count"), examples)


@pytest.mark.slow
def test_readme_host_entry_remembers_and_recalls(tmp_path: Path) -> None:
    home = tmp_path / "amem-home"
    params = _host_params(home, tmp_path)

    async def host() -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        with open(tmp_path / "server-stderr.log", "w") as errlog:
            from mcp.client.stdio import stdio_client

            async with Client(stdio_client(params, errlog=errlog)) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                added = await client.call_tool(
                    "memory_add", {"text": "The user prefers green tea over coffee"})
                found = await client.call_tool("memory_search", {"query": "what do I drink?"})
                assert not added.is_error and not found.is_error, (added.content, found.content)
                return names, added.structured_content or {}, found.structured_content or {}

    names, added, found = anyio.run(host)
    assert {"memory_add", "memory_search"} <= set(names)
    assert added["status"] == "created"
    assert found["results"] and found["results"][0]["id"] == added["id"], found
    # The entry's AMEM_HOME is where the note went (not the host's working directory).
    assert (home / "store").is_dir()
    log = (tmp_path / "server-stderr.log").read_text(encoding="utf-8")
    assert log.strip(), "the server said nothing on stderr (the host's MCP log view)"
