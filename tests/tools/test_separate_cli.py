"""``amem separate`` through the installed console script, on its own and through a running
``amem serve --http`` (routed as ``amem unsupersede`` is): ``amem history`` shows the id to
pass, the separation prints both notes, and each refusal has its exit code. Slow: a dozen
startups of ``amem`` and one server."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli_console import amem, amem_json, base_env
from .test_cli_server import Server

pytestmark = pytest.mark.slow

#: the hashing embedder folds the longer telling into the first (0.87 >= fold_threshold)
BIKE = "Alice keeps a green bicycle in the garage at home."
MORE = f"{BIKE} It has a wicker basket."


def _fold(env: dict[str, str], first: str, second: str) -> tuple[str, str]:
    """Two adds, the second folded: (the note, the part id ``amem history`` prints)."""
    note = amem_json(env, "add", first)["id"]  # type: ignore[index]
    assert amem_json(env, "add", second)["status"] == "folded"  # type: ignore[index]
    shown = amem(env, "history", note).stdout
    part = shown.split("[part ")[1].split("]")[0]
    assert f"amem separate {note} {part}" in shown  # the history says how to undo it
    return note, part


def test_separate_through_the_console_script(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    note, part = _fold(env, BIKE, MORE)
    said = amem(env, "separate", note, part).stdout
    assert said.startswith(f"separated: {part} is its own note again (it was folded into {note})")
    assert f"{note} has its text from before" in said
    # linked as an add links a new note: here to the note it left, which tells the same
    assert f"\n{part} links {note}" in said
    assert amem_json(env, "get", note)["content"] == BIKE  # type: ignore[index]
    assert amem_json(env, "get", part)["content"] == MORE  # type: ignore[index]
    assert f"separated {part}: its own note again" in amem(env, "history", note).stdout
    assert f"separated from note {note}" in amem(env, "history", part).stdout
    # the refusals: separated already (2), a part never received (2), no such note (3),
    # another agent's note (3, worded as a missing note)
    assert "already" in amem(env, "separate", note, part, code=2).stderr
    assert "received no fold or merge" in amem(env, "separate", note, "nope", code=2).stderr
    amem(env, "separate", "no-such-note", part, code=3)
    other = amem(env, "separate", note, part, "--agent", "someone-else", code=3).stderr
    assert "for agent 'someone-else'" in other
    told = amem_json(env, "add", MORE)  # the same text again goes to its own note
    assert (told["status"], told["id"]) == ("deduplicated", part)  # type: ignore[index]


def test_separate_through_a_running_server(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home", AMEM_HEAT="false")
    server = Server(env)
    try:
        note, part = _fold(env, BIKE, MORE)
        done = amem_json(env, "separate", note, part)
        assert done["note"] == part and done["text_restored"] is True  # type: ignore[index]
        assert amem_json(env, "get", note)["content"] == BIKE  # type: ignore[index]
        assert "already" in amem(env, "separate", note, part, code=2).stderr
        amem(env, "separate", note, part, "--agent", "someone-else", code=3)
    finally:
        server.stop()
