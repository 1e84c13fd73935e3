"""``benchmarks.lcm_ingest_bench`` at a tiny size, so the ingest benchmark does not rot."""

from __future__ import annotations

from benchmarks.lcm_ingest_bench import VARIANTS, run


def test_every_variant_stores_the_corpus_and_the_ratios_are_reported() -> None:
    out = run(1200, VARIANTS, repeat=1)
    assert set(out["variants"]) == set(VARIANTS)
    assert all(row["msgs_per_s"] > 0 for row in out["variants"].values())
    assert set(out["ratios"]) == {"after_vs_before", "after_vs_before_cpu", "trigram_share", "words_share",
                                  "both_indexes_share"}
    assert out["variants"]["after"]["hits_rare"] == out["variants"]["before"]["hits_rare"] == 1
