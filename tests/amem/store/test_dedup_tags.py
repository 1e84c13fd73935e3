"""A duplicate's given tags join its stored note (``amem.write.tagjoin``): a vault note retagged,
then imported again, keeps the labels its user filed it by."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from amem import MemoryStore
from amem.importer import import_file
from amem.notes import MAX_LIST_ITEMS
from tools.cli.notes import _join_lines


def _vector_of(store: MemoryStore, note_id: str) -> np.ndarray:
    note, vector = store.index.load(note_id, store.agent_id, with_vector=True)
    assert vector is not None
    return np.asarray(vector)


def test_a_retagged_vault_note_imported_again_gains_its_new_tags(tmp_path: Path,
                                                                edge_store: MemoryStore) -> None:
    store = edge_store
    doc = tmp_path / "trip.md"
    doc.write_text("---\ntags: [travel]\n---\nAlice booked a flight to Lisbon.\n", encoding="utf-8")
    assert import_file(store, doc).created == 1
    note_id = store.list(limit=1)[0][0].id
    before = store.get(note_id)
    assert before.enriched_by == "given" and before.tags == ["travel"]

    doc.write_text("---\ntags: [travel, conference]\n---\nAlice booked a flight to Lisbon.\n",
                   encoding="utf-8")
    report = import_file(store, doc)
    assert report.deduplicated == 1 and report.created == 0
    assert report.tags_added == 1 and report.tags_added_to == [note_id]
    after = store.get(note_id)
    assert after.tags == ["travel", "conference"]
    entry = after.evolution_history[-1]
    assert entry["action"] == "tags_added" and entry["tags"] == ["conference"]
    assert entry["kept"] == ["travel"]  # which tags the note held, which the text brought
    # the given tags are the note's enrichment: its vector embeds them, so it is re-embedded
    assert "conference" in after.embed_text() and not after.vector_stale
    want = store.index.embed_passages([after.embed_text()])[0]
    assert np.allclose(_vector_of(store, note_id), want, atol=1e-5)
    # the same import once more changes nothing
    again = import_file(store, doc)
    assert again.tags_added == 0 and store.get(note_id).evolution_history == after.evolution_history


def test_add_of_the_same_text_with_new_tags_reports_them(edge_store: MemoryStore) -> None:
    store = edge_store
    first = store.add("Bob prefers green tea in the morning", tags=["drinks"])
    again = store.add("Bob prefers green tea in the morning", tags=["drinks", "Morning", "bob"])
    assert again.status == "deduplicated" and again.id == first.id
    assert store.get(first.id).tags == ["drinks", "Morning", "bob"]  # was: ["drinks"]
    assert again.tags_added == ["Morning", "bob"]
    # the vector follows the text it embeds ("bob" is in the content: embed text unchanged)
    note = store.get(first.id)
    assert np.allclose(_vector_of(store, first.id),
                       store.index.embed_passages([note.embed_text()])[0], atol=1e-5)
    # the history shows which tags came with the text again (``amem history`` prints it)
    events = store.history(first.id)[0]["events"]
    assert [(e["action"], e["tags"], e["kept"]) for e in events] == [
        ("tags_added", ["Morning", "bob"], ["drinks"])]
    assert "tags added: Morning, bob" in _join_lines(events)[0]
    # no tags given: nothing to join, nothing recorded
    plain = store.add("Bob prefers green tea in the morning")
    assert plain.tags_added == [] and len(store.get(first.id).evolution_history) == 1


def test_drawn_tags_never_join_and_the_list_cap_holds(edge_store: MemoryStore) -> None:
    store = edge_store
    # stored with offline enrichment (tags drawn from the text); added again with none given:
    # the draft's drawn tags are never computed for a duplicate, so nothing joins
    first = store.add("Carol moved to Porto to work on wind turbines")
    drawn = store.get(first.id).tags
    assert store.add("Carol moved to Porto to work on wind turbines").tags_added == []
    assert store.get(first.id).tags == drawn
    # a note at the cap keeps its tags; the result says which given ones were left out
    full = [f"t{i}" for i in range(MAX_LIST_ITEMS)]
    capped = store.add("Dan keeps bees on the roof", tags=full)
    result = store.add("Dan keeps bees on the roof", tags=["honey", "t1"])
    assert result.tags_added == [] and store.get(capped.id).tags == full
    assert any("honey" in w and str(MAX_LIST_ITEMS) in w for w in result.warnings)


def test_a_repeat_inside_one_batch_joins_the_note_the_batch_stored(edge_store: MemoryStore) -> None:
    store = edge_store
    results = store.add_many([{"text": "Eve runs on Sundays", "tags": ["sport"]},
                              {"text": "Eve runs on Sundays", "tags": ["weekend"]}])
    assert [r.status for r in results] == ["created", "deduplicated"]
    note = store.get(results[0].id)
    assert note.tags == ["sport", "weekend"]  # was: ["sport"]
    assert results[1].tags_added == ["weekend"]
    assert np.allclose(_vector_of(store, note.id),
                       store.index.embed_passages([note.embed_text()])[0], atol=1e-5)
