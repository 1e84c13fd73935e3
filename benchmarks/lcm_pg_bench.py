"""lcm on PostgreSQL against SQLite: ingest messages/s and grep latency on the same data, as ratios.

    python -m benchmarks.lcm_pg_bench                 # 10k messages, a throwaway local cluster
    python -m benchmarks.lcm_pg_bench --size 50000 --url postgresql://user@host/db   # a server of yours

Both engines run in this process on the same messages (batches of 100 into 20 conversations),
SQLite into a fresh file, PostgreSQL into a fresh database (the throwaway cluster of the
tests runs with ``fsync=off``, so its ingest figure is an upper bound for a durable server).
The figure that matters is the ratio PostgreSQL / SQLite, measured side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lcm import LcmConfig, LcmStore

_QUERIES = [("full_text", "deploy failed"), ("full_text", "module_42.py"), ("regex", r"E\d{4}"),
            ("regex", r"timeout after \d+s")]  # fmt: skip


def _messages(n: int) -> list[dict[str, Any]]:
    words = ["deploy", "failed", "retry", "timeout", "cache", "index", "module", "worker", "queue"]
    out = []
    for i in range(n):
        w = " ".join(words[(i * k) % len(words)] for k in (1, 3, 5, 7))
        out.append({"role": "user" if i % 2 == 0 else "assistant",
                    "content": f"{w} in src/module_{i % 97}.py: E{1000 + i % 9000} timeout after {i % 60}s (#{i})",
                    "event_id": f"ev-{i}"})  # fmt: skip
    return out


def _run(store: LcmStore, msgs: list[dict[str, Any]], convs: int = 20, batch: int = 100) -> dict[str, float]:
    start = time.perf_counter()
    for b in range(0, len(msgs), batch):
        store.ingest(f"agent:bench:c{(b // batch) % convs}", msgs[b : b + batch])
    ingest_s = time.perf_counter() - start
    out = {"ingest_msgs_per_s": len(msgs) / ingest_s}
    for mode, q in _QUERIES:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            store.grep(q, mode=mode, all_conversations=True, limit=50)
            times.append(time.perf_counter() - t)
        out[f"grep_{mode}_{q}_ms"] = statistics.median(times) * 1000
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway local cluster)")
    args = ap.parse_args(argv)
    msgs = _messages(args.size)
    cluster = None
    if args.url:
        url = args.url
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.pgcluster import start_cluster

        cluster = start_cluster()
        url = cluster.create_database("lcm_bench")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = LcmConfig(log_file_enabled=False)
            with LcmStore(str(Path(tmp) / "lcm.db"), cfg) as lite:
                sqlite = _run(lite, msgs)
            with LcmStore(url, cfg) as pg:
                postgres = _run(pg, msgs)
    finally:
        if cluster is not None:
            cluster.stop()
    report = {k: {"sqlite": round(sqlite[k], 2), "postgresql": round(postgres[k], 2),
                  "ratio_pg_over_sqlite": round(postgres[k] / sqlite[k], 2)} for k in sqlite}  # fmt: skip
    print(json.dumps({"messages": args.size, "results": report}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
