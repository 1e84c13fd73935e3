"""Where lcm's ingest time goes on each engine, in lcm_pg_bench's shape (batches of 100 into 200 conversations).

    python -m benchmarks.lcm_ingest_parts_bench --engine postgresql --size 100000
    python -m benchmarks.lcm_ingest_parts_bench --engine sqlite --size 300000

Every variant ingests the same messages in one process, interleaved: each batch goes to every
variant in turn (the order rotating), so a change in the machine's load lands on all of them
alike and the ratios hold on a shared machine.

PostgreSQL variants (a fresh database each, the throwaway cluster of the tests): ``full`` is the
schema as shipped; ``no_tri`` drops the trigram GIN index of messages, ``no_words`` the word
GIN index, ``no_both`` both, ``no_tsv`` both and the stored ``words`` tsvector column. They
measure what the server's inline text indexing costs a batch (grep needs all of it: these
are not usable schemas). ``deferred`` is a prototype of taking it off the ingest path:
``words`` a plain column ingest leaves NULL, the trigram index partial on ``words IS NOT
NULL``, and the debt paid after ingest by ``UPDATE ... SET words = lcm_tsv(content)``, 5,000
rows a statement, timed apart (grep does not read its unpaid tail: a measurement only).
``side`` is another: messages as ``no_tsv``, and a side table ``message_text(id, content,
words)`` holding both GIN indexes, filled after ingest by ``INSERT ... SELECT`` 5,000 rows a
statement (the payment inserts rows instead of rewriting them: no dead versions, the
messages table's six b-trees untouched; it stores each text twice).
Each PostgreSQL variant also reports its server backends' CPU a message (read from ``/proc``,
so only for the local cluster): less noisy than the wall time on a shared machine.

SQLite variants (a fresh file each): ``shipped`` is ``LcmStore.ingest`` (the trigram tail paid
inline past ``lcm.trigram.MAX_PENDING``); ``unbounded`` leaves the whole trigram debt to later;
``*_b500`` send batches of 500 instead of 100 (same messages, same conversations);
``flush_1mb`` is ``shipped`` with the trigram index's FTS5 flush size back at its 1 MB default
(the 'before' of migration ``0011_trigram_flush_size``). ``--variants`` picks some of them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.lcm_pg_bench import _message
from lcm import LcmConfig, LcmStore
from lcm.db import sqlite_only
from lcm.ingest import store_messages
from lcm.normalize import normalize_messages
from lcm.sessions import resolve_conversation

if TYPE_CHECKING:
    import psycopg

_PG_DEFERRED = ["ALTER TABLE messages ALTER COLUMN words DROP EXPRESSION", "DROP INDEX messages_trigrams",
                "CREATE INDEX messages_trigrams ON messages USING gin (content gin_trgm_ops) WHERE words IS NOT NULL"]
_PAY_CHUNK = 5000
_PG = ("full", "no_tri", "no_words", "no_both", "no_tsv", "deferred", "side")
_PG_SIDE = ["DROP INDEX messages_trigrams", "DROP INDEX messages_words", "ALTER TABLE messages DROP COLUMN words",
            "CREATE TABLE message_text (id BIGINT PRIMARY KEY, content TEXT NOT NULL, words tsvector NOT NULL)",
            "CREATE INDEX message_text_words ON message_text USING gin (words)",
            "CREATE INDEX message_text_trigrams ON message_text USING gin (content gin_trgm_ops)"]
_PG_DDL = {"no_tri": ["DROP INDEX messages_trigrams"], "no_words": ["DROP INDEX messages_words"],
           "no_both": ["DROP INDEX messages_trigrams", "DROP INDEX messages_words"],
           "no_tsv": ["DROP INDEX messages_trigrams", "DROP INDEX messages_words",
                      "ALTER TABLE messages DROP COLUMN words"], "deferred": _PG_DEFERRED,
           "side": _PG_SIDE}  # fmt: skip
_SQLITE = ("shipped", "unbounded", "shipped_b500", "unbounded_b500", "flush_1mb")


def _plain(store: LcmStore) -> Callable[[str, list[dict[str, object]]], None]:
    def ingest(key: str, msgs: list[dict[str, object]]) -> None:
        store.ingest(key, msgs)

    return ingest


def _sqlite_ingest(store: LcmStore, bound: int | None) -> Callable[[str, list[dict[str, object]]], None]:
    """``store.ingest`` as shipped, or its body with the trigram bound lifted (nothing paid inline)."""
    if bound is None:
        return _plain(store)

    def ingest(key: str, msgs: list[dict[str, object]]) -> None:
        now = store._now()
        batch = normalize_messages(msgs, now)
        with sqlite_only(store.db, "ingest").atomic() as c:
            conv, _, _ = resolve_conversation(c, key, None, now)
            store_messages(c, conv, batch, store.config, store.files, now, trigram_max_pending=bound)

    return ingest


def _backend_cpu(url: str) -> dict[int, float] | None:
    """CPU seconds of every server backend on ``url``'s database (None when ``/proc`` cannot show them)."""
    import os

    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        pids = [int(r[0]) for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")]  # fmt: skip
    out: dict[int, float] = {}
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None
    return out


def _interleave(variants: dict[str, tuple[Callable[[str, list[dict[str, object]]], None], int]], n: int,
                convs: int) -> dict[str, dict[str, float]]:  # fmt: skip
    """Feed ``n`` messages to every variant (``(ingest, batch size)``), a 500-message round at a time."""
    names = list(variants)
    wall = dict.fromkeys(names, 0.0)
    cpu = dict.fromkeys(names, 0.0)
    for k, start in enumerate(range(0, n, 500)):
        msgs = [_message(i) for i in range(start, min(n, start + 500))]
        for name in names[k % len(names):] + names[:k % len(names)]:
            ingest, size = variants[name]
            t, c = time.perf_counter(), time.process_time()
            for b in range(0, len(msgs), size):
                ingest(f"agent:bench:c{((start + b) // size) % convs}", msgs[b : b + size])
            wall[name] += time.perf_counter() - t
            cpu[name] += time.process_time() - c
    return {v: {"msgs_per_s": round(n / wall[v]), "msgs_per_client_cpu_s": round(n / cpu[v]),
                "client_busy": round(cpu[v] / wall[v], 2)} for v in names}  # fmt: skip


def _count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    if row is None:
        raise RuntimeError(f"no row from {sql!r}")
    return int(row[0])


def _pay_deferred(url: str, ingest_per_s: float, n: int, *, side: bool = False) -> dict[str, float]:
    """The ``deferred`` (or ``side``) variant's debt paid (every ``words`` computed, so both GIN
    indexes take the rows), and what ingest plus payment come to."""
    import psycopg

    pay = ("INSERT INTO message_text SELECT id, content, lcm_tsv(content) FROM messages WHERE id > %s AND id <= %s"
           if side else "UPDATE messages SET words = lcm_tsv(content) WHERE id > %s AND id <= %s AND words IS NULL")
    with psycopg.connect(url, autocommit=True) as conn:
        t = time.perf_counter()
        top = _count(conn, "SELECT coalesce(max(id), 0) FROM messages")
        for low in range(0, top, _PAY_CHUNK):
            conn.execute(pay, [low, low + _PAY_CHUNK])
        paid_s = time.perf_counter() - t
        left = _count(conn, "SELECT count(*) - (SELECT count(*) FROM message_text) FROM messages" if side
                      else "SELECT count(*) FROM messages WHERE words IS NULL")  # fmt: skip
    if left:
        raise RuntimeError(f"the {'side' if side else 'deferred'} variant still owes {left} messages after paying")
    return {"payment_msgs_per_s": round(n / paid_s), "ingest_plus_payment_msgs_per_s": round(n / (n / ingest_per_s + paid_s))}


def _check_stored(stores: list[LcmStore], n: int) -> None:
    """Every variant stored every message (a variant that dropped some would look fast)."""
    counts = [int(s.db.scalar("SELECT count(*) FROM messages")) for s in stores]
    if counts != [n] * len(stores):
        raise RuntimeError(f"variants stored {counts} messages, expected {n} each")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["postgresql", "sqlite"], required=True)
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--variants", help="comma-separated variants of the engine (default: all)")
    args = ap.parse_args(argv)
    chosen = args.variants.split(",") if args.variants else list(_SQLITE if args.engine == "sqlite" else _PG)
    unknown = sorted(set(chosen) - set(_SQLITE if args.engine == "sqlite" else _PG))
    if unknown:
        ap.error(f"unknown {args.engine} variants: {', '.join(unknown)}")
    cfg = LcmConfig(log_file_enabled=False)
    stores: list[LcmStore] = []
    if args.engine == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            variants = {}
            for name in chosen:
                store = LcmStore(str(Path(tmp) / f"{name}.db"), cfg)
                stores.append(store)
                if name == "flush_1mb":
                    with sqlite_only(store.db, "bench").atomic() as c:
                        c.execute("INSERT INTO messages_tri(messages_tri, rank) VALUES ('hashsize', ?)", (2**20,))
                variants[name] = (_sqlite_ingest(store, 10**12 if name.startswith("unbounded") else None),
                                  500 if name.endswith("_b500") else 100)  # fmt: skip
            try:
                report = _interleave(variants, args.size, args.conversations)
                _check_stored(stores, args.size)
            finally:
                for s in stores:
                    s.close()
    else:
        import psycopg

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.pgcluster import start_cluster

        cluster = start_cluster()
        try:
            variants = {}
            urls: dict[str, str] = {}
            for name in chosen:
                url = urls[name] = cluster.create_database("lcm_parts")
                store = LcmStore(url, cfg)
                stores.append(store)
                with psycopg.connect(url, autocommit=True) as conn:
                    for ddl in _PG_DDL.get(name, []):
                        conn.execute(ddl)
                variants[name] = (_plain(store), 100)
            before = {name: _backend_cpu(url) for name, url in urls.items()}
            report = _interleave(variants, args.size, args.conversations)
            for name, url in urls.items():
                start, end = before[name], _backend_cpu(url)
                if start is not None and end is not None:
                    spent = sum(cpu - start.get(pid, 0.0) for pid, cpu in end.items())
                    report[name]["server_cpu_us_per_msg"] = round(spent / args.size * 1e6, 1)
            _check_stored(stores, args.size)
            if "deferred" in report:
                report["deferred"].update(_pay_deferred(urls["deferred"], report["deferred"]["msgs_per_s"], args.size))
            if "side" in report:
                report["side"].update(_pay_deferred(urls["side"], report["side"]["msgs_per_s"], args.size, side=True))
        finally:
            for s in stores:
                s.close()
            cluster.stop()
    base = next(iter(report.values()))
    for row in report.values():
        row["ratio_wall"] = round(row["msgs_per_s"] / base["msgs_per_s"], 2)
        row["ratio_cpu"] = round(row["msgs_per_client_cpu_s"] / base["msgs_per_client_cpu_s"], 2)
    print(json.dumps({"engine": args.engine, "messages": args.size, "results": report}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
