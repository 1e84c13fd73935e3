"""Bulk import throughput against the raw embedder (the limit), and single ``add`` latency.

    python -m benchmarks.import_bench                       # 10k notes, e5-small
    python -m benchmarks.import_bench --quick --embedder hashing
    python -m benchmarks.import_bench --size 1000 --profile 200 --out benchmarks/out/import.json
    python -m benchmarks.import_bench --plain-add          # add latency in a 10k-note store

Notes are real LoCoMo turns (``"<speaker>: <text>"``, as the store holds them), recombined in
pairs to reach ``--size`` unique texts, written to a JSONL file with their session dates. In one
process, with one embedder instance and the store's own batch size, it times:

* ``raw``: ``embedder.embed(texts, kind="passage")`` over the same contents, batch by batch:
  the ceiling any import can reach;
* ``import_no_enrich``: ``amem.importer.import_file(..., enrich=False)`` into a fresh
  ``MemoryStore(":memory:")`` (the episodic fast path: hash dedup, embed, write);
* ``import_enrich``: the same with offline enrichment on (dedup, fold, enrichment, links,
  evolution), the default write path without an LLM;
* ``raw_note_texts``: the raw embedder on what the enriched store embeds (content + keywords +
  tags + context), which separates "longer inputs" from pipeline overhead;
* ``add``: single ``MemoryStore.add`` latency (p50/p95) into the enriched store of ``--size``
  notes, next to embedding one such text alone. Folds leave that store with fewer notes than
  ``--size``; ``--plain-add`` instead times the adds into the ``enrich=False`` store, which
  holds exactly ``--size`` notes, and runs nothing else.

Figures are ratios against ``raw`` (the aim: enriched import >= 0.60 of raw) because absolute
rates move with the machine's load, which is recorded per phase. ``--profile N`` runs cProfile
over an enriched import of the first N notes and lists where the time goes.

``--pipeline --cache DIR`` measures the write pipeline alone, for an A/B of two trees: an
enriched import of ``--size`` notes whose vectors come from an embedding cache (filled by a
first, untimed import when it lacks them), so the encoder is out of the figure; the process's
CPU seconds and the notes stored. Run from another checkout's folder (``cd <tree> && python
-m benchmarks.import_bench --pipeline --cache DIR``), it measures that checkout's code.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import amem
from amem import MemoryStore, load_config
from amem.embed import Embedder, make_embedder
from amem.importer import import_file

from ._util import latency_ms, ratio, timed, write_result
from .embcache import CachedEmbedder
from .datasets import DEFAULT_LOCOMO, load_locomo

log = logging.getLogger(__name__)

QUICK_SIZE = 300
AIM = 0.60


def build_items(size: int, data: Path = DEFAULT_LOCOMO, seed: int = 11) -> list[dict[str, str]]:
    """``size`` unique notes: every turn once, then pairs of turns of one conversation.

    A pair keeps the language and the speakers real; pairs are drawn without repetition, so
    the importer's hash dedup never removes a note the benchmark counts.
    """
    if size <= 0:
        raise ValueError(f"size must be a positive number of notes, got {size}")
    corpora = load_locomo(data)
    docs = [(c.name, d) for c in corpora for d in c.docs]
    if not docs:
        raise ValueError(f"{data} holds no LoCoMo turns")
    by_conv: dict[str, list[Any]] = {}
    for name, doc in docs:
        by_conv.setdefault(name, []).append(doc)
    rng = random.Random(seed)
    items: list[dict[str, str]] = []
    seen: set[str] = set()

    def push(text: str, stamp: str | None) -> None:
        if text not in seen:
            seen.add(text)
            items.append({"text": text, **({"timestamp": stamp} if stamp else {})})

    for _, doc in docs[:size]:
        push(doc.text, doc.timestamp)
    names = sorted(by_conv)
    attempts = 0
    while len(items) < size:
        attempts += 1
        if attempts > 50 * size:
            raise ValueError(f"cannot build {size} unique notes from {data}")
        turns = by_conv[names[rng.randrange(len(names))]]
        i = rng.randrange(len(turns) - 1) if len(turns) > 1 else 0
        j = min(len(turns) - 1, i + 1 + rng.randrange(8))
        push(f"{turns[i].text} {turns[j].text}", turns[j].timestamp)
    return items


def write_jsonl(items: Sequence[dict[str, str]], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    return path


def raw_rate(embedder: Embedder, texts: Sequence[str], batch: int) -> dict[str, Any]:
    """The embedder alone over ``texts`` in batches of ``batch`` (what the store sends it)."""
    def work() -> None:
        for start in range(0, len(texts), batch):
            embedder.embed(list(texts[start:start + batch]), kind="passage")

    seconds, _ = timed(work)
    return _rate(len(texts), seconds)


def _rate(notes: int, seconds: float) -> dict[str, Any]:
    return {"notes": notes, "seconds": round(seconds, 3),
            "notes_per_s": round(notes / seconds, 2) if seconds > 0 else None,
            "loadavg": round(os.getloadavg()[0], 2)}


def timed_import(embedder: Embedder, path: Path, enrich: bool) -> tuple[MemoryStore, dict[str, Any]]:
    """Import ``path`` into a fresh in-memory store; the store is returned open."""
    store = MemoryStore(":memory:", config=load_config(), embedder=embedder)
    try:
        seconds, report = timed(lambda: import_file(store, path, enrich=enrich))
    except BaseException:
        store.close()
        raise
    row = _rate(report.read, seconds)
    row.update({k: getattr(report, k) for k in
                ("created", "deduplicated", "folded", "pending_merge", "skipped")})
    row["count_after"] = store.count()
    return store, row


def pipeline_cpu(size: int, cache: Path, embedder: str = "e5-small", *,
                 data: Path = DEFAULT_LOCOMO) -> dict[str, Any]:
    """The enriched import's own CPU (``--pipeline``): vectors from ``cache``, an untimed
    import first when the cache lacks any of them."""
    model = CachedEmbedder(_model(embedder, 1), cache)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_jsonl(build_items(size, data), Path(tmp) / "notes.jsonl")
        filled = False
        while True:
            before = len(model)
            with MemoryStore(":memory:", config=load_config(), embedder=model) as store:
                started = time.process_time()
                import_file(store, path, enrich=True)
                cpu, stored = time.process_time() - started, store.count()
            if len(model) == before:  # nothing embedded: the figure is the pipeline's
                break
            model.save()
            filled = True
    return {"tree": str(Path(amem.__file__).resolve().parents[1]), "notes": size,
            "pipeline_cpu_s": round(cpu, 2), "notes_stored": stored, "cache_filled": filled}


def add_latency(store: MemoryStore, embedder: Embedder, texts: Sequence[str]) -> dict[str, Any]:
    """``store.add`` one text at a time, then the embedder alone on the same texts one by one."""
    before = store.count()
    adds: list[float] = []
    statuses: dict[str, int] = {}
    for text in texts:
        seconds, result = timed(lambda: store.add(text))
        adds.append(seconds)
        statuses[result.status] = statuses.get(result.status, 0) + 1
    embeds = [timed(lambda: embedder.embed([text], kind="passage"))[0] for text in texts]
    add, one = latency_ms(adds), latency_ms(embeds)
    return {"store_notes_before": before, "add": add, "embed_one": one, "statuses": statuses,
            "add_over_embed_p50": ratio(add["p50_ms"], one["p50_ms"])}


def _model(embedder: str, threads: int) -> Embedder:
    """The benchmark's embedder with the store's thread count (hashing has no threads to set)."""
    return make_embedder(embedder, **({} if embedder == "hashing" else {"threads": threads}))


def plain_add(size: int = 10_000, embedder: str = "e5-small", *, data: Path = DEFAULT_LOCOMO,
              adds: int = 50) -> dict[str, Any]:
    """``add`` latency (offline enrichment) into a store of exactly ``size`` notes: the
    ``enrich=False`` import of the benchmark's notes, so no fold shrinks the store."""
    model = _model(embedder, load_config().embed_threads)
    items = build_items(size + adds, data)
    model.embed([items[0]["text"]], kind="passage")  # model load, not latency
    with tempfile.TemporaryDirectory(prefix="amem-import-bench-") as tmp:
        path = write_jsonl(items[:size], Path(tmp) / "notes.jsonl")
        store, imported = timed_import(model, path, enrich=False)
        try:
            latency = add_latency(store, model, [item["text"] for item in items[size:]])
        finally:
            store.close()
    return {"notes": size, "embedder": model.model_id, "import_no_enrich": imported,
            "add_latency": latency}


def profile_import(embedder: Embedder, path: Path, top: int = 15) -> dict[str, Any]:
    """cProfile over one enriched import: the heaviest amem functions (cumulative) and the
    heaviest functions anywhere (self time), each as a share of the profiled wall time."""
    store = MemoryStore(":memory:", config=load_config(), embedder=embedder)
    profiler = cProfile.Profile()
    try:
        seconds, _ = timed(lambda: profiler.runcall(import_file, store, path, enrich=True))
    finally:
        store.close()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_, calls, self_s, cum_s, _) in stats.items():
        rows.append({"function": _where(filename, line, name), "calls": calls,
                     "self_share": round(self_s / seconds, 4), "cum_share": round(cum_s / seconds, 4)})
    ours = [r for r in rows if r["function"].startswith(("amem/", "benchmarks/"))]
    return {"notes": sum(1 for _ in path.open(encoding="utf-8")), "seconds": round(seconds, 3),
            "top_amem_cumulative": sorted(ours, key=lambda r: -r["cum_share"])[:top],
            "top_self": sorted(rows, key=lambda r: -r["self_share"])[:top]}


def _where(filename: str, line: int, name: str) -> str:
    parts = Path(filename).parts
    for anchor in ("amem", "benchmarks", "site-packages"):
        if anchor in parts:
            start = parts.index(anchor) + (1 if anchor == "site-packages" else 0)
            return f"{'/'.join(parts[start:])}:{line}:{name}"
    return f"{filename}:{line}:{name}" if filename != "~" else name


def run(quick: bool, size: int = 10_000, embedder: str = "e5-small", *,
        data: Path = DEFAULT_LOCOMO, adds: int | None = None, profile: int = 0) -> dict[str, Any]:
    """Measure raw embedding, import without and with enrichment, and ``add`` latency."""
    size = QUICK_SIZE if quick else size
    adds = adds or (20 if quick else 50)
    if adds <= 0:
        raise ValueError(f"adds must be positive, got {adds}")
    config = load_config()
    model = _model(embedder, config.embed_threads)
    items = build_items(size + adds, data)
    file_items, extra = items[:size], [item["text"] for item in items[size:]]
    texts = [item["text"] for item in file_items]
    warm, _ = timed(lambda: model.embed(texts[:4], kind="passage"))  # model load, not throughput
    result: dict[str, Any] = {"notes": size, "embedder": model.model_id, "data": str(data),
                              "embed_batch": config.embed_batch, "warmup_s": round(warm, 2),
                              "aim_enrich_over_raw": AIM}
    with tempfile.TemporaryDirectory(prefix="amem-import-bench-") as tmp:
        path = write_jsonl(file_items, Path(tmp) / "notes.jsonl")
        result["raw"] = raw_rate(model, texts, config.embed_batch)
        store, result["import_no_enrich"] = timed_import(model, path, enrich=False)
        store.close()
        store, result["import_enrich"] = timed_import(model, path, enrich=True)
        try:
            note_texts = [note.embed_text() for note, _ in store.iter_notes()]
            result["raw_note_texts"] = raw_rate(model, note_texts, config.embed_batch)
            result["add_latency"] = add_latency(store, model, extra)
        finally:
            store.close()
        if profile:
            sample = write_jsonl(file_items[:profile], Path(tmp) / "profile.jsonl")
            result["profile"] = profile_import(model, sample)
    raw = result["raw"]["notes_per_s"]
    result["ratios"] = {
        "import_no_enrich_over_raw": ratio(result["import_no_enrich"]["notes_per_s"], raw),
        "import_enrich_over_raw": ratio(result["import_enrich"]["notes_per_s"], raw),
        "import_enrich_over_raw_note_texts": ratio(result["import_enrich"]["notes_per_s"],
                                                   result["raw_note_texts"]["notes_per_s"]),
    }
    result["meets_aim"] = (result["ratios"]["import_enrich_over_raw"] or 0.0) >= AIM
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SIZE} notes")
    parser.add_argument("--size", type=int, default=10_000, help="notes to import")
    parser.add_argument("--embedder", default="e5-small", help="e5-small, minilm, hashing, ...")
    parser.add_argument("--data", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON file")
    parser.add_argument("--adds", type=int, help="single adds to time (20 quick, 50 full)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile an enriched import of the first N notes")
    parser.add_argument("--plain-add", action="store_true",
                        help="only: add latency into an enrich=False store of exactly --size notes")
    parser.add_argument("--pipeline", action="store_true",
                        help="only: the enriched import's own CPU, vectors from --cache")
    parser.add_argument("--cache", type=Path, help="embedding cache directory (--pipeline)")
    parser.add_argument("--out", type=Path, help="also write the JSON result here")
    args = parser.parse_args(argv)
    if args.size <= 0:
        parser.error("--size must be positive")
    if not args.data.is_file():
        parser.error(f"--data {args.data} does not exist")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.pipeline:
        if args.cache is None:
            parser.error("--pipeline needs --cache DIR (the vectors the timed import reads)")
        print(write_result(pipeline_cpu(QUICK_SIZE if args.quick else args.size, args.cache,
                                        args.embedder, data=args.data), args.out))
        return 0
    if args.plain_add:
        result = plain_add(QUICK_SIZE if args.quick else args.size, args.embedder, data=args.data,
                           adds=args.adds or 50)
    else:
        result = run(args.quick, args.size, args.embedder, data=args.data, adds=args.adds,
                     profile=args.profile)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
