"""Bulk writes (``add_many``, imports): supersession judged per batch, expired ids reusable."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore
from amem.write.bulk import LLM_CHECKS_PER_BATCH
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder
from amem.embed.hashing import HashingEmbedder
from amem.importer import import_file
from amem.llm import LLMClient, LLMConfig
from tests.fakes import fake_openai  # noqa: F401  (a pytest fixture, used by name)
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, json_reply

from .conftest import make_store

ROOT = Path(__file__).resolve().parents[3]
AMEM = ROOT / ".venv" / "bin" / "amem"
COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_batch_judges_supersession_as_an_add_does(store: MemoryStore) -> None:
    before = store.add("Alice lives in Paris", ["Alice"], timestamp="2026-01-01").id
    results = store.add_many([
        {"text": TEA, "subjects": ["Alice"], "timestamp": "2026-01-05"},
        {"text": "Alice moved to Lyon last month", "subjects": ["Alice"],
         "timestamp": "2026-01-06"},
        {"text": COFFEE, "subjects": ["Alice"], "timestamp": "2026-01-01"},  # older, later line
        {"text": "Bob likes chess", "subjects": ["Bob"]}])
    tea, lyon, coffee, _ = (r.id for r in results)
    assert results[0].supersedes == [coffee]  # judged oldest first: the line order is no matter
    assert results[1].supersedes == [before]
    assert store.get(coffee).superseded_by == tea and store.get(before).superseded_by == lyon
    assert store.get(tea).superseded_by is None and results[3].supersedes == []
    assert [r.id for r in store.search("what does Alice drink", limit=5)].count(coffee) == 0


def test_the_import_report_says_who_judged_or_that_it_was_deferred(
        edge_store: MemoryStore, tmp_path: Path) -> None:
    rows = [{"text": COFFEE, "subjects": ["Alice"], "timestamp": "2026-01-01"},
            {"text": TEA, "subjects": ["Alice"], "timestamp": "2026-01-05"}]
    done = import_file(edge_store, _jsonl(tmp_path / "a.jsonl", rows))
    assert (done.superseded, done.supersede, done.supersede_deferred) == (1, "offline", 0)
    assert done.to_dict()["supersede"] == "offline"
    off = import_file(edge_store, _jsonl(tmp_path / "b.jsonl", [
        {"text": "Bob drinks coffee", "subjects": ["Bob"], "timestamp": "2026-01-01"},
        {"text": "Bob stopped coffee, he drinks tea now", "subjects": ["Bob"],
         "timestamp": "2026-01-05"}]), supersede=False)
    assert (off.superseded, off.supersede) == (0, "deferred to nightly")
    fast = import_file(edge_store, _jsonl(tmp_path / "c.jsonl", [
        {"text": "Carol stopped coffee, she drinks tea now", "subjects": ["Carol"]}]),
        enrich=False)
    assert fast.supersede == "deferred to nightly"  # the fast path skips it, as add does
    assert edge_store.consolidate().to_dict()["superseded"] == 1  # the night finds Bob's


def test_a_batch_with_the_default_embedder(tmp_path: Path) -> None:
    with MemoryStore(":memory:", embedder=make_embedder("e5-small"),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        results = store.add_many([
            {"text": "The user drinks coffee every morning", "timestamp": "2026-01-01"},
            {"text": "The office plant needs water on Mondays", "timestamp": "2026-01-02"},
            {"text": "The user stopped coffee and drinks tea instead",
             "timestamp": "2026-01-08"}])
        assert results[2].supersedes == [results[0].id] and results[1].supersedes == []
        found = store.search("what does the user drink?", limit=2, expand_links=False)
        assert found[0].id == results[2].id and results[0].id not in [r.id for r in found]


def _routed(asked: list[str]) -> Any:
    """A fake endpoint answering each kind of call the store makes (by its schema's name);
    the supersede judge says no to every candidate."""

    def handle(request: Request) -> Reply:
        name = request.body.get("response_format", {}).get("json_schema", {}).get("name", "")
        asked.append(name)
        if name == "supersede_verdicts":
            return json_reply({"verdicts": []})
        if name == "note_enrichment":
            return json_reply({"keywords": ["Alice"], "tags": ["alice"], "context": "A change.",
                               "category": "Personal", "note_type": "memory",
                               "topics": ["life"]})
        if name == "link_decisions":
            return json_reply({"links": [{"candidate": n, "link": False} for n in range(1, 7)]})
        return json_reply({"updates": []})

    return handle


WORDS = ("tea cocoa kefir matcha oolong rooibos chai mate kombucha lassi horchata "
         "ayran kvass sake cider mead perry tepache boza sbiten salep").split()


def test_an_llm_judge_is_asked_a_bounded_number_of_times_per_batch(
        embedder: HashingEmbedder, clock: ManualClock, fake_openai: FakeOpenAI) -> None:
    asked: list[str] = []
    fake_openai.set_default(_routed(asked))
    client = LLMClient(LLMConfig(base_url=fake_openai.url, model="judge", max_retries=0,
                                 connect_timeout=1.0, read_timeout=2.0, deadline=2.0))
    with client, MemoryStore(":memory:", embedder=embedder, clock=clock, llm=client) as store:
        store.add("Alice drinks coffee", ["Alice"], timestamp="2026-01-01")
        asked.clear()
        items = [{"text": f"Alice switched to {w} {i} times a day from a {w} shop",
                  "subjects": ["Alice"], "timestamp": "2026-01-05"}  # each has candidates
                 for i, w in enumerate(WORDS)]
        results = store.add_many(items, batch=len(items))  # one batch
    assert all(r.status in ("created", "pending_merge") for r in results)
    assert asked.count("supersede_verdicts") == LLM_CHECKS_PER_BATCH
    deferred = [r for r in results if any("deferred to the nightly" in w for w in r.warnings)]
    assert len(deferred) == len(WORDS) - LLM_CHECKS_PER_BATCH


# ---------------------------------------------------------------- expired ids


def test_an_expired_note_does_not_block_its_id(embedder: HashingEmbedder,
                                               clock: ManualClock) -> None:
    with make_store("edge", embedder, clock, link_min_cosine=-1.0) as store:
        store.add("Parking spot B7 at the airport", id="park", ttl=60, enrich=False)
        store.add("Flight to Lisbon from the airport", id="flight", enrich=False)
        store.index.update_payload("flight", store.agent_id, {"links": ["park"]})
        clock.advance(seconds=60)
        again = store.add_many([{"id": "park", "text": "Parking spot C3 at the airport"}],
                               enrich=False)
        assert again[0].status == "created" and again[0].id == "park"
        assert any("expired at 2026-01-10T12:01:00+00:00" in w for w in again[0].warnings)
        note = store.get("park")
        assert note.content == "Parking spot C3 at the airport" and note.expires_at == ""
        stored, _ = store.index.load("flight", store.agent_id)
        assert stored.links == []  # swept as the nightly job would: the old link went with it
        assert store.info().points == 2 and store.index.stats.docs == 2
        # one add naming the id of an expired note takes it too
        store.add("Gate 12 code 4411", id="gate", ttl=60, enrich=False)
        clock.advance(seconds=60)
        taken = store.add("Gate 12 code 5522", id="gate", enrich=False)
        assert taken.status == "created" and store.get("gate").content == "Gate 12 code 5522"
        # ... and says so, as add_many does (it said nothing)
        assert any("replaced note 'gate'" in w and "expired at" in w for w in taken.warnings), taken.warnings
        # a live note of that id still refuses a different text
        clash = store.add_many([{"id": "park", "text": "Parking spot D9"}], enrich=False)
        assert clash[0].status == "rejected"


def test_another_agents_expired_note_is_left_alone(embedder: HashingEmbedder,
                                                   clock: ManualClock) -> None:
    with make_store("edge", embedder, clock) as store:
        store.add("Bob's parking spot", id="park", ttl=60, agent_id="bob", enrich=False)
        clock.advance(seconds=60)
        store.add_many([{"id": "park", "text": "Alice's parking spot"}], enrich=False)
        assert store.info().expired_pending_sweep == 1  # Bob's is swept by his own night
        assert store.get("park").content == "Alice's parking spot"


@pytest.mark.slow
def test_amem_import_takes_the_text_of_an_expired_note_again(tmp_path: Path) -> None:
    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing",
           "PATH": "/usr/bin:/bin"}

    def amem(*args: str) -> Any:
        done = subprocess.run([str(AMEM), *args, "--json"], env=env, capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    parking = "Parking spot B7 at the airport"
    first = amem("import", str(_jsonl(tmp_path / "a.jsonl", [{"text": parking, "ttl": 1}])))
    assert first["created"] == 1
    time.sleep(1.2)
    second = amem("import", str(_jsonl(tmp_path / "b.jsonl", [
        {"text": parking},
        {"text": COFFEE, "subjects": ["Alice"], "timestamp": "2026-01-01"},
        {"text": TEA, "subjects": ["Alice"], "timestamp": "2026-01-05"}])))
    assert (second["created"], second["skipped"], second["errors"]) == (3, 0, [])
    assert (second["expired_replaced"], second["superseded"], second["supersede"]) == (
        1, 1, "offline")
    status = amem("status")["memory"]
    assert (status["notes_of_agent"], status["expired_pending_sweep"]) == (3, 0)
