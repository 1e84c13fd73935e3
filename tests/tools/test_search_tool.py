"""memory_search's ranking fields and its ``min_similarity`` option, through the tool facade."""

from __future__ import annotations

from tools import ToolFacade

from .conftest import Tenants


def test_search_tool_returns_score_rrf_and_found_by(facade: ToolFacade) -> None:
    out = facade.call("memory_search", {"query": "what does Alice drink in the morning"})
    first = out["results"][0]
    assert {"score", "rrf", "similarity", "via", "found_by"} <= set(first)
    assert first["found_by"] in ("bm25", "dense", "both")
    scores = [r["score"] for r in out["results"] if r["via"] == "match"]
    assert scores == sorted(scores, reverse=True)


def test_search_tool_min_similarity_can_answer_nothing(facade: ToolFacade) -> None:
    everything = facade.call("memory_search", {"query": "green tea", "limit": 4})
    assert everything["matches"] >= 2
    best = max(r["similarity"] for r in everything["results"])
    out = facade.call("memory_search", {"query": "green tea", "limit": 4, "minSimilarity": best})
    assert out["matches"] >= 1 and all(r["similarity"] >= best for r in out["results"])
    none = facade.call("memory_search", {"query": "green tea", "minSimilarity": 1.0})
    assert none["results"] == [] and none["matches"] == 0


def test_search_tool_rejects_a_bad_min_similarity(facade: ToolFacade) -> None:
    out = facade.call("memory_search", {"query": "green tea", "minSimilarity": 3})
    assert out["error"]["code"] == "invalid_argument"
    assert out["error"]["field"] == "minSimilarity"


def test_search_tool_filters_by_tag_any_of(facade: ToolFacade, tenants: Tenants) -> None:
    store = tenants.store
    store.add("Ana's sourdough starter needs feeding twice a day", tags=["baking"],
              agent_id=tenants.alice, enrich=False)
    store.add("The rye bread recipe uses a sourdough starter too", tags=["recipes"],
              agent_id=tenants.alice, enrich=False)
    store.add("Sourdough starter jars are on the top shelf", agent_id=tenants.alice,
              enrich=False)
    store.add("Mallory's sourdough starter", tags=["baking"], agent_id=tenants.mallory,
              enrich=False)
    everything = facade.call("memory_search", {"query": "sourdough starter", "limit": 10})
    assert len({r["content"] for r in everything["results"] if "ourdough" in r["content"]}) == 3
    one = facade.call("memory_search", {"query": "sourdough starter", "limit": 10,
                                        "tags": ["baking"]})
    assert [r["content"] for r in one["results"] if r["via"] == "match"] == [
        "Ana's sourdough starter needs feeding twice a day"]  # never another tenant's
    both = facade.call("memory_search", {"query": "sourdough starter", "limit": 10,
                                         "tags": ["baking", "recipes"]})
    assert all(set(r["tags"]) & {"baking", "recipes"} for r in both["results"]
               if r["via"] == "match") and both["matches"] == 2
    bad = facade.call("memory_search", {"query": "sourdough", "tags": [""]})
    assert bad["error"]["code"] == "invalid_argument"


def test_search_tool_tags_match_any_case_and_say_so(facade: ToolFacade, tenants: Tenants) -> None:
    """``tags`` compares by key (``amem.notefields.tag_key``): the tool's callers are told, and
    a note tagged "Baking" is found by "baking" and "#BAKING", shown as stored."""
    store = tenants.store
    store.add("Ana's sourdough starter needs feeding twice a day", tags=["Baking"],
              agent_id=tenants.alice, enrich=False)
    store.add("Mallory's sourdough starter", tags=["baking"], agent_id=tenants.mallory,
              enrich=False)
    for asked in (["baking"], ["#BAKING"]):
        found = facade.call("memory_search", {"query": "sourdough starter", "limit": 10,
                                              "tags": asked})
        assert [(r["content"], r["tags"]) for r in found["results"] if r["via"] == "match"] == [
            ("Ana's sourdough starter needs feeding twice a day", ["Baking"])], asked
    (tool,) = [t for t in facade.list_tools() if t["name"] == "memory_search"]
    assert "case-insensitive" in tool["input_schema"]["properties"]["tags"]["description"]
    bad = facade.call("memory_search", {"query": "sourdough", "tags": ["#"]})
    assert bad["error"]["code"] == "invalid_argument" and "names no tag" in bad["error"]["message"]
