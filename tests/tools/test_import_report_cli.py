"""``amem import`` through the installed script: the report's warnings on stderr (and in
--json) with their lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem, base_env

TEXT = "Prefers window seats on flights."


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


def test_a_duplicate_lines_dropped_subject_is_warned_with_its_line(env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text(json.dumps({"text": TEXT, "subjects": ["alice"]}) + "\n"
                   + json.dumps({"text": TEXT, "subjects": ["alice", "bob"]}) + "\n",
                   encoding="utf-8")
    done = amem(env, "import", str(src), "--no-enrich")
    assert "created 1, deduplicated 1" in done.stdout
    (warning,) = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warning.startswith(f"amem: warning: {src}:2: ") and "not added: bob" in warning
    report = json.loads(amem(env, "import", str(src), "--no-enrich", "--json").stdout)
    assert [w.split(": ")[0] for w in report["warnings"]] == [f"{src}:2"]
    assert "not added: bob" in report["warnings"][0]
