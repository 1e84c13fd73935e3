"""lcm on PostgreSQL against SQLite: ingest messages/s and grep latency on the same data, as ratios.

    python -m benchmarks.lcm_pg_bench                 # 10k messages, a throwaway local cluster
    python -m benchmarks.lcm_pg_bench --size 50000 --url postgresql://user@host/db   # a server of yours
    python -m benchmarks.lcm_pg_bench --size 50000 --compare-executemany   # COPY ingest against executemany
    python -m benchmarks.lcm_pg_bench --size 1000000 --conversations 200   # issue 18's 1M comparison
    python -m benchmarks.lcm_pg_bench --size 1000000 --conversations 200 --pay-trigram-debt   # SQLite's debt paid first
    python -m benchmarks.lcm_pg_bench --size 300000 --compare-plain-plan   # PostgreSQL's full-text greps against
                                                                          # the planner's own plan (the 'before' of lcm.pg.newest)

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
from lcm.pg.search import _match_sql
from lcm.pg.store import PgLcmStore
from lcm.search import build_fts_query

#: (label, mode, pattern): a rare term (1 message in 100k), a common one (in most messages),
#: CJK (one message in 10) and regexes with a literal the trigram prefilter can use
_QUERIES = [("rare", "full_text", "zephyrine"), ("common", "full_text", "deploy"),
            ("phrase", "full_text", "deploy failed"), ("cjk", "full_text", "部署失败"),
            ("regex_literal", "regex", r"timeout after 5\ds"), ("regex_code", "regex", r"E1\d{3}")]  # fmt: skip


def _message(i: int) -> dict[str, Any]:
    words = ["deploy", "failed", "retry", "timeout", "cache", "index", "module", "worker", "queue"]
    w = " ".join(words[(i * k) % len(words)] for k in (1, 3, 5, 7))
    extra = (" 部署失败，请重试" if i % 10 == 3 else "") + (" zephyrine" if i % 100_000 == 77 else "")
    return {"role": "user" if i % 2 == 0 else "assistant",
            "content": f"{w} in src/module_{i % 97}.py: E{1000 + i % 9000} timeout after {i % 60}s (#{i}){extra}",
            "event_id": f"ev-{i}"}  # fmt: skip


def _plain_plan(store: LcmStore, pattern: str) -> None:
    """A full-text grep's newest 50 as lcm sent them before lcm.pg.newest: one plain query per
    table, the plan left to the planner (which walks the time index for a word it has no
    statistics for)."""
    match, mparams, _, _ = _match_sql(build_fts_query(pattern))
    with store.db.reading() as c:
        for table, order in (("messages", "created_at DESC, t.id DESC"), ("summaries", "latest_at DESC, t.pk DESC")):
            c.execute(f"SELECT t.* FROM {table} t WHERE {match} AND TRUE ORDER BY t.{order} LIMIT 50", mparams).fetchall()


def _run(store: LcmStore, n: int, convs: int, batch: int = 100, *, pay_debt: bool = False,
         plain_plan: bool = False) -> dict[str, float]:  # fmt: skip
    """Ingest ``n`` messages (built batch by batch, so 1M fits in memory), then time the greps
    (p50 of 5) and one assembly of a 1,000-message conversation (p50 of 5). ``pay_debt``: the
    trigram debt SQLite leaves after ingest (up to 100k messages) is paid first, timed apart
    (PostgreSQL has none: 0 s)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for b in range(0, n, batch):
        store.ingest(f"agent:bench:c{(b // batch) % convs}", [_message(i) for i in range(b, min(n, b + batch))])
    ingest_s, ingest_cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = {"ingest_msgs_per_s": n / ingest_s, "ingest_msgs_per_client_cpu_s": n / ingest_cpu}
    if pay_debt:
        t = time.perf_counter()
        store.index_trigrams()
        out["trigram_debt_payment_s"] = time.perf_counter() - t
    for label, mode, q in _QUERIES:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            store.grep(q, mode=mode, all_conversations=True, limit=50)
            times.append(time.perf_counter() - t)
        out[f"grep_{label}_p50_ms"] = statistics.median(times) * 1000
        if plain_plan and mode == "full_text":  # the same grep, the planner's plan, right after
            times = []
            for _ in range(5):
                t = time.perf_counter()
                _plain_plan(store, q)
                times.append(time.perf_counter() - t)
            out[f"grep_{label}_plain_plan_p50_ms"] = statistics.median(times) * 1000
    for b in range(0, 1000, batch):  # a session of ordinary size, assembled without compaction
        store.ingest("agent:bench:assemble", [_message(n + i) for i in range(b, b + batch)])
    times = []
    for _ in range(5):
        t = time.perf_counter()
        store.assemble("agent:bench:assemble", 200_000)
        times.append(time.perf_counter() - t)
    out["assemble_1000_p50_ms"] = statistics.median(times) * 1000
    return out


class _InsertingPgStore(PgLcmStore):
    """The PostgreSQL store with ingest's older executemany path (the 'before' of COPY)."""

    _copy_ingest = False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway local cluster)")
    ap.add_argument("--conversations", type=int, default=20, help="conversations the messages are spread over")
    ap.add_argument("--compare-executemany", action="store_true",
                    help="also ingest into a second PostgreSQL database with executemany instead of COPY")
    ap.add_argument("--pay-trigram-debt", action="store_true", help="pay SQLite's trigram debt before the greps")
    ap.add_argument("--compare-plain-plan", action="store_true",
                    help="also time PostgreSQL's full-text greps as one plain query each (the planner's plan)")
    args = ap.parse_args(argv)
    if args.compare_executemany and args.url:
        ap.error("--compare-executemany needs the throwaway cluster (it creates a second database)")
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
                sqlite = _run(lite, args.size, args.conversations, pay_debt=args.pay_trigram_debt)
            with LcmStore(url, cfg) as pg:
                postgres = _run(pg, args.size, args.conversations, pay_debt=args.pay_trigram_debt,
                                plain_plan=args.compare_plain_plan)  # fmt: skip
            before = None
            if cluster is not None and args.compare_executemany:
                with _InsertingPgStore(cluster.create_database("lcm_bench_insert"), cfg) as old:
                    before = _run(old, args.size, args.conversations)
    finally:
        if cluster is not None:
            cluster.stop()
    report: dict[str, dict[str, float]] = {}
    for k in [k for k in postgres if k.endswith("_plain_plan_p50_ms")]:  # PostgreSQL only: new plan / plain plan
        new = postgres[k.replace("_plain_plan", "")]
        report[k] = {"postgresql": round(postgres[k], 2), "ratio_new_over_plain": round(new / postgres[k], 3)}
    for k in sqlite:
        report[k] = {"sqlite": round(sqlite[k], 2), "postgresql": round(postgres[k], 2),
                     "ratio_pg_over_sqlite": round(postgres[k] / sqlite[k], 2) if sqlite[k] else float("nan")}  # fmt: skip
        if before is not None:
            report[k]["postgresql_executemany"] = round(before[k], 2)
            report[k]["ratio_copy_over_executemany"] = round(postgres[k] / before[k], 2) if before[k] else float("nan")
    print(json.dumps({"messages": args.size, "conversations": args.conversations, "results": report}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
