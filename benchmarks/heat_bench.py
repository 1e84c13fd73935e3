"""Does the heat boost help questions that come back, and cost nothing on the others?

    python -m benchmarks.heat_bench --cache benchmarks/out/embcache --out heat.json

Each LoCoMo dev conversation is one store (notes as in ``benchmarks.retrieval``, enrichment
off). Its questions (categories 1-4) are asked in an order where questions that share an
evidence turn follow each other, then all of them again. Every question is scored (R@10, MRR)
in one of three groups:

* ``independent``: first pass, no earlier question shared an evidence turn with it;
* ``related``: first pass, an earlier question shared an evidence turn (heat may help);
* ``repeated``: the second pass (the same question asked again).

The same sequence runs with heat off, with retrieval-count heat only (``usage_factor`` 0) and
with the default (counts + usage heat, ``amem.search.usage``), on a clock that stands still (every
retrieval is "today": the strongest boost). After each search the simulated agent opens
(``MemoryStore.get``) the notes of its top 10 that hold the question's evidence, as an agent
that reads the note it used would; it never opens a wrong note, so usage heat's figures are an
upper bound. Heat should raise ``related`` or ``repeated`` and leave ``independent`` where
heat off has it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed import make_embedder

from .datasets import DEFAULT_LOCOMO, Corpus, load_locomo
from .embcache import CachedEmbedder
from .metrics import mean, mrr, recall_at


def ordered(corpus: Corpus) -> list[tuple[int, bool]]:
    """(query index, related) in an order that keeps questions sharing evidence together."""
    queries = [q for q in corpus.queries if q.category != "5"]
    index = [i for i, q in enumerate(corpus.queries) if q.category != "5"]
    parent = list(range(len(queries)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, q in enumerate(queries):
        for turn in sorted(q.relevant):
            if turn in owner:
                parent[find(i)] = find(owner[turn])
            owner.setdefault(turn, i)
    groups: dict[int, list[int]] = {}
    for i in range(len(queries)):
        groups.setdefault(find(i), []).append(i)
    out: list[tuple[int, bool]] = []
    for members in sorted(groups.values(), key=lambda m: m[0]):
        seen: set[str] = set()
        for i in members:
            out.append((index[i], bool(seen & queries[i].relevant)))
            seen |= queries[i].relevant
    return out


#: the variants compared, as config overrides
VARIANTS: dict[str, dict[str, Any]] = {
    "heat off": {"heat": False},
    "heat on, counts only": {"heat": True, "usage_factor": 0.0},
    "heat on, counts + usage (default)": {"heat": True},
}


def run_one(corpus: Corpus, embedder: Any, variant: dict[str, Any],
            overrides: dict[str, Any]) -> dict[str, list[dict[str, float]]]:
    config = load_config(overrides={**variant, **overrides, "link_expansion": False})
    rows: dict[str, list[dict[str, float]]] = {"independent": [], "related": [], "repeated": []}
    with MemoryStore(":memory:", config=config, embedder=embedder,
                     clock=ManualClock("2024-01-01T00:00:00+00:00")) as store:
        store.add_many([{"text": f"[{d.date_label}] {d.text}" if d.date_label else d.text,
                         "id": d.id} for d in corpus.docs], enrich=False)
        sequence = ordered(corpus)
        for second in (False, True):
            for qi, related in sequence:
                query = corpus.queries[qi]
                started = time.perf_counter()
                ranked = [h.id for h in store.search(query.text, limit=10)]
                elapsed_ms = 1000 * (time.perf_counter() - started)
                group = "repeated" if second else ("related" if related else "independent")
                rows[group].append({"R@10": recall_at(ranked, query.relevant, 10),
                                    "MRR": mrr(ranked, query.relevant), "ms": elapsed_ms})
                for note_id in ranked:  # the agent reads the notes that answered
                    if note_id in query.relevant:
                        store.get(note_id)
    return rows


def run(data: Path, embedder_name: str, cache: Path | None,
        overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    embedder = CachedEmbedder(make_embedder(embedder_name), cache)
    result: dict[str, Any] = {}
    try:
        for name, variant in VARIANTS.items():
            rows: dict[str, list[dict[str, float]]] = {}
            for corpus in load_locomo(data):
                for group, scored in run_one(corpus, embedder, variant, overrides or {}).items():
                    rows.setdefault(group, []).extend(scored)
            result[name] = {g: mean(r) for g, r in rows.items()}
    finally:
        embedder.save()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.heat_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--heat-factor", type=float, help="the config's heat_factor")
    parser.add_argument("--usage-threshold", type=float, help="the config's usage_threshold")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.heat_factor is not None:
        overrides["heat_factor"] = args.heat_factor
    if args.usage_threshold is not None:
        overrides["usage_threshold"] = args.usage_threshold
    result = run(args.data, args.embedder, args.cache, overrides)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print("| heat | " + " | ".join(f"{g} R@10 | {g} MRR" for g in result["heat off"]) + " |")
    for name, groups in result.items():
        print(f"| {name} | " + " | ".join(f"{m['R@10']:.3f} | {m['MRR']:.3f}"
                                          for m in groups.values()) + " |")
    print("n: " + ", ".join(f"{g} {m['n']}" for g, m in result["heat off"].items()))
    # the variants run one after another, not interleaved: a rough cost, not a benchmark
    print("mean search ms (repeated): " + ", ".join(
        f"{name} {groups['repeated']['ms']:.1f}" for name, groups in result.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
