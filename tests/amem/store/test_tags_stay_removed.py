"""A tag its user removed stays removed when the file that holds it is imported again
(``amem.write.takenback``, ``amem.write.tagjoin``), and the report says so."""

from __future__ import annotations

from pathlib import Path

from amem import MemoryStore
from amem.importdir import import_dir
from amem.importer import import_file


def _write(path: Path, tags: str, text: str = "Alice booked a flight to Lisbon.") -> None:
    path.write_text(f"---\ntags: [{tags}]\n---\n{text}\n", encoding="utf-8")


def test_a_removed_tag_is_not_imported_again_and_a_new_one_still_arrives(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    store = edge_store
    vault = tmp_path / "vault"
    vault.mkdir()
    _write(vault / "trip.md", "travel, conference")
    assert import_dir(store, vault).created == 1
    note_id = store.list(limit=1)[0][0].id
    store.update(note_id, tags=["travel"])  # the user takes "conference" back
    again = import_dir(store, vault)
    # was: "conference" joined the note again, counted as tags_added, said nowhere else
    assert store.get(note_id).tags == ["travel"]
    assert (again.tags_added, again.tags_kept_removed) == (0, 1)
    assert again.tags_kept_removed_from == [note_id]
    assert again.to_dict()["tags_kept_removed"] == 1
    # a tag newly given by the file arrives; the removed one still does not
    _write(vault / "trip.md", "travel, Conference, lisbon")
    third = import_dir(store, vault)
    assert store.get(note_id).tags == ["travel", "lisbon"]
    assert (third.tags_added, third.tags_kept_removed) == (1, 1)
    # the user puts it back: it is theirs again, and a later removal holds as well
    store.update(note_id, tags=["travel", "lisbon", "conference"])
    store.update(note_id, tags=["conference"])
    fourth = import_dir(store, vault)
    assert store.get(note_id).tags == ["conference"]
    assert fourth.tags_kept_removed == 1


def test_a_file_first_imported_after_the_removal_brings_the_tag(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    store = edge_store
    added = store.add("Bob rides a blue bicycle to work", tags=["bike", "commute"])
    store.update(added.id, tags=["bike"])
    doc = tmp_path / "bob.md"
    # titled by its front matter's absence: the file name is a subject, so the text's id is
    # the file's own; the note it goes into was stored by the add
    _write(doc, "commute", "Bob rides a blue bicycle to work")
    first = import_file(store, doc, title="")
    # this file's tags were never taken before the removal: the file says it, it arrives
    assert first.tags_added == 1 and store.get(added.id).tags == ["bike", "commute"]
    store.update(added.id, tags=["bike"])  # removed after this file gave it: stays removed
    second = import_file(store, doc, title="")
    assert store.get(added.id).tags == ["bike"] and second.tags_kept_removed == 1


def test_a_file_that_first_brought_nothing_new_is_remembered(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    store = edge_store
    added = store.add("Eve grows tomatoes on her balcony", tags=["garden", "food"])
    doc = tmp_path / "eve.md"
    _write(doc, "garden, food", "Eve grows tomatoes on her balcony")
    first = import_file(store, doc, title="")
    assert first.tags_added == 0  # every tag held: the join noted where they came from
    seen = store.get(added.id).evolution_history
    assert [e["action"] for e in seen] == ["tags_seen"]
    store.update(added.id, tags=["garden"])  # removed after the file gave it
    second = import_file(store, doc, title="")
    # was: "food" came back, the history holding no entry of this file
    assert store.get(added.id).tags == ["garden"] and second.tags_kept_removed == 1
    # noted once: an unchanged import again writes no entry
    import_file(store, doc, title="")
    assert [e["action"] for e in store.get(added.id).evolution_history] == [
        "tags_seen", "update"]
    # an add of the same text (a fresh id each time) notes nothing, and its tag arrives
    again = store.add("Eve grows tomatoes on her balcony", tags=["food"])
    assert again.tags_added == ["food"]


def test_a_renamed_file_is_the_file_its_notes_were_stored_from(
        tmp_path: Path, edge_store: MemoryStore) -> None:
    store = edge_store
    doc = tmp_path / "trip.md"  # titled by its file name alone (amem.importtitle)
    _write(doc, "travel, conference")
    import_file(store, doc)
    note_id = store.list(limit=1)[0][0].id
    store.update(note_id, tags=["travel"])
    renamed = doc.rename(tmp_path / "journey.md")
    report = import_file(store, renamed)
    # was: the renamed file counted as a new text, and "conference" came back
    assert report.title_added == 1 and report.tags_kept_removed == 1
    assert store.get(note_id).tags == ["travel"]
    assert store.get(note_id).subjects == ["trip", "journey"]
