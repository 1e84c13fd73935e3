"""The ranking maths on literal lists."""

from __future__ import annotations

import math
import random

import pytest

from amem.kernel.fusion import rrf
from amem.ranking import (expand_links, heat_boost, unranked_score, zscore_fusion,
                          zscore_total, zscore_totals)


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


def test_expand_links_orders_a_hop_by_how_many_notes_of_the_hop_before_link_to_it() -> None:
    graph = {"s1": ["x", "y"], "s2": ["y", "y"], "x": ["p"], "y": ["q", "p"], "p": [], "q": []}
    cos = dict.fromkeys("xypq", 0.5)
    # y is linked from both seeds (a repeated link counts once), x from one; then p from x and y
    assert expand_links(["s1", "s2"], graph.__getitem__, cos.get) == ["y", "x", "p", "q"]
    assert expand_links(["s1", "s2"], graph.__getitem__, cos.get, max_added=3) == ["y", "x", "p"]
    assert expand_links(["s1"], graph.__getitem__, cos.get) == ["x", "y", "p", "q"]  # ties


def test_expand_links_cap_missing_and_seed_handling() -> None:
    cos = {"a": 0.9, "b": 0.9, "c": 0.9, "d": None}
    assert expand_links(["s"], GRAPH.__getitem__, cos.get, max_added=1) == ["a"]
    # d cannot be admitted (None), seeds are never re-added even when linked
    assert expand_links(["s", "a"], GRAPH.__getitem__, cos.get) == ["b", "c"]
    assert expand_links(["s"], GRAPH.__getitem__, cos.get, hops=0) == []


def test_zscore_fusion_keeps_how_far_a_top_match_stands_out() -> None:
    # "rare" is BM25's clear top (a rare term) and dense rank 3; "near" is BM25 rank 2 with a
    # weak score and dense rank 1. RRF levels them by rank and picks "near"; z-scores see
    # that BM25's first stands far above the rest.
    bm25 = {"rare": 9.0, "near": 1.0, "x": 0.9, "y": 0.8}
    cos = {"near": 0.86, "x": 0.85, "rare": 0.845, "y": 0.80}
    candidates = ["rare", "near", "x", "y"]
    fused = zscore_fusion(candidates, [bm25, cos], [0.4, 0.6], [0.0, 0.0])
    assert fused[0][0] == "rare"
    assert [i for i, _ in rrf([["rare", "near", "x", "y"], ["near", "x", "rare", "y"]])][0] == "near"
    assert all(0.0 < s < 1.0 for _, s in fused)


def test_zscore_fusion_formula_missing_scores_and_constant_columns() -> None:
    fused = dict(zscore_fusion(["a", "b"], [{"a": 3.0}, {"a": 1.0, "b": 1.0}], [0.4, 0.6],
                               [1.0, 0.0]))
    # column 1: a=3, b=1 (missing) -> z = +1, -1; column 2 is constant: it cannot decide
    assert fused["a"] == pytest.approx(1 / (1 + math.exp(-0.4)))
    assert fused["b"] == pytest.approx(1 / (1 + math.exp(0.4)))
    # a lone candidate, or all equal: 0.5, in the candidates' order (repeats count once)
    assert zscore_fusion(["q", "p", "q"], [{"q": 1.0, "p": 1.0}], [1.0], [0.0]) == \
        [("q", 0.5), ("p", 0.5)]
    assert zscore_fusion([], [{}], [1.0], [0.0]) == []


def test_zscore_fusion_weights_decide_between_disagreeing_rankings() -> None:
    cols = [{"a": 2.0, "b": 1.0}, {"a": 0.1, "b": 0.9}]
    assert zscore_fusion(["a", "b"], cols, [0.7, 0.3], [0.0, 0.0])[0][0] == "a"
    assert zscore_fusion(["a", "b"], cols, [0.3, 0.7], [0.0, 0.0])[0][0] == "b"


def test_zscore_fusion_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="one weight"):
        zscore_fusion(["a"], [{"a": 1.0}], [1.0, 1.0], [0.0])
    with pytest.raises(ValueError, match="weights"):
        zscore_fusion(["a"], [{"a": 1.0}], [-1.0], [0.0])
    with pytest.raises(ValueError, match="finite"):
        zscore_fusion(["a"], [{"a": float("nan")}], [1.0], [0.0])


def test_fusion_totals_are_what_a_note_scored_alone_gets_bit_for_bit() -> None:
    # Step 4b reuses fusion's totals for the candidates and scores the neighbours it brings
    # in one at a time (zscore_total with fusion's moments): the two must agree exactly, or a
    # neighbour equal to a candidate would rank apart from it.
    rng = random.Random(7)
    for _ in range(50):
        ids = [f"n{i}" for i in range(rng.randint(1, 120))]
        bm25 = {i: rng.uniform(0, 20) for i in ids if rng.random() < 0.5}
        cos = {i: round(rng.uniform(0.6, 0.95), 6) for i in ids}
        columns, weights, missing = [bm25, cos], [0.4, 0.6], [0.0, min(cos.values())]
        totals, moments = zscore_totals(ids + ids[:3], columns, weights, missing)
        assert list(totals) == ids  # the candidates' order, repeats dropped
        for pid in ids:
            assert totals[pid] == zscore_total(pid, columns, weights, missing, moments)
        assert zscore_fusion(ids, columns, weights, missing) == [
            (pid, 1.0 / (1.0 + math.exp(-t))) for pid, t in
            sorted(totals.items(), key=lambda kv: (-1.0 / (1.0 + math.exp(-kv[1])),
                                                    ids.index(kv[0])))]


def test_unranked_score_is_zero_below_a_full_list_and_the_cut_off_otherwise() -> None:
    assert unranked_score([5.0, 2.0], pool=50) == 0.0  # every note sharing a term came back
    assert unranked_score([5.0, 2.0, 1.5], pool=3) == 1.5  # the rest scored at most 1.5
    assert unranked_score([], pool=3) == 0.0
    with pytest.raises(ValueError):
        unranked_score([1.0], pool=0)


def test_zscore_total_with_moments_equals_the_fusion() -> None:
    from amem.ranking import logistic, zscore_total

    candidates = ["a", "b", "c", "d"]
    columns = [{"a": 7.0, "b": 2.0, "c": 1.0}, {"a": 0.8, "b": 0.9, "c": 0.7, "d": 0.75}]
    fused = dict(zscore_fusion(candidates, columns, [0.4, 0.6], [0.5, 0.0]))
    moments = zscore_totals(candidates, columns, [0.4, 0.6], [0.5, 0.0])[1]
    assert moments[0] == pytest.approx((2.625, math.sqrt(((7 - 2.625) ** 2 + (2 - 2.625) ** 2
                                                         + (1 - 2.625) ** 2
                                                         + (0.5 - 2.625) ** 2) / 4)))
    for item in candidates:
        z = zscore_total(item, columns, [0.4, 0.6], [0.5, 0.0], moments)
        assert logistic(z) == pytest.approx(fused[item])
    # a note scored after the fusion lands on the candidates' scale, not its own
    assert zscore_total("e", [{}, {"e": 0.9}], [0.4, 0.6], [0.5, 0.0], moments) == \
        pytest.approx(0.4 * (0.5 - 2.625) / moments[0][1]
                      + 0.6 * (0.9 - moments[1][0]) / moments[1][1])
    with pytest.raises(ValueError):
        zscore_totals(["a"], [{"a": 1.0}], [1.0], [0.0, 0.0])
    assert logistic(-800.0) == pytest.approx(0.0) and logistic(800.0) == 1.0


def test_time_neighbours_takes_span_each_side_within_the_gap_never_the_same_instant() -> None:
    from amem.ranking import time_neighbours

    times = {"t0": 100.0, "t1": 101.0, "t2": 102.0, "t3": 103.0, "t4": 104.0, "t5": 105.0,
             "twin": 102.0, "far": 5000.0}
    # seed t2: t1, t0 before; t3, t4 after; "twin" shares its instant: no order, never taken
    got = time_neighbours(times, ["t2"], span=2, gap=60.0)
    assert got == {"t1": ["t2"], "t0": ["t2"], "t3": ["t2"], "t4": ["t2"]}
    # the gap ends the walk: "far" is next after t5 in time but 4895 s away
    assert time_neighbours(times, ["t5"], span=2, gap=60.0) == {"t4": ["t5"], "t3": ["t5"]}
    # a note next to two seeds lists both, in the seeds' order; notes of one instant come
    # together (t2 and "twin" are both right before t3); a seed without a time: none
    both = time_neighbours(times, ["t3", "t1", "missing"], span=1, gap=60.0)
    assert both["t2"] == ["t3", "t1"] and both["twin"] == ["t3", "t1"]
    assert "missing" not in both and set(both) == {"t2", "twin", "t4", "t0"}
    assert time_neighbours(times, ["t2"], span=0, gap=60.0) == {}
    # a bulk write (more than BULK_INSTANT notes at 200): its notes have no neighbours, the
    # walk from a later note stops at it, and an instant named bulk counts as one
    from amem.ranking import BULK_INSTANT
    bulk = {f"imp{i}": 200.0 for i in range(BULK_INSTANT + 1)}
    later = {**bulk, "x": 100.0, "added": 205.0, "next": 206.0}
    assert time_neighbours(later, ["imp0"], span=2, gap=60.0) == {}
    assert time_neighbours(later, ["added"], span=2, gap=60.0) == {"next": ["added"]}
    few = {"imp0": 200.0, "added": 205.0}  # the window read one of them: said bulk by the caller
    assert time_neighbours(few, ["imp0"], span=2, gap=60.0) == {"added": ["imp0"]}
    assert time_neighbours(few, ["imp0"], span=2, gap=60.0, bulk={200.0}) == {}
    with pytest.raises(ValueError):
        time_neighbours(times, ["t2"], span=-1, gap=60.0)
    with pytest.raises(ValueError):
        time_neighbours(times, ["t2"], span=1, gap=math.nan)


def test_neighbour_lift_raises_a_note_by_its_best_neighbour_above_the_mean() -> None:
    from amem.ranking import logistic, neighbour_lift

    base = {"question": 2.0, "other": 0.5, "answer": 0.1, "weak": 0.3, "below": -1.0}
    sources = {"answer": ["question"], "weak": ["below"], "below": ["question"]}
    lifted = neighbour_lift(base, sources, 0.5)
    score = dict(lifted)
    assert score["answer"] == pytest.approx(logistic(0.1 + 0.5 * 2.0))  # 1.1: over "other"
    assert [item for item, _ in lifted][:3] == ["question", "answer", "other"]
    assert score["weak"] == pytest.approx(logistic(0.3))  # a neighbour below the mean: no push
    assert score["below"] == pytest.approx(logistic(0.0))
    # weight 0 is the fused ranking itself, ties in base order
    assert [item for item, _ in neighbour_lift({"x": 0.0, "y": 0.0}, {"y": ["x"]}, 0.0)] == \
        ["x", "y"]
    with pytest.raises(ValueError):
        neighbour_lift(base, sources, -0.1)


def test_diversify_passes_over_a_near_repeat_and_keeps_the_scores_in_order() -> None:
    from amem.ranking import diversify

    ranked = [("a", 0.9), ("a2", 0.85), ("b", 0.8), ("c", 0.3)]
    names = [item for item, _ in ranked]
    cos = {frozenset(("a", "a2")): 0.99}
    similar = [[1.0 if x == y else cos.get(frozenset((x, y)), 0.1) for y in names]
               for x in names]

    out = diversify(ranked, similar, keep=0.7, penalty=10.0)
    # a2 repeats a: b and even the weak c go before it; the scores stay the input's, in order
    assert [item for item, _ in out] == ["a", "b", "c", "a2"]
    assert [score for _, score in out] == [0.9, 0.85, 0.8, 0.3]
    assert diversify(ranked, similar, keep=1.0, penalty=10.0) == ranked
    assert diversify(ranked, similar, keep=0.7, penalty=0.0) == ranked  # no penalty: as ranked
    two = [row[:2] for row in similar[:2]]
    assert diversify(ranked[:2], two, keep=0.0, penalty=10.0) == ranked[:2]
    for keep, penalty in ((1.5, 1.0), (0.5, -1.0), (0.5, math.inf)):
        with pytest.raises(ValueError):
            diversify(ranked, similar, keep=keep, penalty=penalty)
    with pytest.raises(ValueError, match="square"):  # a table that does not fit the ranking
        diversify(ranked, two, keep=0.7, penalty=1.0)


def test_replies_first_moves_the_reply_told_next_into_the_question_place() -> None:
    from amem.ranking import replies_first

    times = {"q": 10.0, "a": 11.0, "x": 5.0, "later": 12.0, "far": 5000.0}
    asks = {"q": True}
    # the reply told next (a, 1 s later) takes the question's place; the question and the note
    # between move down one
    assert replies_first(["q", "x", "a", "later"], asks, times, 1800.0, 3, 5) == [
        "a", "q", "x", "later"]
    # the nearest later note among the first `reach` is the reply, not a farther one
    assert replies_first(["q", "later", "a"], asks, times, 1800.0, 3, 5) == ["a", "q", "later"]
    # beyond reach, beyond the gap, earlier, or a question itself: nothing moves
    assert replies_first(["q", "x", "a"], asks, times, 1800.0, 3, 2) == ["q", "x", "a"]
    assert replies_first(["q", "far"], asks, times, 1800.0, 3, 5) == ["q", "far"]
    assert replies_first(["q", "a"], {"q": True, "a": True}, times, 1800.0, 3, 5) == ["q", "a"]
    assert replies_first(["a", "q"], {"a": True}, times, 1800.0, 3, 5) == ["a", "q"]
    # only the first `head` questions hand their place on; a note without a time never moves
    assert replies_first(["x", "q", "a"], asks, times, 1800.0, 1, 5) == ["x", "q", "a"]
    assert replies_first(["q", "a"], asks, {"a": 11.0}, 1800.0, 3, 5) == ["q", "a"]
    with pytest.raises(ValueError):
        replies_first(["q", "q"], asks, times, 1800.0, 3, 5)
    with pytest.raises(ValueError):
        replies_first(["q"], asks, times, -1.0, 3, 5)


def test_step_back_lowers_marked_notes_and_keeps_the_scores_in_place() -> None:
    from amem.ranking import step_back

    ranked = [("q", 0.80), ("a", 0.75), ("b", 0.40), ("c", 0.10)]
    # logit(0.8) - 1.5 = -0.11 < logit(0.75) = 1.10, > logit(0.4) = -0.41: q falls one place
    moved = step_back(ranked, {"q"}, 1.5)
    assert [pid for pid, _ in moved] == ["a", "q", "b", "c"]
    assert [s for _, s in moved] == [0.80, 0.75, 0.40, 0.10]
    assert [pid for pid, _ in step_back(ranked, {"q"}, 10.0)] == ["a", "b", "c", "q"]
    assert step_back(ranked, {"q"}, 0.0) == ranked and step_back(ranked, set(), 2.0) == ranked
    with pytest.raises(ValueError):
        step_back(ranked, {"q"}, -1.0)


def _ranked(*logits: float) -> list[tuple[str, float]]:
    from amem.ranking import logistic

    return [(f"n{i}", logistic(z)) for i, z in enumerate(logits)]


def test_link_votes_lift_a_note_by_the_sum_of_its_voters_above_the_mean() -> None:
    from amem.ranking import link_votes, logistic

    ranked = _ranked(3.0, 2.0, 1.0, 0.5, 0.2, -0.5)
    # n5 is linked from n0 (3.0) and n1 (2.0) and from n4's... weak n5 itself (left out)
    out = dict(link_votes(ranked, {"n5": ["n0", "n1", "n5"], "n4": ["n2"]}, 0.1, keep=1))
    assert out["n5"] == pytest.approx(logistic(-0.5 + 0.1 * (3.0 + 2.0)))
    assert out["n4"] == pytest.approx(logistic(0.2 + 0.1 * 1.0))
    # a voter below the mean adds nothing; notes without voters keep their scores
    assert dict(link_votes(ranked, {"n3": ["n5"]}, 0.5, keep=1)) == dict(ranked)
    assert out["n1"] == ranked[1][1] and out["n0"] == ranked[0][1]


def test_link_votes_never_lift_past_the_kept_head_nor_lift_the_head() -> None:
    from amem.ranking import link_votes

    ranked = _ranked(3.0, 2.0, 1.0, 0.5, 0.0)
    voters = {"n4": ["n0", "n1", "n2"], "n1": ["n0"]}  # n4 would gain 0.6 * 6 = 3.6
    lifted = link_votes(ranked, voters, 0.6, keep=2)
    assert [item for item, _ in lifted][:3] == ["n0", "n1", "n4"]  # stops under the 2nd
    assert dict(lifted)["n1"] == ranked[1][1]  # the head is not lifted
    assert dict(lifted)["n4"] < ranked[1][1]
    # keep 1: n1, lifted by n0, may not pass n0 either
    assert [item for item, _ in link_votes(ranked, voters, 5.0, keep=1)][0] == "n0"


def test_link_votes_off_and_bad_arguments() -> None:
    from amem.ranking import link_votes

    ranked = _ranked(1.0, 0.5, 0.0)
    assert link_votes(ranked, {"n2": ["n0"]}, 0.0, keep=1) == ranked
    assert link_votes(ranked, {"n2": ["n0"]}, 1.0, keep=3) == ranked  # all of it is the head
    with pytest.raises(ValueError):
        link_votes(ranked, {}, -0.1, keep=1)
    with pytest.raises(ValueError):
        link_votes(ranked, {}, math.inf, keep=1)
    with pytest.raises(ValueError):
        link_votes(ranked, {}, 0.1, keep=0)
