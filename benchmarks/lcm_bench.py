"""Benchmarks for lcm: ingest rate, grep latency (vs a plain LIKE scan), assembly latency.

    python -m benchmarks.lcm_bench --quick      # seconds: 5k messages
    python -m benchmarks.lcm_bench              # 100k messages
    python -m benchmarks.lcm_bench --big        # also 1M messages (minutes, ~2 GB of disk)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.db import sqlite_only
from lcm.tokens import estimate_tokens

_WORDS = (
    "deploy build failed passed config module error cache queue worker token budget summary "
    "database index migration schema request response timeout retry cluster node pod service "
    "latency memory disk network user assistant tool review merge branch commit release"
).split()
_CJK = ["数据库迁移", "部署失败", "会议记录", "デプロイ手順", "性能测试"]


def _message(rng: random.Random, i: int) -> dict[str, str]:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))
    extra = f" ref-{i} src/app/mod_{i % 997}.py"
    if i % 50 == 0:
        extra += " " + rng.choice(_CJK)
    if i % 10007 == 0:
        extra += " needle-zebra-quartz"
    return {"role": "user" if i % 2 == 0 else "assistant", "content": words + extra}


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 3)


def _build(path: Path, n: int, conversations: int = 100, batch: int = 100) -> tuple[LcmStore, float]:
    cfg = LcmConfig(log_file_enabled=False, replay_flood_threshold_external=1000, replay_flood_threshold_internal=1000)
    store = LcmStore(path, cfg, clock=ManualClock())
    rng = random.Random(7)
    start = time.perf_counter()
    for b, offset in enumerate(range(0, n, batch)):
        msgs = [_message(rng, i) for i in range(offset, min(n, offset + batch))]
        store.ingest(f"agent:bench:c{b % conversations}", msgs)
        store.clock.advance(1)  # type: ignore[attr-defined]
    return store, time.perf_counter() - start


def _grep_figures(store: LcmStore, repeat: int) -> dict[str, Any]:
    c = sqlite_only(store.db, "the LIKE baseline").conn
    like = lambda term: c.execute(  # noqa: E731 - the baseline is one statement
        "SELECT id, content FROM messages WHERE content LIKE ? ORDER BY created_at DESC LIMIT 50", (f"%{term}%",)
    ).fetchall()
    out: dict[str, Any] = {}
    cases = {
        "full_text_rare": ("needle-zebra-quartz", "full_text", "needle-zebra-quartz"),
        "full_text_common": ("deploy", "full_text", "deploy"),
        "full_text_cjk": ("数据库迁移", "full_text", "数据库迁移"),
        "regex_rare_literal": (r"needle-zebra-\w+", "regex", "needle-zebra-"),
        "regex_common_literal": (r"mod_9\d\d\.py", "regex", "mod_9"),
        "regex_no_literal": (r"[a-z]{3}_9\d\d\b", "regex", "_9"),
    }
    for name, (pattern, mode, like_term) in cases.items():
        grep_ms = _timed(lambda: store.grep(pattern, mode=mode, all_conversations=True, limit=50), repeat)
        base_ms = _timed(lambda: like(like_term), repeat)
        hits = len(store.grep(pattern, mode=mode, all_conversations=True, limit=50).hits)
        out[name] = {"grep_ms": grep_ms, "like_scan_ms": base_ms, "speedup_vs_like": round(base_ms / max(grep_ms, 1e-6), 2), "hits": hits}
    fam_ms = _timed(lambda: store.grep("deploy", mode="full_text", session_key="agent:bench:c3", limit=50), repeat)
    out["full_text_session_family_ms"] = fam_ms
    return out


def _assembly_figures(tmp: Path, n: int, repeat: int) -> dict[str, Any]:
    cfg = LcmConfig(log_file_enabled=False, leaf_chunk_tokens=4000, max_sweep_iterations=1000)
    store = LcmStore(tmp / "assemble.db", cfg, clock=ManualClock())
    rng = random.Random(3)
    for offset in range(0, n, 100):
        store.ingest("agent:bench:assemble", [_message(rng, i) for i in range(offset, offset + 100)])
        store.clock.advance(1)  # type: ignore[attr-defined]
    start = time.perf_counter()
    comp = store.compact_until_under("agent:bench:assemble", 30000)
    compact_s = time.perf_counter() - start
    ctx = store.assemble("agent:bench:assemble", 100000)
    ms = _timed(lambda: store.assemble("agent:bench:assemble", 100000), repeat)
    raw = store.status().message_tokens
    store.close()
    return {
        "messages": n, "compaction_s": round(compact_s, 2), "summaries": len(comp.leaf_summaries) + len(comp.condensed_summaries),
        "assemble_ms": ms, "assembled_tokens": ctx.total_tokens, "raw_tokens": raw,
        "compression_ratio": round(raw / max(1, ctx.total_tokens), 1), "items": len(ctx.items),
    }  # fmt: skip


def _token_estimator() -> dict[str, Any]:
    rng = random.Random(1)
    texts = [_message(rng, i)["content"] for i in range(20000)]
    chars = sum(len(t) for t in texts)
    start = time.perf_counter()
    for t in texts:
        estimate_tokens(t)
    secs = time.perf_counter() - start
    return {"texts": len(texts), "chars_per_s": round(chars / secs), "texts_per_s": round(len(texts) / secs)}


def _size_run(tmp: Path, n: int, repeat: int) -> dict[str, Any]:
    store, secs = _build(tmp / f"grep_{n}.db", n)
    figures = {"messages": n, "ingest_s": round(secs, 2), "ingest_msgs_per_s": round(n / secs)}
    figures["grep"] = _grep_figures(store, repeat)
    # An archive of older messages imported last: row ids stop following time, and newest-first
    # grep must check its row-id shortcut against the time index (lcm migration 0003).
    rng = random.Random(11)
    archive = [{**_message(rng, i), "created_at": f"2020-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"}
               for i in range(1000)]
    store.ingest("agent:bench:archive", archive)
    figures["grep_after_old_import"] = _grep_figures(store, repeat)
    figures["db_bytes"] = store.status().size_bytes
    store.close()
    return figures


def run(quick: bool, big: bool = False) -> dict[str, Any]:
    """Run the benchmark and return its figures (JSON-friendly)."""
    sizes = [5000] if quick else [100000]
    if big:
        sizes.append(1000000)
    repeat = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="lcm-bench-") as d:
        tmp = Path(d)
        result: dict[str, Any] = {"quick": quick, "python": sys.version.split()[0]}
        result["sizes"] = [_size_run(tmp, n, repeat) for n in sizes]
        result["assembly"] = _assembly_figures(tmp, 2000 if quick else 10000, repeat * 4)
        result["token_estimator"] = _token_estimator()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a few thousand messages; runs in seconds")
    parser.add_argument("--big", action="store_true", help="also measure grep at 1M messages (slow, large)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.quick, args.big), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
