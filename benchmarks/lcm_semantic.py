"""lcm semantic recall on LoCoMo dev: question -> evidence turn for full_text, semantic, hybrid.

Each LoCoMo dev conversation is ingested into one lcm store as messages (speaker A as user,
B as assistant, ``"<speaker>: <text>"``, the session's date as the time), embedded by
``embed_pending`` (timed: the throughput of the pending queue), then every question is asked
through ``LcmStore.grep(scope="messages", sort="relevance")`` in its own conversation. Beside
the three modes, two baselines run on the same turns in the same process: BM25 over ``\\w+``
tokens (``rank_bm25``) and an exact float32 cosine with the same embedder, which shows what
int8 storage costs. ``--scan`` also times the exact vector scan at synthetic sizes.

    python -m benchmarks.lcm_semantic
    python -m benchmarks.lcm_semantic --scan 10000,100000,400000 --out /tmp/lcm_semantic.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from amem.embed import make_embedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LcmValidationError
from lcm.vectors import pack

from .datasets import DEFAULT_LOCOMO, Corpus, load_locomo
from .embcache import REALIZATIONS, CachedEmbedder
from .metrics import mean, score

MODES = ("full_text", "semantic", "hybrid")
LIMIT = 50


def _ingest(store: LcmStore, corpus: Corpus, key: str) -> dict[int, str]:
    """The corpus's turns as messages; returns message id -> dia id."""
    first = corpus.docs[0].text.split(":", 1)[0]
    msgs = []
    for i, d in enumerate(corpus.docs):
        when = (d.timestamp or "2023-01-01T00:00:00")
        # a second per turn keeps turns of one session in order and distinct in time
        stamp = (np.datetime64(when) + np.timedelta64(i, "s")).astype(str) + "+00:00"
        msgs.append({"role": "user" if d.text.split(":", 1)[0] == first else "assistant",
                     "content": d.text, "created_at": stamp})
    res = store.ingest(key, msgs)
    if res.stored != len(corpus.docs):
        raise RuntimeError(f"{corpus.name}: stored {res.stored} of {len(corpus.docs)} turns")
    return {mid: d.id for mid, d in zip(res.message_ids, corpus.docs)}


def _bm25(corpus: Corpus) -> list[list[str]]:
    from rank_bm25 import BM25Okapi

    def tok(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    bm: Any = BM25Okapi([tok(d.text) for d in corpus.docs])  # untyped package
    out = []
    for q in corpus.queries:
        scores = np.asarray(bm.get_scores(tok(q.text)))
        out.append([corpus.docs[i].id for i in np.argsort(-scores, kind="stable")[:LIMIT]])
    return out


def _dense(corpus: Corpus, embedder: Any) -> list[list[str]]:
    docs = embedder.embed([d.text for d in corpus.docs], kind="passage")
    qs = embedder.embed([q.text for q in corpus.queries], kind="query")
    return [[corpus.docs[i].id for i in np.argsort(-(docs @ q), kind="stable")[:LIMIT]] for q in qs]


def run(args: argparse.Namespace) -> dict[str, Any]:
    corpora = load_locomo(args.data)[: args.corpora]
    embedder: Any = make_embedder(args.embedder)
    if args.cache is not None:  # the throughput figure is then the cache's, not the model's
        embedder = CachedEmbedder(embedder, args.cache, args.realization)
    embedder.embed(["warm up"], kind="query")  # model load is not part of the throughput
    cfg = LcmConfig(log_file_enabled=False, replay_flood_threshold_external=10**6,
                    replay_flood_threshold_internal=10**6,
                    **({} if args.query_centering is None
                       else {"query_centering": args.query_centering}))
    rankings: dict[str, list[tuple[str, list[str]]]] = {}
    queries: list[tuple[str, set[str], str, str]] = []
    embed_s, embedded = 0.0, 0
    grep_ms: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp, \
            LcmStore(Path(tmp) / "lcm.db", cfg, clock=ManualClock(), embedder=embedder) as store:
        for corpus in corpora:
            key = f"agent:bench:{corpus.name}"
            ids = _ingest(store, corpus, key)
            started = time.perf_counter()
            report = store.embed_pending()
            embed_s += time.perf_counter() - started
            embedded += report.embedded_messages
            for mode in MODES:
                for q in corpus.queries:
                    t0 = time.perf_counter()
                    try:
                        res = store.grep(q.text, mode=mode, scope="messages", session_key=key,
                                         sort="relevance", limit=args.limit)
                        ranked = [ids[int(h.id[4:])] for h in res.hits]
                    except LcmValidationError:  # a question with no searchable word
                        ranked = []
                    grep_ms[mode].append((time.perf_counter() - t0) * 1000)
                    rankings.setdefault(mode, []).append((q.category, ranked))
            for name, base in (("bm25 (baseline)", _bm25(corpus)),
                               ("dense float32 (baseline)", _dense(corpus, embedder))):
                rankings.setdefault(name, []).extend((q.category, r) for q, r in zip(corpus.queries, base))
            # halves: alternate questions of each conversation (held-apart figures)
            queries += [(q.category, q.relevant, corpus.name, "ab"[i % 2]) for i, q in enumerate(corpus.queries)]
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    results: dict[str, dict[str, Any]] = {}
    for method, lists in rankings.items():
        groups: dict[str, list[dict[str, float]]] = {}
        for (cat, rel, conv, half), (_, r) in zip(queries, lists):
            s = score(r, rel)
            groups.setdefault(f"cat{cat}", []).append(s)
            if cat != "5":
                for group in ("cat1-4", f"{conv} cat1-4", f"half {half} cat1-4"):
                    groups.setdefault(group, []).append(s)
        results[method] = {g: mean(rows) for g, rows in sorted(groups.items())}
    return {"data": str(args.data), "embedder": embedder.model_id,
            "conversations": [c.name for c in corpora], "turns": sum(len(c.docs) for c in corpora),
            "results": results,
            "embed": {"items": embedded, "seconds": round(embed_s, 2),
                      "per_second": round(embedded / embed_s, 1) if embed_s else None},
            "grep_p50_ms": {m: round(statistics.median(v), 2) for m, v in grep_ms.items()},
            "scan": [_scan(n) for n in args.scan]}


def _scan(n: int, dim: int = 384, repeat: int = 5) -> dict[str, Any]:
    """The exact scan over ``n`` stored int8 vectors (k=50) against a float32 matmul in memory."""
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    query = vecs[0]

    class _Fixed:  # the scan never encodes a text; it only needs the identity
        model_id, dim = "synthetic", 384

        def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
            raise AssertionError("not used")

    with tempfile.TemporaryDirectory() as tmp, LcmStore(Path(tmp) / "scan.db", embedder=_Fixed()) as store:
        with store.db.atomic() as c:
            c.executemany("INSERT INTO message_vectors(message_id, conversation_id, model_id, scale, vector) "
                          "VALUES (?, 1, 'synthetic', ?, ?)", ((i + 1, *pack(v)) for i, v in enumerate(vecs)))
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            store.semantic.search("message", query, [1], None, None, LIMIT, time.monotonic() + 600)
            times.append((time.perf_counter() - t0) * 1000)
        base = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            np.argpartition(-(vecs @ query), LIMIT)[:LIMIT]
            base.append((time.perf_counter() - t0) * 1000)
    scan, mat = statistics.median(times), statistics.median(base)
    return {"vectors": n, "scan_ms": round(scan, 1), "numpy_in_memory_ms": round(mat, 2),
            "ratio": round(scan / mat, 1) if mat else None}


def table(result: dict[str, Any]) -> str:
    cols = [("cat1-4", m) for m in ("R@5", "R@10", "NDCG@10", "MRR")] + [(f"cat{c}", "R@10") for c in "12345"]
    head = [m if g == "cat1-4" else f"{g} R@10" for g, m in cols]
    lines = [f"| method | {' | '.join(head)} |", "|---|" + "---|" * len(cols)]
    for method, groups in result["results"].items():
        cells = [groups.get(g, {}).get(m) for g, m in cols]
        lines.append(f"| {method} | " + " | ".join("" if v is None else f"{v:.3f}" for v in cells) + " |")
    splits = [g for g in next(iter(result["results"].values())) if g.endswith(" cat1-4") and g != "cat1-4"]
    lines.append(f"\nR@10, categories 1-4, by conversation and half\n\n| method | {' | '.join(g[:-7] for g in splits)} |")
    lines.append("|---|" + "---|" * len(splits))
    for method, groups in result["results"].items():
        lines.append(f"| {method} | " + " | ".join(f"{groups[g]['R@10']:.3f}" for g in splits) + " |")
    e = result["embed"]
    lines.append(f"\nembed_pending: {e['items']} turns in {e['seconds']} s = {e['per_second']} turns/s "
                 f"({result['embedder']}); grep p50 ms: {json.dumps(result['grep_p50_ms'])}")
    for s in result["scan"]:
        lines.append(f"scan of {s['vectors']} int8 vectors: {s['scan_ms']} ms (float32 numpy in memory "
                     f"{s['numpy_in_memory_ms']} ms, x{s['ratio']})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.lcm_semantic", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo-format JSON (default: dev)")
    p.add_argument("--embedder", default="e5-small", help="embedder preset (default e5-small)")
    p.add_argument("--scan", type=lambda s: [int(x) for x in s.split(",") if x], default=[],
                   help="comma-separated vector counts to time the exact scan at")
    p.add_argument("--limit", type=int, default=LIMIT,
                   help=f"hits asked of each grep (default {LIMIT}, the depth scored; hybrid draws "
                        "max(4 x limit, 50) candidates from each leg)")
    p.add_argument("--corpora", type=int, help="use only the first N conversations (quick runs)")
    p.add_argument("--out", type=Path, help="write the JSON result here")
    p.add_argument("--query-centering", type=float,
                   help="share of the scope's mean taken off a semantic or hybrid grep's question "
                        "(lcm's queryCentering; default: the config's)")
    p.add_argument("--cache", type=Path, help="directory of an on-disk embedding cache (benchmarks.embcache); "
                   "embed_pending's rate is then the cache's")
    p.add_argument("--realization", type=int, default=0, choices=REALIZATIONS,
                   help="with --cache: 0 embeds each turn alone, 1-3 beside a fixed companion "
                        "text (benchmarks.embcache): another valid vector, to read the noise")
    args = p.parse_args(argv)
    if not args.data.exists():
        print(f"no data file at {args.data}", file=sys.stderr)
        return 2
    result = run(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
