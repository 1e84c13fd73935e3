"""heat_bench's usage variant on a tiny corpus: the agent's opens lift the repeated question."""

from __future__ import annotations

from amem.embed.hashing import HashingEmbedder
from benchmarks.datasets import Corpus, Doc, Query
from benchmarks.heat_bench import VARIANTS, run_one

DOCS = ["Carol talked about the budget for the new office",
        "the budget for the office party is small",
        "Carol reviewed the budget spreadsheet on Monday",
        "Dave repaired the bike",
        "Erin baked bread for the neighbours"]


def test_usage_heat_lifts_only_the_repeated_question() -> None:
    corpus = Corpus("c", [Doc(f"D{i}", t) for i, t in enumerate(DOCS)],
                    [Query("what did Carol say about the budget?", {"D2"}, "1"),
                     Query("who repaired the bike?", {"D3"}, "1")])
    embedder = HashingEmbedder(dim=64)
    counts = run_one(corpus, embedder, VARIANTS["heat on, counts only"], {})
    usage = run_one(corpus, embedder, VARIANTS["heat on, counts + usage (default)"], {})
    # the first pass is the same: nothing was opened before it
    assert [(r["R@10"], r["MRR"]) for r in usage["independent"]] == \
        [(r["R@10"], r["MRR"]) for r in counts["independent"]]
    assert counts["independent"][0]["MRR"] < 1.0  # the evidence was not first ...
    assert usage["repeated"][0]["MRR"] == 1.0     # ... and is first once it was opened
    assert counts["repeated"][0]["MRR"] == counts["independent"][0]["MRR"]
