"""``benchmarks.lcm_ingest_bench`` at a tiny size, so the ingest benchmark does not rot."""

from __future__ import annotations

from benchmarks.lcm_ingest_bench import VARIANTS, run


def test_every_variant_stores_the_corpus_and_the_ratios_are_reported() -> None:
    out = run(1200, VARIANTS, repeat=1)
    assert set(out["variants"]) == set(VARIANTS)
    assert all(row["msgs_per_s"] > 0 for row in out["variants"].values())
    assert set(out["ratios"]) == {"after_vs_before", "after_vs_before_cpu", "trigram_share", "words_share",
                                  "both_indexes_share", "deferred_vs_inline", "deferred_vs_inline_cpu"}
    rows = out["variants"]
    assert rows["after"]["hits_rare"] == rows["before"]["hits_rare"] == rows["inline"]["hits_rare"] == 1
    assert rows["deferred"]["hits_rare"] == 1 and rows["deferred"]["trigram_debt"] == 1200
    assert rows["deferred"]["pay_msgs_per_s"] > 0
