"""lcm on PostgreSQL against SQLite: ingest messages/s and grep latency on the same data, as ratios.

    python -m benchmarks.lcm_pg_bench                 # 10k messages, a throwaway local cluster
    python -m benchmarks.lcm_pg_bench --size 50000 --url postgresql://user@host/db   # a server of yours
    python -m benchmarks.lcm_pg_bench --size 50000 --compare-executemany   # COPY ingest against executemany
    python -m benchmarks.lcm_pg_bench --size 1000000 --conversations 200   # issue 18's 1M comparison
    python -m benchmarks.lcm_pg_bench --size 1000000 --conversations 200 --pay-trigram-debt   # SQLite's debt paid first
    python -m benchmarks.lcm_pg_bench --size 300000 --compare-plain-plan   # PostgreSQL's full-text greps against
                                                                          # the planner's own plan (the 'before' of lcm.pg.newest)
    python -m benchmarks.lcm_pg_bench --size 300000 --conversations 200 --compare-assembly d576f14
                                      # assembly as lcm/assemble.py, load_items and lcm/pg/db.py were at a git
                                      # revision, against the code here: alternately, on the same databases

Both engines run in this process on the same messages (batches of 100 into 20 conversations),
SQLite into a fresh file, PostgreSQL into a fresh database (the throwaway cluster of the
tests runs with ``fsync=off``, so its ingest figure is an upper bound for a durable server).
The figure that matters is the ratio PostgreSQL / SQLite, measured side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from lcm import LcmConfig, LcmStore
from lcm.pg.db import PgDatabase
from lcm.pg.search import _match_sql
from lcm.pg.store import PgLcmStore
from lcm.search import build_fts_query
from lcm.sessions import find_active

_ROOT = Path(__file__).resolve().parents[1]

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


def _load_at(rev: str, path: str, name: str, rewrite: tuple[tuple[str, str], ...] = ()) -> types.ModuleType:
    """The module ``path`` as it was at git revision ``rev``, loaded under ``name``."""
    try:
        src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=_ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"--compare-assembly: cannot read {path} at git revision {rev!r}: {exc}") from exc
    for old, new in rewrite:
        src = src.replace(old, new)
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(src, f"{rev}:{path}", "exec"), mod.__dict__)  # noqa: S102 - our own file from git
    return mod


class _OldParts:
    """What an older ``Assembler`` calls on the store's scopes and compaction driver, done as the
    older code did it (a transaction each), through the older modules' own handle and rows."""

    def __init__(self, db: Any, store: LcmStore, compaction: types.ModuleType) -> None:
        self.db, self.store, self.load_items = db, store, compaction.load_items
        self.compactor = self
        #: newer assemblers log each threshold decision through the driver's event log
        self.events = store.events

    def budget(self, token_budget: int | None) -> int | None:
        return self.store.compaction.budget(token_budget)

    def active_id(self, session_key: str) -> int | None:
        with self.db.reading() as c:
            row = find_active(c, session_key, None)
        return None if row is None else int(row["id"])

    def context_tokens(self, conversation_id: int) -> int:
        with self.db.reading() as c:
            return sum(it.tokens for it in self.load_items(c, conversation_id))

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the bench's conversation is assembled under the compaction threshold")


def _compare_assembly(store: LcmStore, rev: str, rounds: int = 21) -> dict[str, float]:
    """One assembly of the bench's 1,000-message conversation by the code of ``rev`` and by the
    code here, alternately (the order flips each round), on the same database: p50s and ratio.
    Both must give the same context."""
    compaction = _load_at(rev, "lcm/compaction.py", "_bench_old_compaction")
    assemble = _load_at(rev, "lcm/assemble.py", "_bench_old_assemble",
                        (("from lcm.compaction import", "from _bench_old_compaction import"),))  # fmt: skip
    db: Any = store.db
    if isinstance(store.db, PgDatabase):  # the older rows too: a handle of the older module's own
        db = _load_at(rev, "lcm/pg/db.py", "_bench_old_pg_db").PgDatabase(store.db.url, max_size=2)
    try:
        parts = _OldParts(db, store, compaction)
        old = assemble.Assembler(db, store.config, store.clock, parts, parts)
        key = "agent:bench:assemble"
        if old.assemble(key, 200_000, prompt=None, model=None, context_window=None).to_dict() != store.assemble(
            key, 200_000
        ).to_dict():
            raise SystemExit(f"--compare-assembly: the code of {rev} and the code here assemble different contexts")
        times: dict[str, list[float]] = {"old": [], "new": []}
        for r in range(rounds):
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                t = time.perf_counter()
                if side == "old":
                    old.assemble(key, 200_000, prompt=None, model=None, context_window=None)
                else:
                    store.assemble(key, 200_000)
                times[side].append(time.perf_counter() - t)
    finally:
        if db is not store.db:
            db.close()
    o, n = statistics.median(times["old"]) * 1000, statistics.median(times["new"]) * 1000
    return {"assemble_1000_old_p50_ms": o, "assemble_1000_new_p50_ms": n, "assemble_1000_old_over_new": o / n}


def _run(store: LcmStore, n: int, convs: int, batch: int = 100, *, pay_debt: bool = False,
         plain_plan: bool = False, compare_assembly: str | None = None) -> dict[str, float]:  # fmt: skip
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
    if compare_assembly:
        out.update(_compare_assembly(store, compare_assembly))
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
    ap.add_argument("--compare-assembly", metavar="REV",
                    help="also time assembly as the code of git revision REV did it, alternately with the code here")
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
                sqlite = _run(lite, args.size, args.conversations, pay_debt=args.pay_trigram_debt,
                              compare_assembly=args.compare_assembly)  # fmt: skip
            with LcmStore(url, cfg) as pg:
                postgres = _run(pg, args.size, args.conversations, pay_debt=args.pay_trigram_debt,
                                plain_plan=args.compare_plain_plan, compare_assembly=args.compare_assembly)  # fmt: skip
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
        if before is not None and k in before:
            report[k]["postgresql_executemany"] = round(before[k], 2)
            report[k]["ratio_copy_over_executemany"] = round(postgres[k] / before[k], 2) if before[k] else float("nan")
    print(json.dumps({"messages": args.size, "conversations": args.conversations, "results": report}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
