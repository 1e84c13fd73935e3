"""Offline enrichment throughput: notes per second on real LoCoMo turns and CMRC 2018 sentences.

    python -m benchmarks.enrich_bench                  # every LoCoMo turn and CMRC sentence
    python -m benchmarks.enrich_bench --limit 300      # a quick run
    python -m benchmarks.enrich_bench --out benchmarks/out/enrich.json

For each corpus it reports the cold start (the first note, which loads jieba's dictionary for
Chinese), bulk throughput (median of ``--repeat`` passes over every text), and per-note latency
p50/p95/max, plus link verification and evolution timings on the same texts. These figures are
the enrichment side of the import benchmark's ratio (enriched import against the raw embedder).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from amem.enrich import NoteView, OfflineEnricher

from .datasets import DEFAULT_CMRC, DEFAULT_LOCOMO, load_cmrc, load_locomo


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(name: str, texts: list[str], repeat: int) -> dict[str, Any]:
    enricher = OfflineEnricher()
    start = time.perf_counter()
    enricher.enrich(texts[0])
    cold = time.perf_counter() - start
    passes = []
    latencies: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for text in texts:
            t = time.perf_counter()
            enricher.enrich(text)
            latencies.append(time.perf_counter() - t)
        passes.append(time.perf_counter() - t0)
    per_pass = statistics.median(passes)
    # link verification (6 candidates, mid cosine: the rule has to read each) and evolution (3 neighbours)
    sample = texts[: min(len(texts), 200)]
    t0 = time.perf_counter()
    for i, text in enumerate(sample):
        cands = [(str(j), sample[(i + j) % len(sample)], 0.5) for j in range(1, 7)]
        enricher.verify_links(text, cands)
    links_ms = (time.perf_counter() - t0) / len(sample) * 1000
    t0 = time.perf_counter()
    for i, text in enumerate(sample):
        note = NoteView("new", text, keywords=enricher.enrich(text).keywords)
        nbs = [NoteView(str(j), sample[(i + j) % len(sample)]) for j in range(1, 4)]
        enricher.evolve(note, nbs)
    evolve_ms = (time.perf_counter() - t0) / len(sample) * 1000
    return {
        "corpus": name,
        "notes": len(texts),
        "mean_chars": round(sum(map(len, texts)) / len(texts), 1),
        "cold_first_note_s": round(cold, 3),
        "notes_per_s": round(len(texts) / per_pass, 1),
        "p50_ms": round(_percentile(latencies, 0.5) * 1000, 3),
        "p95_ms": round(_percentile(latencies, 0.95) * 1000, 3),
        "max_ms": round(max(latencies) * 1000, 3),
        "verify_links_6_ms": round(links_ms, 3),
        "enrich_plus_evolve_3_ms": round(evolve_ms, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--cmrc", default=str(DEFAULT_CMRC))
    parser.add_argument("--limit", type=int, default=0, help="texts per corpus (0 = all)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    english = [d.text for corpus in load_locomo(args.locomo) for d in corpus.docs]
    chinese = [d.text for corpus in load_cmrc(args.cmrc) for d in corpus.docs]
    if args.limit:
        english, chinese = english[: args.limit], chinese[: args.limit]
    results = [measure("locomo-turns (English)", english, args.repeat),
               measure("cmrc2018-sentences (Chinese)", chinese, args.repeat)]
    report = {"machine": platform.platform(), "python": platform.python_version(),
              "load_avg": os.getloadavg(), "results": results}
    for r in results:
        print(f"{r['corpus']:<30} {r['notes']:>6} notes  {r['notes_per_s']:>8.1f} notes/s  "
              f"p50 {r['p50_ms']:.2f} ms  p95 {r['p95_ms']:.2f} ms  cold {r['cold_first_note_s']:.2f} s  "
              f"links(6) {r['verify_links_6_ms']:.2f} ms  evolve(3) {r['enrich_plus_evolve_3_ms']:.2f} ms")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
