"""``amem history`` says what each ``amem update`` changed and what it was.

The update keeps the old text, subjects or tags in the note's ``evolution_history`` (an
``update`` event), and ``amem update --help``'s page says ``amem history ID`` shows each change
(how a tag a re-import added is taken back); the readable history printed only the chain's
lines, so a retag or an edit left no trace outside ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.cli import main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing",
            "AMEM_AGENT": "history-agent"}


def run(capsys: pytest.CaptureFixture[str], env: dict[str, str], *argv: str) -> str:
    code = main(list(argv), env=env)
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_history_names_each_update_and_what_it_replaced(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    added = json.loads(run(capsys, env, "add", "Alice drinks espresso every morning",
                           "--subject", "alice", "--no-enrich", "--json"))
    note = added["id"]
    run(capsys, env, "update", note, "--tag", "Morning", "--tag", "#coffee")
    run(capsys, env, "update", note, "--text", "Alice drinks green tea every morning",
        "--subject", "Alice Smith")
    run(capsys, env, "update", note, "--no-tags")
    shown = run(capsys, env, "history", note).splitlines()
    assert shown[0].startswith("* ") and "Alice drinks green tea every morning" in shown[0]
    changes = [line.strip() for line in shown[1:]]
    days = [e["at"][:10] for e in json.loads(run(capsys, env, "history", note, "--json"))
            ["chain"][0]["events"]]  # the day of each update, as recorded
    assert len(days) == 3 and changes == [
        f"\u21b3 {days[0]} updated: tags were none",
        f"\u21b3 {days[1]} updated: text was \"Alice drinks espresso every morning\"; "
        "subjects were alice",
        f"\u21b3 {days[2]} updated: tags were Morning, #coffee",
    ]
    unchanged = run(capsys, env, "update", note, "--no-tags")  # nothing to change: no event
    assert unchanged.startswith("unchanged") and run(capsys, env, "history", note).splitlines() == shown
