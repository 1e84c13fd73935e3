"""Client memory and time of lcm's semantic vector scan on PostgreSQL: streaming against loading it whole.

    python -m benchmarks.lcm_pg_scan_bench --size 200000

A fresh database on the throwaway cluster of the tests gets ``--size`` messages with a
384-dimension int8 vector each (written by the server: the figure is the scan, not ingest).
Each scan runs in a child process of its own, so its peak resident memory is its own:
``stream`` is :meth:`lcm.pg.semantic.PgSemanticIndex._scan` as shipped (a server-side cursor,
4,096 rows a fetch); ``whole`` is the scan as it was before (a client-side cursor, which holds
every row in memory from the first fetch on). The two alternate, twice each.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

_SQL = "SELECT v.message_id, v.scale, v.vector FROM message_vectors v WHERE v.model_id = ? AND length(v.vector) = ?"


def _child(url: str, mode: str) -> dict[str, object]:
    from lcm import LcmConfig, LcmStore
    from lcm.pg.semantic import PgSemanticIndex

    store = LcmStore(url, LcmConfig(log_file_enabled=False))
    params: list[object] = ["bench-model", 384]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    n = 0
    try:
        if mode == "whole":
            with store.db.reading() as c:
                cur = c.execute(_SQL, params)
            while rows := cur.fetchmany(4096):
                n += len(rows)
        else:
            for rows in PgSemanticIndex(store.db, store.config, None)._scan(_SQL, params, time.monotonic() + 600):
                n += len(rows)
    finally:
        store.close()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB on Linux
    return {"mode": mode, "rows": n, "peak_rss_growth_mb": round(grown / 1024, 1), "scan_s": round(time.perf_counter() - t, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--child", nargs=2, metavar=("URL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_child(*args.child)))
        return 0
    import psycopg

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lcm import LcmConfig, LcmStore
    from tests.pgcluster import start_cluster

    cluster = start_cluster()
    try:
        url = cluster.create_database("lcm_scan")
        LcmStore(url, LcmConfig(log_file_enabled=False)).close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO conversations(session_key, active, created_at, updated_at) "
                         "VALUES ('agent:bench:scan', 1, 'x', 'x')")  # fmt: skip
            conn.execute("INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, "
                         "created_at) SELECT 1, g, 'user', 'm' || g, 1, 'h', 'x' FROM generate_series(1, %s) g",
                         [args.size])  # fmt: skip
            conn.execute("INSERT INTO message_vectors SELECT id, 1, 'bench-model', 0.01, "
                         "decode(repeat(lpad(to_hex(id % 127), 2, '0'), 384), 'hex') FROM messages")  # fmt: skip
        runs = []
        for mode in ("whole", "stream", "whole", "stream"):
            out = subprocess.run([sys.executable, "-m", "benchmarks.lcm_pg_scan_bench", "--child", url, mode],
                                 capture_output=True, text=True, check=True,
                                 cwd=Path(__file__).resolve().parents[1]).stdout  # fmt: skip
            runs.append(json.loads(out))
    finally:
        cluster.stop()
    print(json.dumps({"vectors": args.size, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
