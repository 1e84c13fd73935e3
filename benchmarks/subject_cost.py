"""What step 4b3 (``amem.search.subject``: a Chinese question's subject taken out, the head
lifted by what it asks past it) adds to a search.

    python -m benchmarks.subject_cost --cache benchmarks/out/embcache

Two stores of the CMRC 2018 sentences (the ``cmrc`` task's notes, exact repeats once), one with
the step (the default) and one without (``subject_lift`` 0); the questions searched at limit 10
with heat off, alternating between the two query by query (so load elsewhere on the machine
hits both alike), each question's query vector embedded once beforehand into the cache so
that the figures are the search's own. Prints the median and p95 of each and their ratio, and
how many questions the step ran for (a subject found and something asked past it).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Sequence

from amem import MemoryStore, load_config
from amem.embed import make_embedder
from amem.search.subject import asked_terms, question_subject

from ._util import write_result
from .datasets import DEFAULT_CMRC, load_cmrc
from .embcache import CachedEmbedder


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.subject_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_CMRC)
    p.add_argument("--queries", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3, help="times each question is searched")
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = p.parse_args(argv)

    corpus = load_cmrc(args.data)[0]
    embedder = CachedEmbedder(make_embedder("e5-small"), args.cache)
    # exact repeats once, as the store would keep them
    first = {d.text: d for d in reversed(corpus.docs)}
    notes = [{"text": d.text, "id": d.id, "enrich": False} for d in corpus.docs
             if first[d.text] is d]
    questions = [q.text for q in corpus.queries[:args.queries]]
    embedder.embed(questions, kind="query")  # cached: the searches below time no embedding
    stores = {name: MemoryStore(":memory:", embedder=embedder, config=load_config(
        overrides={"heat": False, "subject_lift": lift})) for name, lift in (("with", 0.5),
                                                                             ("without", 0.0))}
    times: dict[str, list[float]] = {name: [] for name in stores}
    try:
        for store in stores.values():
            store.add_many(notes)
        embedder.save()
        for store in stores.values():  # warm: the first searches read the engine's files
            for q in questions[:20]:
                store.search(q, limit=10, expand_links=False)
        for _ in range(args.rounds):
            for q in questions:
                for name, store in stores.items():
                    started = time.perf_counter()
                    store.search(q, limit=10, expand_links=False)
                    times[name].append((time.perf_counter() - started) * 1000)
        ran = 0
        for q in questions:
            texts = [r.content for r in stores["without"].search(q, limit=5, expand_links=False)]
            ran += bool(asked_terms(q, question_subject(q, texts)))
    finally:
        for store in stores.values():
            store.close()
    result = {"notes": len(notes), "questions": len(questions), "rounds": args.rounds,
              "step_ran_for": ran}
    for name, values in times.items():
        values.sort()
        result[name] = {"p50_ms": round(statistics.median(values), 3),
                        "p95_ms": round(values[int(0.95 * (len(values) - 1))], 3)}
    result["p50_ratio"] = round(result["with"]["p50_ms"] / result["without"]["p50_ms"], 3)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
