"""Tags are compared by key, not by spelling: ``--tag morning`` finds a note tagged "Morning".

Before, the tags filter matched the stored spelling: a note tagged "Morning" (an ``add`` with
``tags=["Morning"]``) was hidden from ``tags=["morning"]``, and a tag copied from a vault
("#morning") matched nothing, where Obsidian, Logseq and Bear match tags whatever their case.
The tag join of a duplicate (``amem.write.tagjoin``) added "Morning" to a note holding
"morning". A note keeps and shows its tags as written; the keys (``amem.notefields.tag_key``)
are a derived, keyword-indexed payload field written on every write path.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore, load_config
from amem.backends import QdrantServerBackend
from amem.backends.edge import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.export import export_store, import_export
from amem.importdir import import_dir
from amem.importer import import_file
from amem.kernel.clock import ManualClock
from amem.notefields import TAG_KEYS, tag_key, tag_keys
from amem.notes import new_tags, point_id, unique_tags
from amem.upgrades import key_tags


def test_a_key_is_case_width_space_and_hash_blind_and_keeps_other_letters_apart() -> None:
    assert tag_key("Morning") == tag_key("#morning") == tag_key(" MORNING ") == "morning"
    assert tag_key("Ｍｏｒｎｉｎｇ") == "morning"  # full width, as a phone keyboard may type it
    assert tag_key("Straße") == tag_key("STRASSE")  # case folding, not lowering
    assert tag_key("morning") != tag_key("mornings")
    assert tag_keys(["Work", "work", "#WORK", "home"]) == ["work", "home"]
    assert unique_tags(["morning", "Work", "Morning", "#work"]) == ["morning", "Work"]
    assert new_tags(["Morning", "travel", "TRAVEL"], ["morning"]) == ["travel"]


def ids(hits: list[Any]) -> list[str]:
    return [hit.id for hit in hits]


def test_the_tags_filter_finds_every_spelling_and_shows_the_stored_one(store: MemoryStore) -> None:
    # both engines (the store fixture: edge and qdrant-client's local mode)
    upper = store.add("Went for a run before breakfast", tags=["Morning"], enrich=False)
    lower = store.add("Read the paper before work", tags=["morning"], enrich=False)
    other = store.add("Went for a run after dinner", tags=["evening"], enrich=False)
    for asked in (["morning"], ["Morning"], ["#MORNING"], ["nothing", "mORNING"]):
        found = ids(store.search("run before breakfast or paper", limit=5, tags=asked))
        assert set(found) == {upper.id, lower.id}, asked
    assert other.id not in ids(store.search("run", limit=5, tags=["Morning"]))
    assert store.get(upper.id).tags == ["Morning"]  # shown as written
    hits = store.search("run before breakfast", limit=1, tags=["morning"])
    assert hits[0].tags == ["Morning"]
    with pytest.raises(ValidationError) as bad:
        store.search("run", tags=["#"])  # names no tag: refused, not an empty answer
    assert bad.value.field == "tags" and "names no tag" in str(bad.value)


def test_a_duplicate_does_not_add_a_tag_its_note_holds_in_another_case(
        store: MemoryStore) -> None:
    first = store.add("Bob prefers green tea in the morning", tags=["morning"])
    again = store.add("Bob prefers green tea in the morning", tags=["Morning", "#MORNING", "tea"])
    assert again.status == "deduplicated" and again.id == first.id
    assert again.tags_added == ["tea"]  # was: ["Morning", "#MORNING", "tea"]
    note = store.get(first.id)
    assert note.tags == ["morning", "tea"]
    assert note.evolution_history[-1]["tags"] == ["tea"]
    same = store.add("Bob prefers green tea in the morning", tags=["TEA", "Morning"])
    assert same.tags_added == [] and store.get(first.id).evolution_history == note.evolution_history
    assert ids(store.search("green tea", limit=3, tags=["Tea"])) == [first.id]


def test_tags_given_twice_in_two_cases_are_kept_once(store: MemoryStore) -> None:
    note = store.add("Stand-up moved to ten", tags=["Work", "work", "#work"], enrich=False)
    assert store.get(note.id).tags == ["Work"]
    store.update(note.id, tags=["Meetings", "meetings", "work"])
    assert store.get(note.id).tags == ["Meetings", "work"]


def test_a_fold_keeps_one_spelling_of_a_tag() -> None:
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), agent_id="t") as store:
        first = store.add("Alice stopped coffee, she drinks tea now", tags=["Health"])
        again = store.add("Alice stopped coffee, she drinks tea now!", tags=["health", "tea"])
        assert again.status == "folded" and again.id == first.id
        assert store.get(first.id).tags == ["Health", "tea"]
        assert ids(store.search("coffee", limit=3, tags=["TEA"])) == [first.id]


def test_edited_tags_are_found_by_their_new_key(store: MemoryStore) -> None:
    note = store.add("Runs the onboarding sessions", tags=["Work"], enrich=False)
    store.update(note.id, tags=["Teaching"])
    assert ids(store.search("onboarding", tags=["teaching"])) == [note.id]
    assert store.search("onboarding", tags=["work"]) == []


def _keys_follow_tags(store: MemoryStore) -> dict[str, list[str]]:
    """Every point's tags; asserts each point's keys are its tags' keys (none missing)."""
    out = {}
    for hit in store.index.backend.iterate(None):
        assert hit.payload.get(TAG_KEYS) == tag_keys(hit.payload["tags"]), hit.payload["id"]
        out[hit.payload["id"]] = list(hit.payload["tags"])
    return out


def test_every_write_path_writes_the_keys(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "run.md").write_text("---\ntags: [Morning, Sport]\n---\nRan ten kilometres by "
                                  "the river.\n", encoding="utf-8")
    embedder, clock = HashingEmbedder(dim=64), ManualClock("2026-01-10T12:00:00+00:00")
    with MemoryStore(":memory:", embedder=embedder, clock=clock, agent_id="t") as store:
        store.add("Alice stopped coffee, she drinks tea now", tags=["Health"], id="f")
        store.add("Alice stopped coffee, she drinks tea now!", tags=["tea"])  # a fold into f
        store.add_many([{"text": "Bought new running shoes", "tags": ["Sport"]},
                        {"text": "Bob prefers green tea", "tags": ["Drinks"], "id": "d"}],
                       enrich=False)
        store.add("Bob prefers green tea", tags=["Bob"])  # the tag join into d
        assert import_dir(store, vault, enrich=False).created == 1
        u = store.add("Runs the onboarding sessions", tags=["Work"], enrich=False)
        store.update(u.id, tags=["Teaching"])
        tags = _keys_follow_tags(store)
        assert tags["f"] == ["Health", "tea"] and tags["d"] == ["Drinks", "Bob"]
        assert tags[u.id] == ["Teaching"] and ["morning", "sport"] in tags.values()
        dump = io.StringIO()
        export_store(store, dump)
    # an export's notes keep their tags and keys in another store
    with MemoryStore(":memory:", embedder=embedder, clock=clock, agent_id="t") as copy:
        dump.seek(0)
        assert import_export(copy, dump) == len(tags)
        assert _keys_follow_tags(copy) == tags
        assert "d" in ids(copy.search("green tea", tags=["bob"]))


def _without_keys(engine: Any, pids: list[str]) -> None:
    """As a version before tag keys wrote, into a store of before them or into one this
    version opened already (its live keys: ``heal_older_writes`` cannot tell those): no keys
    (null reads as absent to ``IsEmpty``, as a missing field does)."""
    for pid in pids:
        assert engine.update_point(pid, {TAG_KEYS: None})


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
def test_notes_written_without_tag_keys_get_them_at_the_next_open(tmp_path: Path,
                                                                 kind: str) -> None:
    path, clock = tmp_path / "store", ManualClock("2026-01-10T12:00:00+00:00")
    config, embedder = load_config(overrides={}), HashingEmbedder(dim=64)

    def backend() -> Any:
        if kind == "edge":
            return EdgeBackend(path, 64)
        return QdrantServerBackend.local(path, "amem", 64)

    def opened() -> MemoryStore:
        return MemoryStore(config=config, embedder=embedder, clock=clock, backend=backend())

    with opened() as old:
        old.add("Went for a run before breakfast", tags=["Morning"], id="a", enrich=False)
        old.add("Deleted note about mornings", tags=["Morning"], id="x", enrich=False)
        old.delete("x")
        old.add("No tag at all", id="n", enrich=False)
    engine = backend()
    try:
        _without_keys(engine, [point_id("default", n) for n in ("a", "x", "n")])
    finally:
        engine.close()
    with opened() as store:
        keys = {nid: store.index.backend.retrieve([point_id("default", nid)])[0].payload.get(
            TAG_KEYS) for nid in ("a", "x", "n")}
        assert keys == {"a": ["morning"], "x": ["morning"], "n": None}  # the deleted one too
        assert ids(store.search("run", tags=["morning"])) == ["a"]
        assert key_tags(store.index) == 0  # nothing left: the next opens read nothing


def test_a_tag_naming_nothing_is_refused_where_it_is_written(edge_store: MemoryStore,
                                                             tmp_path: Path) -> None:
    """'#' alone (or '#' and spaces) has no key: stored, it was a tag no filter can ask for
    (the filter refuses it as naming nothing) and, given twice in two spellings, one of them
    was dropped as a repeat of the other; now each way in refuses it and changes nothing."""
    store = edge_store
    with pytest.raises(ValidationError) as bad:
        store.add("Went for a swim", tags=["swim", "#"], enrich=False)
    assert bad.value.field == "tags" and "'#' names no tag" in str(bad.value)
    assert store.list()[0] == []
    note = store.add("Went for a swim", tags=["Swim"], enrich=False)
    with pytest.raises(ValidationError) as bad:
        store.update(note.id, tags=["sport", " # "])
    assert bad.value.field == "tags" and "' # ' names no tag" in str(bad.value)
    kept = store.get(note.id)
    assert kept.tags == ["Swim"] and kept.evolution_history == []
    lines = tmp_path / "notes.jsonl"
    lines.write_text('{"text": "Went for a run", "tags": ["run"]}\n'
                     '{"text": "Went for a ride", "tags": ["##"]}\n', encoding="utf-8")
    with pytest.raises(ValidationError) as bad:
        import_file(store, lines)  # checked whole first: the bad line names itself
    assert "notes.jsonl:2" in str(bad.value) and "names no tag" in str(bad.value)
    assert [n.id for n in store.list()[0]] == [note.id]


def test_a_tag_of_two_words_is_found_with_a_space_or_a_hyphen(edge_store: MemoryStore,
                                                               tmp_path: Path) -> None:
    """An import stores Logseq's ``#[[road trip]]`` as "road-trip" (the store's tag form,
    ``normalise_tag``), where ``update`` and ``add`` keep "Road Trip" as given: the filter
    asked for the page's own name, "road trip", found nothing and said nothing."""
    store = edge_store
    page = tmp_path / "Lisbon.md"
    page.write_text("Booked the hostel in Alfama. #[[road trip]]\n", encoding="utf-8")
    import_file(store, page, enrich=False)
    imported = store.list()[0][0]
    assert imported.tags == ["road-trip"]
    typed = store.add("Rented a car for the coast", tags=["Road Trip"], enrich=False)
    both = {imported.id, typed.id}
    for asked in (["road trip"], ["Road-Trip"], ["#road trip"]):
        assert set(ids(store.search("hostel car coast", limit=5, tags=asked))) == both, asked
    other = store.add("A road, then a trip abroad", tags=["road", "trip"], enrich=False)
    assert other.id not in ids(store.search("road trip", limit=5, tags=["road trip"]))
