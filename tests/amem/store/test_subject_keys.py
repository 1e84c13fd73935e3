"""Subjects are compared by key, not by spelling: "Alice" and "alice" are one subject.

Before, ``search(subject="alice")`` hid every note stored about "Alice" (the filter matched the
stored spelling), exact dedup and folds kept "Alice" and "alice" apart, while the supersede
rule already treated them as one, so an older note about "Alice" could be hidden behind a newer
one about "alice" that a ``subject="Alice"`` search then did not show. A note keeps the spelling
it was given; the keys (``amem.notefields.subject_key``) are a derived field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.backends.edge import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.notefields import SUBJECT_KEYS, subject_key
from amem.notes import about_the_same, point_id, unique_subjects
from amem.upgrades import KEYED_KEY, key_subjects


def test_a_key_is_case_width_and_space_blind_and_keeps_other_letters_apart() -> None:
    assert subject_key("Alice") == subject_key(" ALICE ") == subject_key("Ａｌｉｃｅ") == "alice"
    assert subject_key("Mary  Ann") == subject_key("mary ann")
    assert subject_key("Straße") == subject_key("STRASSE")  # case folding, not lowering
    assert subject_key("alice") != subject_key("alicia")
    assert about_the_same(["Alice"], ["alice", "bob"])
    assert not about_the_same(["Alice"], ["Carol"])
    assert unique_subjects(["Alice", "bob", "alice", "Bob"]) == ["Alice", "bob"]


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), agent_id="t") as store:
        yield store


def test_the_subject_filter_finds_every_spelling_and_shows_the_stored_one(
        store: MemoryStore) -> None:
    alice = store.add("Prefers green tea in the morning", subjects=["Alice"], enrich=False)
    carol = store.add("Prefers black coffee in the morning", subjects=["carol"], enrich=False)
    for asked in ("alice", "Alice", "ALICE"):
        found = [hit.id for hit in store.search("what does she drink in the morning?",
                                                limit=5, subject=asked)]
        assert alice.id in found and carol.id not in found, asked
    assert store.get(alice.id).subjects == ["Alice"]


def test_a_duplicate_about_the_same_subject_spelled_otherwise_goes_into_the_note(
        store: MemoryStore) -> None:
    first = store.add("Prefers window seats", subjects=["Alice"], enrich=False)
    again = store.add("Prefers window seats", subjects=["alice"], enrich=False)
    assert again.status == "deduplicated" and again.id == first.id
    assert again.warnings == []  # nothing was left out: it is the same subject
    other = store.add("Prefers window seats", subjects=["Bob"], enrich=False)
    assert other.status == "created" and other.id != first.id


def test_a_fold_keeps_one_spelling_of_a_subject() -> None:
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), agent_id="t") as store:
        first = store.add("Alice stopped coffee, she drinks tea now", subjects=["Alice"])
        again = store.add("Alice stopped coffee, she drinks tea now!", subjects=["alice"])
        assert again.status == "folded" and again.id == first.id
        assert store.get(first.id).subjects == ["Alice"]


def test_edited_subjects_are_found_by_their_new_key(store: MemoryStore) -> None:
    note = store.add("Runs the onboarding sessions", subjects=["Carol"], enrich=False)
    store.update(note.id, subjects=["DAVE"])
    assert [r.id for r in store.search("onboarding", subject="dave")] == [note.id]
    assert store.search("onboarding", subject="carol") == []


def test_a_store_written_before_subject_keys_gets_them_once(tmp_path: Path) -> None:
    path, clock = tmp_path / "store", ManualClock("2026-01-10T12:00:00+00:00")
    config, embedder = load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder, clock=clock) as old:
        old.add("Prefers green tea", subjects=["Alice"], id="a", enrich=False)
        old.add("Deleted note about Alice", subjects=["Alice"], id="d", enrich=False)
        old.delete("d")
        old.add("Nobody in particular", id="n", enrich=False)
    # What an older version wrote: payloads without keys (null reads as absent to the
    # engine's IsEmpty, as a missing field does), no record of this upgrade.
    with EdgeBackend(path, 64) as engine:
        for nid in ("a", "d", "n"):
            assert engine.update_point(point_id("default", nid), {SUBJECT_KEYS: None})
        meta = engine.read_meta()
        meta.pop(KEYED_KEY)
        engine.write_meta(meta)
    with MemoryStore(path, config=config, embedder=embedder, clock=clock) as old:
        assert old.index.backend.read_meta()[KEYED_KEY] == 1
        keys = {nid: old.index.backend.retrieve([point_id("default", nid)])[0].payload.get(
            SUBJECT_KEYS) for nid in ("a", "d", "n")}
        assert keys == {"a": ["alice"], "d": ["alice"], "n": None}  # the deleted one too
        assert "a" in [r.id for r in old.search("green tea", subject="alice")]
    with MemoryStore(path, config=config, embedder=embedder, clock=clock) as again:
        assert key_subjects(again.index) == 0  # recorded: never read again
