"""Issue 24 through the installed console script: see a hidden fact, its history, undo it, and
``amem doctor`` / ``--fix`` on an unsound mark. Slow: seven startups of ``amem`` (1-3 s each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder

from tests.fakes.openai_server import FakeOpenAI, garbage

from .test_cli_console import AGENT, amem, amem_json, base_env

pytestmark = pytest.mark.slow

COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"


def test_see_history_undo_and_doctor_fix(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    old = amem_json(env, "add", COFFEE, "--subject", "Alice")["id"]  # type: ignore[index]
    # the human line says what the add hid and how to see and undo it
    said = amem(env, "add", TEA, "--subject", "Alice").stdout
    status, new_id = said.split()[:2]
    assert status == "created"
    assert f"; supersedes {old}: hidden from search" in said
    assert f"amem unsupersede {old}" in said and f"amem history {old}" in said
    new = {"id": new_id}
    found = amem_json(env, "search", "Alice coffee", "-n", "5")
    hits = found["results"] if isinstance(found, dict) else found  # type: ignore[index]
    assert [h["hidden"] for h in hits if h["id"] == new["id"]] == [[old]]  # type: ignore[index]
    assert old not in [h["id"] for h in hits]
    chain = amem_json(env, "history", old)["chain"]  # type: ignore[index]
    assert [n["id"] for n in chain] == [old, new["id"]]  # type: ignore[index]
    text = amem(env, "history", old).stdout
    assert f"hidden by {new['id']}" in text and "current" in text  # type: ignore[index]
    # a second newer note, deleted: the delete says which fact is current again
    mate = "Alice switched from tea to mate now"
    third = amem_json(env, "add", mate, "--subject", "Alice")
    assert third["supersedes"] == [new["id"]]  # type: ignore[index]
    # an edit whose text no longer replaces it says so too
    edited = amem(env, "update", third["id"], "--text", "Alice keeps a garden diary").stdout  # type: ignore[index]
    assert f"; current again: {new['id']} (the older notes the old text had replaced)" in edited
    again = amem_json(env, "update", third["id"], "--text", mate)  # type: ignore[index]
    assert again["supersedes"] == [new["id"]]  # type: ignore[index]
    said = amem(env, "delete", third["id"]).stdout  # type: ignore[index]
    assert said.strip() == (f"deleted {third['id']}; current again: {new['id']} "  # type: ignore[index]
                            "(the older notes it had replaced)")
    done = amem(env, "unsupersede", old).stdout
    assert "current again" in done
    amem(env, "unsupersede", old, code=2)  # not hidden any more: a clear error, exit 2
    again = amem_json(env, "search", "Alice coffee", "-n", "5")
    hits = again["results"] if isinstance(again, dict) else again  # type: ignore[index]
    assert old in [h["id"] for h in hits]
    # an unsound mark (what an interrupted write left before issue 24): doctor says, --fix heals
    with MemoryStore(config=load_config(env={"AMEM_HOME": env["AMEM_HOME"]}),
                     embedder=HashingEmbedder(), agent_id=AGENT) as store:
        store.index.update_payload(old, AGENT, {"superseded_by": "gone-note"})
    report = amem_json(env, "doctor", code=1)
    assert report["memory"]["supersession"]["hiding_a_fact"] == 1  # type: ignore[index]
    fixed = amem_json(env, "doctor", "--fix")
    assert fixed["memory"]["supersession"]["released"] == [old]  # type: ignore[index]


def test_add_prints_a_fallback_enrichment_as_a_warning(tmp_path: Path) -> None:
    """The human line says what the JSON says: an LLM that answers garbage leaves the note
    enriched by the offline rules, and ``amem add`` prints that warning under its status
    line (before, only the log on stderr said it; the line read as a plain success)."""
    server = FakeOpenAI()
    server.set_default(garbage())
    try:
        env = base_env(tmp_path / "home", AMEM_LLM_BASE_URL=server.url, AMEM_LLM_MODEL="m")
        out = amem(env, "add", "Alice prefers green tea").stdout
    finally:
        server.close()
    assert server.requests
    first, *rest = out.splitlines()
    assert first.split()[0] == "created"
    assert len(rest) == 1 and rest[0].startswith("warning: LLM enrichment failed")
    assert "used the offline rules" in rest[0]


def test_consolidate_names_its_merges_and_history_tells_a_merge(tmp_path: Path) -> None:
    # One fact told twice: the nightly merge joins them, keeps the fact where search reads it,
    # and says which note went where (it printed counts alone, and history "[deleted]")
    env = base_env(tmp_path / "home")
    first = amem_json(env, "add", "The staging server restarts every Sunday night after the backup",
                      "--no-enrich")["id"]  # type: ignore[index]
    second = amem_json(env, "add", "After the backup the staging server restarts on Sunday nights",
                       "--no-enrich")["id"]  # type: ignore[index]
    said = amem(env, "consolidate").stdout
    merged = [line.split() for line in said.splitlines() if line.startswith("merged ")]
    assert len(merged) == 1 and {merged[0][1], merged[0][3]} == {first, second}, said
    loser, survivor = merged[0][1], merged[0][3]
    assert f"`amem history {loser}`" in said
    data = amem_json(env, "consolidate")
    assert data["merged"] == []  # type: ignore[index]  # nothing left to merge
    text = amem_json(env, "get", survivor)["content"]  # type: ignore[index]
    assert "staging server restarts" in text and "Sunday night" in text  # one wording kept
    assert f"[merged into {survivor}]" in amem(env, "history", loser).stdout
