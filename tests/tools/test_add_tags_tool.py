"""``memory_add`` takes tags: an agent tags a memory as it stores it, under the same rules as
``memory_update``'s tags and ``amem add --tag`` (``amem.notes.check_tags``)."""

from __future__ import annotations

from tests.tools.conftest import Tenants
from tools import ToolFacade


def test_memory_add_stores_the_given_tags_as_the_notes_enrichment(tenants: Tenants,
                                                                   facade: ToolFacade) -> None:
    out = facade.call("memory_add", {"text": "Alice walks her dog at six every morning",
                                     "tags": ["Morning", "#morning", "dog walks"]})
    assert out["status"] == "created" and out["enriched_by"] == "given"
    note = facade.call("memory_get", {"id": out["id"]})
    assert note["tags"] == ["Morning", "dog walks"]  # one spelling of a tag, as add keeps it
    found = facade.call("memory_search", {"query": "dog", "tags": ["MORNING"]})
    assert [r["id"] for r in found["results"] if r["via"] == "match"] == [out["id"]]
    # stored as the caller's agent: another agent neither finds it nor reads it
    mallory = ToolFacade(tenants.store, None, agent_id=tenants.mallory)
    assert mallory.call("memory_search", {"query": "dog", "tags": ["morning"]})["results"] == []
    assert mallory.call("memory_get", {"id": out["id"]})["error"]["code"] == "not_found"


def test_memory_add_with_new_tags_for_a_stored_text_adds_them(facade: ToolFacade) -> None:
    first = facade.call("memory_add", {"text": "Alice keeps bees on the roof", "tags": ["bees"]})
    again = facade.call("memory_add", {"text": "Alice keeps bees on the roof",
                                       "tags": ["Bees", "roof"]})
    assert again["status"] == "deduplicated" and again["id"] == first["id"]
    assert again["tags_added"] == ["roof"]
    assert facade.call("memory_get", {"id": first["id"]})["tags"] == ["bees", "roof"]


def test_bad_tags_are_refused_by_name_and_nothing_is_stored(tenants: Tenants,
                                                            facade: ToolFacade) -> None:
    before = tenants.store.count(agent_id=tenants.alice)
    for tags in (["#"], "morning", [""], ["x" * 201], [f"t{i}" for i in range(65)], [3]):
        out = facade.call("memory_add", {"text": "Alice plants tulips in October", "tags": tags})
        assert out["error"]["code"] == "invalid_argument", (tags, out)
        # the schema names an item by its place ("tags[0]"), the store the list
        assert out["error"]["field"].split("[")[0] == "tags", (tags, out)
    assert "names no tag" in facade.call(
        "memory_add", {"text": "Alice plants tulips", "tags": [" # "]})["error"]["message"]
    assert tenants.store.count(agent_id=tenants.alice) == before
