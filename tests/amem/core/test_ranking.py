"""The ranking maths on literal lists."""

from __future__ import annotations

import math

import pytest

from amem.ranking import expand_links, heat_boost, rrf


def test_rrf_counts_ranks_from_one_with_k60() -> None:
    fused = dict(rrf([["a", "b"], ["b", "c"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_rrf_orders_best_first_and_ties_by_first_appearance() -> None:
    fused = rrf([["x", "y"], ["y", "x"]], k=60)
    # x and y tie exactly; x was seen first
    assert [item for item, _ in fused] == ["x", "y"]
    assert fused[0][1] == pytest.approx(fused[1][1])
    assert [i for i, _ in rrf([["a", "b", "c"], ["c"]], k=60)] == ["c", "a", "b"]


def test_rrf_weights_scale_each_ranking() -> None:
    fused = dict(rrf([["a"], ["b"]], k=60, weights=[2.0, 0.5]))
    assert fused["a"] == pytest.approx(2 / 61)
    assert fused["b"] == pytest.approx(0.5 / 61)


def test_rrf_repeated_id_counts_once_at_best_rank() -> None:
    assert dict(rrf([["a", "a", "b"]], k=60)) == pytest.approx({"a": 1 / 61, "b": 1 / 63})


def test_rrf_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        rrf([["a"]], k=0)
    with pytest.raises(ValueError):
        rrf([["a"], ["b"]], weights=[1.0])


def test_heat_boost_formula() -> None:
    assert heat_boost(1.0, 0, 0.0) == 1.0
    assert heat_boost(0.5, 9, 1.0) == pytest.approx(0.5 * (1 + 0.002 * math.log(10) / 2))
    assert heat_boost(0.5, 9, 1.0, 0.05) == pytest.approx(0.5 * (1 + 0.05 * math.log(10) / 2))
    # older accesses fade; more retrievals rise
    assert heat_boost(1.0, 9, 30.0) < heat_boost(1.0, 9, 1.0)
    assert heat_boost(1.0, 20, 1.0) > heat_boost(1.0, 2, 1.0)
    # clock skew (negative age) and negative counts are clamped
    assert heat_boost(1.0, -3, -5.0) == 1.0


GRAPH = {"s": ["a", "b"], "a": ["c", "s"], "b": ["d"], "c": ["e"], "d": [], "e": []}


def test_expand_links_two_hops_in_discovery_order() -> None:
    cos = {"a": 0.9, "b": 0.5, "c": 0.3, "d": 0.26, "e": 0.99}
    got = expand_links(["s"], GRAPH.__getitem__, cos.get, hops=2, min_cosine=0.25)
    assert got == ["a", "b", "c", "d"]  # e is three hops away


def test_expand_links_threshold_blocks_and_stops_expansion_through_rejected() -> None:
    cos = {"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.3}
    got = expand_links(["s"], GRAPH.__getitem__, cos.get, hops=2, min_cosine=0.25)
    assert got == ["b", "d"]  # a rejected, so c (only reachable through a) never comes


def test_expand_links_cap_missing_and_seed_handling() -> None:
    cos = {"a": 0.9, "b": 0.9, "c": 0.9, "d": None}
    assert expand_links(["s"], GRAPH.__getitem__, cos.get, max_added=1) == ["a"]
    # d cannot be admitted (None), seeds are never re-added even when linked
    assert expand_links(["s", "a"], GRAPH.__getitem__, cos.get) == ["b", "c"]
    assert expand_links(["s"], GRAPH.__getitem__, cos.get, hops=0) == []
