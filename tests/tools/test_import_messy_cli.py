"""``amem import`` of files as users bring them, through the installed script: a file name
that is not UTF-8, text in UTF-16 or a legacy encoding, YAML front matter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem, base_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


def stored(env: dict[str, str]) -> dict[str, list[str]]:
    """Content -> subjects of every note of the agent."""
    listed = json.loads(amem(env, "list", "-n", "50", "--json").stdout)["notes"]
    notes = [json.loads(amem(env, "get", n["id"], "--json").stdout) for n in listed]
    return {n["content"]: n["subjects"] for n in notes}


def test_a_file_name_that_is_not_utf8_is_its_title_as_a_file_manager_shows_it(
        env: dict[str, str], tmp_path: Path) -> None:
    # a name from a Windows zip or an old Latin-1 disk: Python holds its byte as a lone
    # surrogate, and the title derived from it crashed the import (UnicodeEncodeError)
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xe9sum\xe9.txt")
    Path(name).write_bytes(b"Plain paragraph about herons, no heading.\n")
    done = amem(env, "import", name, "--no-enrich")
    assert "created 1" in done.stdout
    assert stored(env) == {"Plain paragraph about herons, no heading.": ["r\ufffdsum\ufffd"]}
