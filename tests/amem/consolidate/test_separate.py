"""``MemoryStore.separate``: a text a fold or a merge joined into a note is its own note again,
and the two are never joined again (the default embedder: whether a fold happens depends on
similarity).

Before (2026-12-06) a fold or a merge had no undo: ``amem history`` showed the joined text,
and a user who saw two distinct facts in one note could not take them apart.
"""

from __future__ import annotations

import pytest

from amem import MemoryStore
from amem.bm25 import payload_terms
from amem.errors import NotFoundError, ValidationError
from amem.kernel.clock import ManualClock
from amem.notes import content_hash

from .e5_store import clock, embedder, store  # noqa: F401 - fixtures

A = "User's cat is called Miso."
B = "The user has a cat named Miso."


def _fold(store: MemoryStore) -> tuple[str, str]:
    """A stored, B folded into it: (the note, the part id history shows)."""
    first = store.add(A)
    folded = store.add(B)
    assert folded.status == "folded" and folded.id == first.id
    (entry,) = [e for n in store.history(first.id) for e in n["events"] if e["action"] == "fold"]
    return first.id, entry["triggered_by"]


def _term_total(store: MemoryStore) -> int:
    return sum(len(payload_terms(h.payload)) for h in store.index.backend.iterate(None))


def test_fold_then_separate_gives_both_notes_back(store: MemoryStore) -> None:
    note, part = _fold(store)
    assert store.get(note).content == f"{A}\n\n{B}"
    result = store.separate(note, part)
    assert (result.id, result.part, result.note) == (note, part, part)
    assert result.joined_by == "fold" and result.text_restored and not result.warnings
    target, own = store.get(note), store.get(part)
    assert target.content == A and content_hash(B) not in target.folded_hashes
    assert own.content == B and own.is_active and own.timestamp == target.timestamp
    assert own.kept_apart == [note] and target.kept_apart == [part]
    assert target.evolution_history[-1]["action"] == "separated"
    assert own.evolution_history[-1]["action"] == "separated_from"
    assert not target.vector_stale and not own.vector_stale
    hits = [h.id for h in store.search("cat named Miso", limit=5, expand_links=False)]
    assert set(hits) == {note, part}
    # the BM25 total follows both texts: it is the sum over the points, as a reopen counts it
    assert store.index.stats.tokens == _term_total(store)


def test_the_same_text_told_again_is_not_folded_back(store: MemoryStore,
                                                      clock: ManualClock) -> None:
    note, part = _fold(store)
    store.separate(note, part)
    again = store.add(B)
    assert (again.status, again.id) == ("deduplicated", part)  # its own note, not the target
    store.delete(part)
    told = store.add(B)  # its note deleted, the text told again: still kept apart
    assert told.status in ("created", "pending_merge") and told.id != note
    assert store.get(note).content == A
    clock.advance(3 * 86400)
    assert store.consolidate().merges == 0
    assert store.get(note).content == A and store.get(told.id).content == B


def test_the_nightly_merge_keeps_a_separated_pair_apart(store: MemoryStore,
                                                        clock: ManualClock) -> None:
    note, part = _fold(store)
    store.separate(note, part)
    clock.advance(3 * 86400)
    assert store.consolidate().merges == 0
    assert store.get(note).content == A and store.get(part).content == B


def test_merge_then_separate_brings_the_merged_note_back(store: MemoryStore,
                                                         clock: ManualClock) -> None:
    older = store.add(A, metadata={"source": "chat"})
    clock.advance(3 * 86400)  # another day: not folded, merged at night
    newer = store.add(B)  # more words: the survivor, which takes the older time and labels
    was = {n: store.get(n, record_usage=False) for n in (older.id, newer.id)}
    assert store.consolidate().merges == 1
    (survivor,) = [n.id for n, _ in store.iter_notes()]
    loser = older.id
    merged = store.get(survivor)
    assert survivor == newer.id and merged.timestamp == was[loser].timestamp
    assert merged.metadata == {"source": "chat"}
    (entry,) = [e for e in merged.evolution_history if e["action"] == "consolidate_merge"]
    assert entry["merged"] == loser and store.get(survivor).content != was[survivor].content
    result = store.separate(survivor, loser)
    assert result.joined_by == "merge" and result.note == loser and result.text_restored
    back, target = store.get(loser), store.get(survivor)
    assert back.is_active and back.merged_into is None and back.kept_apart == [survivor]
    assert (back.content, back.timestamp, back.keywords) == (
        was[loser].content, was[loser].timestamp, was[loser].keywords)
    assert (target.content, target.timestamp) == (was[survivor].content, was[survivor].timestamp)
    assert target.metadata == {} and back.metadata == {"source": "chat"}
    labelled = store.search("cat", limit=5, metadata={"source": "chat"}, expand_links=False)
    assert [h.id for h in labelled] == [loser]  # the survivor's derived label fields followed
    assert back.hash not in target.folded_hashes
    assert set(r.id for r in store.search("cat Miso", limit=5, expand_links=False)) == {
        survivor, loser}
    assert store.consolidate().merges == 0  # kept apart for good
    with pytest.raises(ValidationError) as again:
        store.separate(survivor, loser)
    assert again.value.field == "part" and "already" in str(again.value)


def test_errors_name_what_is_wrong(store: MemoryStore) -> None:
    note, part = _fold(store)
    with pytest.raises(NotFoundError):
        store.separate("no-such-note", part)
    with pytest.raises(ValidationError) as never:
        store.separate(note, "never-folded")
    assert never.value.field == "part" and "amem history" in str(never.value)
    # another agent sees no such note, and cannot separate it (no oracle: the same error)
    with pytest.raises(NotFoundError):
        store.separate(note, part, agent_id="mallory")
    assert store.get(note).content == f"{A}\n\n{B}"
    store.separate(note, part)
    with pytest.raises(ValidationError) as twice:
        store.separate(note, part)
    assert twice.value.field == "part" and part in str(twice.value)


def test_a_text_edited_since_is_kept_and_said(store: MemoryStore) -> None:
    note, part = _fold(store)
    store.update(note, content=f"{A}\n\nThe user has a cat named Miso, a tabby.")
    result = store.separate(note, part)
    assert not result.text_restored and "kept" in result.warnings[0]
    assert store.get(note).content.endswith("a tabby.")  # nothing guessed away
    assert store.get(part).content == B  # the part is its own note all the same


def test_a_fold_recorded_before_the_undo_fields_is_redone(store: MemoryStore) -> None:
    """An entry written before 2026-12-06 has the text and tags alone: the paragraph is found
    by folding again, and the result says what was not recorded."""
    note, part = _fold(store)
    stored = store.get(note)
    legacy = [{k: v for k, v in e.items()
               if k not in ("appended", "brought", "added", "timestamp", "event_time")}
              for e in stored.evolution_history]
    store.index.update_payload(note, "u", {"evolution_history": legacy})
    result = store.separate(note, part)
    assert result.text_restored and store.get(note).content == A
    assert any("recorded" in w for w in result.warnings)
    assert store.get(part).content == B


def test_a_fact_the_merged_note_had_replaced_is_hidden_behind_it_again(
        store: MemoryStore, clock: ManualClock) -> None:
    """The merge handed the merged note's supersession marks to the survivor; separated, the
    note whose text states the change hides the older fact again (the survivor's does not)."""
    coffee = store.add("Alice drinks coffee every morning", ["Alice"])
    clock.advance(86400)
    tea = store.add("Alice stopped coffee, she drinks tea now", ["Alice"])
    assert tea.supersedes == [coffee.id]
    clock.advance(3 * 86400)
    green = store.add("Alice stopped coffee, she drinks green tea now.", ["Alice"])
    assert store.consolidate().agents["u"].merged == [(tea.id, green.id)]
    assert store.get(coffee.id).superseded_by == green.id  # handed on by the merge
    store.separate(green.id, tea.id)
    assert store.get(coffee.id).superseded_by == tea.id
    assert store.get(tea.id).supersedes == [coffee.id] and store.get(green.id).supersedes == []
    assert store.superseder.audit() == []  # no mark hides a fact for no live reason
    shown = [h.id for h in store.search("Alice coffee", limit=5, expand_links=False)]
    assert coffee.id not in shown and tea.id in shown


def test_separated_notes_are_found_by_their_own_tags_in_any_case(store: MemoryStore) -> None:
    """The part taken out keeps the tags only it brought, the note loses them, and the tags
    filter's keys (``amem.notefields.tag_keys``) follow both."""
    from amem.notefields import TAG_KEYS, tag_keys

    first = store.add(A, tags=["Pets"])
    folded = store.add(B, tags=["pets", "Adopted"])
    assert folded.status == "folded" and store.get(first.id).tags.count("Pets") == 1
    assert "pets" not in store.get(first.id).tags  # one tag by key, as first spelled
    (entry,) = [e for n in store.history(first.id) for e in n["events"] if e["action"] == "fold"]
    result = store.separate(first.id, entry["triggered_by"])
    assert "Adopted" in store.get(result.note).tags and "Adopted" not in store.get(first.id).tags
    assert [r.id for r in store.search("cat Miso", tags=["adopted"], expand_links=False)] == [
        result.note]
    assert all(h.payload.get(TAG_KEYS) == tag_keys(h.payload["tags"])
               for h in store.index.backend.iterate(None))
