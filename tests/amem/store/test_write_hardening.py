"""Issue 12 on the write path: tenant-safe point ids, content-only folds before the LLM,
deletes that stay deleted under concurrent writes, fold decisions that do not depend on when
re-embedding runs, and back-links written after their note."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend, QdrantServerBackend
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import NotFoundError
from amem.importer import import_file
from amem.notes import Note, legacy_point_id, point_id
from amem.pointids import META_KEY
from tests.fakes.backends import FlakyBackend, InjectedCrash
from tests.fakes.llms import enrich_and_link_all

FOLDING = {"fold_threshold": 0.8, "pending_threshold": 0.6}
BASE = "The deploy pipeline runs make release after CI is green on main branch"
VARIANTS = [
    "The deploy pipeline runs make release after CI is green on the main branch",
    "The deploy pipeline runs make release after the CI is green on main branch",
    "Our deploy pipeline runs make release after CI is green on main branch",
]


def open_store(clock: ManualClock, path: str | Path = ":memory:", **overrides: Any) -> MemoryStore:
    return MemoryStore(path, config=load_config(overrides={**FOLDING, **overrides}),
                       embedder=HashingEmbedder(dim=256), clock=clock)


# -- item 4: point ids ----------------------------------------------------------------------


def test_point_ids_are_injective_over_agent_and_note_id() -> None:
    assert point_id("a/b", "c") != point_id("a", "b/c")
    assert legacy_point_id("a/b", "c") == legacy_point_id("a", "b/c")  # the old collision


def test_one_agent_cannot_overwrite_another_agents_note(tmp_path: Path, clock: ManualClock) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text('{"text": "victim", "id": "c", "agent_id": "a/b"}\n'
                   '{"text": "x", "id": "b/c", "agent_id": "a"}\n', encoding="utf-8")
    with open_store(clock) as store:
        report = import_file(store, src)
        assert report.created == 2 and report.skipped == 0
        assert store.get("c", agent_id="a/b").content == "victim"
        assert store.get("b/c", agent_id="a").content == "x"
        with pytest.raises(NotFoundError):
            store.get("c", agent_id="a")


def reopen(kind: str, path: Path, clock: ManualClock) -> MemoryStore:
    """The store at ``path`` on the embedded engine or on qdrant-client's local mode."""
    if kind == "edge":
        return open_store(clock, path)
    backend = QdrantServerBackend.local(path, "amem", 256)
    return MemoryStore(config=load_config(overrides=FOLDING), embedder=HashingEmbedder(dim=256),
                       clock=clock, backend=backend)


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
def test_a_store_written_with_the_old_point_ids_is_moved_at_open(
        kind: str, tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "store"
    with reopen(kind, path, clock) as store:
        first = store.add(BASE, id="n1", agent_id="a/b")
        store.add("Alice prefers green tea over coffee", id="n2", agent_id="a")
        store.delete("n2", agent_id="a")
        # rewrite the store as format 1 left it: old point ids, no format in the metadata
        hits = list(store.index.backend.iterate(None, with_vectors=True))
        for hit in hits:
            note = Note.from_payload(hit.payload)
            assert hit.dense is not None
            point = store.index.make_point(note, hit.dense, count_stats=False)
            point.id, point.payload = legacy_point_id(note.agent_id, note.id), dict(hit.payload)
            store.index.backend.upsert([point])
        # n1 as a killed move leaves it: copied to its new id, its old point not yet deleted
        store.index.backend.delete([h.id for h in hits if h.id != point_id("a/b", "n1")])
        meta = store.index.backend.read_meta()
        meta.pop(META_KEY)
        store.index.backend.write_meta(meta)
        store.index.meta = meta  # close() saves the metadata the store holds
    with reopen(kind, path, clock) as store:
        assert store.index.backend.read_meta()[META_KEY] == 2
        assert store.get("n1", agent_id="a/b").content == BASE
        assert store.get("n2", agent_id="a", include_inactive=True).is_active is False
        assert sorted(h.id for h in store.index.backend.iterate(None)) == sorted(
            [point_id("a/b", "n1"), point_id("a", "n2")])
        assert store.add(VARIANTS[0], agent_id="a/b").status == "folded"  # still found by vector
        assert store.get(first.id, agent_id="a/b").content.startswith(BASE)
        assert [r.id for r in store.search("deploy pipeline", agent_id="a/b")] == ["n1"]


# -- item 9: content-only folds, before the LLM ---------------------------------------------


#: one long enrichment for every text, as a broken or lazy endpoint gives
SAME_ENRICHMENT = {"keywords": [f"topic{i}" for i in range(40)], "tags": ["general"],
                   "context": "A long shared context about many things. " * 12,
                   "category": "General", "note_type": "memory", "topics": ["life"]}


class SameAnswerLLM:
    """The LLM seam answering every enrichment with ``SAME_ENRICHMENT``; counts its calls."""

    model = "same-answer"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        raise AssertionError("the write path asks for JSON")

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        self.calls.append(name)
        if name == "note_enrichment":
            return dict(SAME_ENRICHMENT)
        if name == "link_decisions":
            return {"links": []}
        return {"updates": []}


UNRELATED = ["My car brakes squeak when it rains", "Ubuntu 24.04 upgrade broke the wifi driver",
             "Mum's birthday is on the 14th of May", "Q3 revenue grew eleven percent",
             "Dana is allergic to peanuts"]


def test_the_same_llm_enrichment_folds_nothing_together(clock: ManualClock) -> None:
    llm = SameAnswerLLM()
    config = load_config(overrides=FOLDING)
    with MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=256), clock=clock,
                     llm=llm) as store:
        results = [store.add(text) for text in UNRELATED]
        assert [r.status for r in results] == ["created"] * 5
        assert store.count() == 5


def test_a_folded_or_deduplicated_add_never_calls_the_llm(clock: ManualClock) -> None:
    llm = SameAnswerLLM()
    config = load_config(overrides=FOLDING)
    with MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=256), clock=clock,
                     llm=llm) as store:
        first = store.add(BASE).id
        calls = list(llm.calls)
        assert calls  # the LLM built the first note
        assert store.add(VARIANTS[0]).status == "folded"
        assert store.add(BASE).status == "deduplicated"
        batch = store.add_many([{"text": VARIANTS[1]}, {"text": BASE}, {"text": VARIANTS[1]}])
        assert [r.status for r in batch] == ["folded", "deduplicated", "deduplicated"]
        assert {r.id for r in batch} == {first}  # a repeat names the note its text went into
        assert llm.calls == calls


# -- item 10: deletes stay deleted -------------------------------------------------------------


def test_deleted_notes_never_come_back_under_concurrent_folds(clock: ManualClock) -> None:
    with open_store(clock) as store:
        targets = [store.add(text, id=f"t{n}").id for n, text in enumerate(UNRELATED)]
        assert targets == [f"t{n}" for n in range(len(UNRELATED))]
        statuses: list[str] = []
        errors: list[BaseException] = []

        def writer() -> None:  # near-duplicates that fold into (and evolve) the targets
            try:
                # rounds in words: "round 1" beside "round 0" states another value, another
                # fact that no fold joins (amem.write.values)
                for round_ in ("one", "two", "three", "four"):
                    for text in UNRELATED:
                        statuses.append(store.add(f"{text}, as noted in round {round_}").status)
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        for note_id in targets:
            store.delete(note_id)
        thread.join()
        assert errors == [] and "folded" in statuses
        for note_id in targets:
            with pytest.raises(NotFoundError):
                store.get(note_id)
            assert store.get(note_id, include_inactive=True).is_active is False


class EvolvingLLM(SameAnswerLLM):
    """Links every candidate and evolves every neighbour, slowly: the window in which an add
    holds a snapshot of the notes it evolves is long enough for a delete to land in it."""

    model = "evolving"

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        self.calls.append(name)
        canned = enrich_and_link_all(name, user)
        if canned is not None:
            return canned
        time.sleep(0.02)
        count = user.count("<neighbour ")
        return {"updates": [{"neighbour": n, "context": "Evolved.", "tags": ["evolved"]}
                            for n in range(1, count + 1)]}


class DeletingLLM(EvolvingLLM):
    """While an add holds its snapshot of the notes it evolves (inside its evolve call),
    another thread deletes them, and is given a moment to finish."""

    def __init__(self, store: list[MemoryStore], ids: list[str]) -> None:
        super().__init__()
        self.store, self.ids = store, ids
        self.deleter: threading.Thread | None = None

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        if name == "memory_evolution" and self.deleter is None and self.ids:
            store = self.store[0]
            self.deleter = threading.Thread(target=lambda: [store.delete(i) for i in self.ids])
            self.deleter.start()
            self.deleter.join(timeout=0.5)  # before: done here; now: waits for the write lock
        return super().complete_json(system, user, schema=schema, name=name)


def test_a_delete_during_an_adds_evolution_stays_deleted(clock: ManualClock) -> None:
    ids: list[str] = []
    holder: list[MemoryStore] = []
    llm = DeletingLLM(holder, ids)
    with MemoryStore(":memory:", config=load_config(overrides=FOLDING),
                     embedder=HashingEmbedder(dim=256), clock=clock, llm=llm) as store:
        holder.append(store)
        targets = [store.add(text, id=f"t{n}").id for n, text in enumerate(UNRELATED[:3])]
        ids.extend(targets)
        result = store.add("Sam notes: " + "; ".join(t.lower() for t in UNRELATED[:3]))
        assert llm.deleter is not None
        llm.deleter.join()
        assert set(result.evolved) & set(targets)  # the add evolved notes being deleted
        # before: the evolution rewrote whole notes from the add's snapshot, reviving them
        assert [t for t in targets if store.get(t, include_inactive=True).is_active] == []


def test_a_fold_into_a_note_deleted_since_its_snapshot_does_not_revive_it(
        clock: ManualClock) -> None:
    with open_store(clock) as store:
        store.add(BASE, id="t")
        snapshot = store.get("t")
        store.delete("t")
        snapshot.content += " and more"
        assert not store.index.update_note(snapshot)  # a stale writer's whole note: refused
        assert not store.index.update_note_fields("t", store.agent_id, {"content": "x"})
        assert store.get("t", include_inactive=True).is_active is False


# -- item 13: the note before its back-links --------------------------------------------------


def test_an_add_killed_at_any_write_leaves_no_link_to_a_missing_note(clock: ManualClock) -> None:
    for fail_at in range(8):
        backend = FlakyBackend(EdgeBackend.temporary(256))
        llm = EvolvingLLM()
        with MemoryStore(config=load_config(overrides=FOLDING), embedder=HashingEmbedder(256),
                         clock=clock, backend=backend, llm=llm) as store:
            for n, text in enumerate(UNRELATED[:3]):
                store.add(text, id=f"t{n}")
            backend.arm(fail_at)
            try:
                store.add("Sam notes: " + "; ".join(t.lower() for t in UNRELATED[:3]), id="new")
            except InjectedCrash:
                pass
            backend.arm(None)
            live = {n.id for n, _ in store.iter_notes()}
            dangling = [(n.id, t) for n, _ in store.iter_notes() for t in n.links if t not in live]
            assert dangling == [], (fail_at, dangling)


def test_search_tolerates_a_link_to_a_missing_note(clock: ManualClock) -> None:
    with open_store(clock) as store:
        store.add(BASE, id="a")
        store.index.update_payload("a", store.agent_id, {"links": ["ghost"]})
        assert [r.id for r in store.search("deploy pipeline release", expand_links=True)] == ["a"]
