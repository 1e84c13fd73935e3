"""The retrieval benchmark reads multi-hop recall per conversation and half, tool list vs matches."""

from __future__ import annotations

from benchmarks.datasets import Corpus, Query
from benchmarks.retrieval import multi_hop, parse_args


def test_multi_hop_parts_compare_the_tool_list_with_as_many_matches() -> None:
    corpus = Corpus("conv-x", queries=[
        Query("which trips?", {"t1", "t9"}, "1"),
        Query("when?", {"t2"}, "2"),  # not multi-hop: counted for the halves' order only
        Query("which pets?", {"p1", "p2"}, "1"),
        Query("adversarial", {"z"}, "5")])  # never scored
    matches = [f"m{i}" for i in range(10)]
    rankings = {
        "store": [[["t1", *matches, "t9"], ["t2"], ["p1", *matches, "p2"], []]],
        "tool@10": [[["t1", *matches[:9], "t9"], ["t2"], ["p1", *matches[:9], "x"], []]],
        "tool@5": [[["t1", "t9"], ["t2"], ["p1"], []]],
    }
    out = multi_hop([corpus], rankings)
    # the tool shows the second trip turn among its 11 notes; the store's first 11 lack it
    assert out["tool@10"]["conv-x"]["R@list"] == 0.75 and out["store"]["conv-x"]["R@list"] == 0.5
    assert out["store"]["conv-x"]["R@10"] == 0.5 and out["tool@5"]["conv-x"]["R@10"] == 0.75
    # the halves alternate over the scored questions (categories 1-4): both trips fall in "a"
    assert out["tool@10"]["a"] == {"R@10": 0.5, "R@list": 0.75, "n": 2}
    assert "b" not in out["tool@10"]
    assert multi_hop([corpus], {"store": rankings["store"]}) == {}  # without --links: nothing
    assert parse_args(["locomo", "--link-pool", "0"]).link_pool == 0


def test_every_store_setting_is_an_option_and_a_config_field() -> None:
    """``STORE_SETTINGS`` names the config fields a run may override, each by the option of
    the same name; one without its option would fail every run at ``getattr``."""
    from dataclasses import fields

    from amem.config import AmemConfig
    from benchmarks.retrieval import STORE_SETTINGS

    args = parse_args(["locomo"])
    known = {f.name for f in fields(AmemConfig)}
    for name in STORE_SETTINGS:
        assert name in known and getattr(args, name) is None, name
    given = parse_args(["locomo", "--link-lift", "0", "--link-lift-seeds", "8",
                        "--link-lift-keep", "2"])
    assert (given.link_lift, given.link_lift_seeds, given.link_lift_keep) == (0.0, 8, 2)
