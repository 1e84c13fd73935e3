"""memory_search's ranking fields and its ``min_similarity`` option, through the tool facade."""

from __future__ import annotations

from tools import ToolFacade


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
