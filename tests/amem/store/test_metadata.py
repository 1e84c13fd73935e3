"""Metadata: checked on add, kept on the note, filtered by search in the engine (indexed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.export import export_store, load_export
from amem.importer import import_file

from .conftest import make_store


def test_metadata_is_kept_as_given(store: MemoryStore) -> None:
    labels = {"project": "apollo", "sprint": 7, "ratio": 0.5, "urgent": True, "a.b:c-d": ""}
    note_id = store.add("Deploy the staging cluster", metadata=labels, enrich=False).id
    assert store.get(note_id).metadata == labels
    assert store.get(store.add("No labels here", enrich=False).id).metadata == {}


def test_a_duplicate_text_says_its_metadata_was_not_stored(edge_store: MemoryStore) -> None:
    first = edge_store.add("Deploy the staging cluster", metadata={"team": "x"}, enrich=False)
    plain = edge_store.add("Deploy the staging cluster", enrich=False)
    assert (plain.status, plain.warnings) == ("deduplicated", [])
    again = edge_store.add("Deploy the staging cluster", metadata={"team": "y"},
                           event_time="2025-01-01", enrich=False)
    assert again.status == "deduplicated" and again.id == first.id
    assert "event_time, metadata" in again.warnings[0] and "not stored" in again.warnings[0]
    assert edge_store.get(first.id).metadata == {"team": "x"}


def test_bad_metadata_is_refused_naming_the_key(edge_store: MemoryStore) -> None:
    cases = [
        ({"bad key": 1}, "metadata.bad key"),
        ({"k=v": 1}, "metadata.k=v"),  # '=' would break the key=value index
        ({"1st": 1}, "metadata.1st"),
        ({"x" * 65: 1}, "metadata." + "x" * 65),
        ({"note": "v" * 257}, "metadata.note"),
        ({"nested": {"a": 1}}, "metadata.nested"),
        ({"list": [1, 2]}, "metadata.list"),
        ({"nan": float("nan")}, "metadata.nan"),
        ({"none": None}, "metadata.none"),
        ({f"k{i}": i for i in range(33)}, "metadata"),
        (["project", "apollo"], "metadata"),
    ]
    for metadata, field in cases:
        with pytest.raises(ValidationError) as err:
            edge_store.add("Deploy the staging cluster", metadata=metadata, enrich=False)
        assert err.value.field == field, metadata
    assert edge_store.count() == 0


def _labelled(store: MemoryStore) -> None:
    for nid, labels in (("a", {"project": "apollo", "sprint": 7}),
                        ("b", {"project": "apollo", "sprint": 8, "urgent": True}),
                        ("c", {"project": "gemini", "sprint": 7}),
                        ("d", {})):
        store.add(f"Release checklist for the rocket team ({nid})", id=nid, metadata=labels,
                  enrich=False)


def test_search_keeps_notes_matching_every_key(store: MemoryStore) -> None:
    _labelled(store)

    def found(**meta: object) -> set[str]:
        return {r.id for r in store.search("release checklist rocket", limit=10,
                                           expand_links=False, metadata=meta)}

    assert found() == {"a", "b", "c", "d"}
    assert found(project="apollo") == {"a", "b"}
    assert found(project="apollo", sprint=7) == {"a"}
    assert found(sprint=[8, 7]) == {"a", "b", "c"}  # a list: any of
    assert found(sprint="7") == {"a", "c"}  # compared by text form: the CLI's --meta sprint=7
    assert found(urgent=True) == found(urgent="true") == {"b"}
    assert found(project="mercury") == set()
    assert found(missing="x") == set()


def test_the_metadata_filter_runs_in_the_engine_and_on_links(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    with make_store("edge", embedder, clock, candidates=1, link_min_cosine=-1.0) as store:
        store.add("Release checklist for the rocket team", id="best", metadata={"team": "x"},
                  enrich=False)
        store.add("Rocket", id="weak", metadata={"team": "y"}, enrich=False)
        store.add("Fuel pump inspection", id="pump", metadata={"team": "x"}, enrich=False)
        store.index.update_payload("weak", store.agent_id, {"links": ["pump"]})
        query = "release checklist rocket team"
        assert [r.id for r in store.search(query, limit=1, expand_links=False)] == ["best"]
        # one candidate per leg: a filter after the engine's top 1 would leave nothing
        assert [r.id for r in store.search(query, limit=1, expand_links=False,
                                           metadata={"team": "y"})] == ["weak"]
        # the linked note (team x) comes along without the filter, not with it
        assert [(r.id, r.via) for r in store.search("rocket", limit=1, metadata={
            "team": ["x", "y"]})] == [("weak", "match"), ("pump", "link")]
        assert [(r.id, r.via) for r in store.search("rocket", limit=1, metadata={
            "team": "y"})] == [("weak", "match")]


def test_bad_metadata_filters_are_refused(edge_store: MemoryStore) -> None:
    for meta, field in (({"bad key": "x"}, "metadata.bad key"), ({"k": []}, "metadata.k"),
                        ({"k": {"a": 1}}, "metadata.k"), (["k"], "metadata")):
        with pytest.raises(ValidationError) as err:
            edge_store.search("rocket", metadata=meta)  # type: ignore[arg-type]
        assert err.value.field == field, meta


def test_the_engine_indexes_the_new_fields(edge_store: MemoryStore) -> None:
    schema = edge_store.index.backend.shard.info().payload_schema  # type: ignore[attr-defined]
    assert {"meta_kv", "event_ts", "expires_ts"} <= set(schema)


def test_jsonl_import_carries_event_time_metadata_and_ttl(
        edge_store: MemoryStore, tmp_path: Path) -> None:
    rows = [{"text": "Launch review moved to Friday", "event_time": "2025-04-04T09:00:00Z",
             "metadata": {"project": "apollo"}, "ttl": 86400},
            {"text": "Budget approved for the launch", "metadata": {"bad key": 1}}]
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    report = import_file(edge_store, path, enrich=False, skip_invalid=True)
    assert (report.created, report.skipped) == (1, 1)
    assert "metadata.bad key" in " ".join(report.errors) or "bad key" in " ".join(report.errors)
    note = edge_store.list()[0][0]
    assert (note.event_time, note.metadata, note.expires_at) == (
        "2025-04-04T09:00:00+00:00", {"project": "apollo"}, "2026-01-11T12:00:00+00:00")


def test_an_export_carries_the_fields_and_an_import_checks_them(
        edge_store: MemoryStore, embedder: HashingEmbedder, clock: ManualClock,
        tmp_path: Path) -> None:
    edge_store.add("Launch review moved to Friday", id="launch", metadata={"project": "apollo"},
                   event_time="2025-04-04T09:00:00Z", ttl=86400, enrich=False)
    path = tmp_path / "export.jsonl"
    with path.open("w", encoding="utf-8") as out:
        export_store(edge_store, out)
    row = json.loads(path.read_text(encoding="utf-8"))
    bad = {**row, "note": {**row["note"], "id": "bad", "metadata": {"bad key": 1}}}
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(bad) + "\n")
    with make_store("qdrant-local", embedder, clock) as other:
        report = load_export(other, path, skip_invalid=True)
        assert (report.created, report.skipped) == (1, 1) and "bad key" in report.errors[0]
        note = other.get("launch")
        assert (note.event_time, note.metadata, note.expires_at) == (
            "2025-04-04T09:00:00+00:00", {"project": "apollo"}, "2026-01-11T12:00:00+00:00")
        hits = other.search("launch review", since="2025-04-01", metadata={"project": "apollo"})
        assert [(h.id, h.event_time, h.metadata) for h in hits] == [
            ("launch", "2025-04-04T09:00:00+00:00", {"project": "apollo"})]
