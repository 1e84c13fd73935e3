"""Pure parts: the link graph's rewrites and the cluster planner."""

from __future__ import annotations

import numpy as np

from amem.consolidate import plan_clusters
from amem.consolidate.merge import informativeness
from amem.consolidate.graph import LinkGraph

from .conftest import angle_vector


def test_redirect_points_linkers_at_survivor_without_duplicates_or_self_links() -> None:
    graph = LinkGraph.from_links({"s": ["l", "x"], "l": ["s", "y"], "x": ["l", "s"], "y": ["l"]})
    changed = graph.redirect("l", "s")
    # x linked to both: one link remains; s loses its link to l (it would be a self-link)
    assert changed == {"s": ["x"], "x": ["s"], "y": ["s"]}
    assert graph.linkers("l") == []


def test_absorbed_links_union_without_the_pair() -> None:
    graph = LinkGraph.from_links({"s": ["a", "l"], "l": ["b", "s", "a"]})
    assert graph.absorbed_links("s", "l") == ["a", "b"]


def test_repair_follows_merges_and_drops_missing_targets() -> None:
    graph = LinkGraph.from_links({"a": ["m", "gone", "b", "a"], "b": ["a"]})
    merged = {"m": "b"}
    changed = graph.repair(lambda t: merged.get(t, t if t in ("a", "b") else None))
    assert changed == {"a": ["b"]}
    assert graph.dangling(lambda t: t in ("a", "b")) == []


def test_set_links_drops_self_and_repeats() -> None:
    graph = LinkGraph()
    graph.set_links("a", ["a", "b", "b", "c"])
    assert graph.links("a") == ["b", "c"]
    assert graph.linkers("b") == ["a"]
    graph.remove("a")
    assert graph.linkers("b") == []


def keys_for(ids: list[str]) -> dict[str, tuple[object, ...]]:
    return {i: informativeness("x " * (10 - n), 0, 0, "2026", i) for n, i in enumerate(ids)}


def test_a_chain_is_not_folded_into_one_note() -> None:
    # a~b (0.8) and b~c (0.8) but a~c only 0.28: c must not end up inside a
    vec = {"a": angle_vector(0), "b": angle_vector(36.87), "c": angle_vector(73.74)}
    pairs = [("a", "b", 0.8), ("b", "c", 0.8)]
    plan = plan_clusters(pairs, vec, keys_for(["a", "b", "c"]), 0.75)
    assert plan == [("a", [("b", plan[0][1][0][1])])]
    assert abs(plan[0][1][0][1] - 0.8) < 1e-4


def test_a_tight_cluster_merges_into_its_most_informative_member() -> None:
    vec = {"a": angle_vector(0), "b": angle_vector(10), "c": angle_vector(20)}
    pairs = [("a", "b", 0.98), ("b", "c", 0.98), ("a", "c", 0.94)]
    keys = keys_for(["c", "a", "b"])  # c is the most informative
    plan = plan_clusters(pairs, vec, keys, 0.75)
    assert [s for s, _ in plan] == ["c"]
    assert [loser for loser, _ in plan[0][1]] == ["b", "a"]  # best first


def test_informativeness_prefers_more_words_then_older_then_smaller_id() -> None:
    assert informativeness("one two three", 0, 0, "2026", "b") > informativeness("one two", 9, 9, "2025", "a")
    assert informativeness("same words", 0, 0, "2025", "z") > informativeness("same words", 0, 0, "2026", "a")
    assert informativeness("same words", 0, 0, "2026", "a") > informativeness("same words", 0, 0, "2026", "b")


def test_no_pairs_no_plan() -> None:
    assert plan_clusters([], {"a": np.ones(2)}, {"a": (1,)}, 0.75) == []
