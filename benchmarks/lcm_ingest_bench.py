"""LCM bulk ingest: messages/s of ``LcmStore.ingest``, the old per-row path against the batched one,
with the cost of each full-text index split out, and grep latency on the result.

    python -m benchmarks.lcm_ingest_bench --quick            # seconds: 10k messages
    python -m benchmarks.lcm_ingest_bench                    # 100k messages, every variant
    python -m benchmarks.lcm_ingest_bench --size 1000000 --variants before,after   # minutes
    python -m benchmarks.lcm_ingest_bench --variants inline,after,deferred   # the trigram deferral

Every variant runs in this process on the same messages (batches of 500 into 100
conversations, the shape of ``amem lcm ingest``), each into a fresh file-backed database:

* ``before``: the ingest path before batching, kept here as the baseline: one statement per
  message, per-message duplicate and replay look-ups, the indexes fed by their insert triggers.
* ``after``: ``LcmStore.ingest`` as shipped.
* ``inline``: the shipped batched path with the trigram index fed inside ingest's transaction
  (``trigram_max_pending=0``: ingest before the trigram deferral).
* ``deferred``: the shipped path with no bound on the pending tail: ingest leaves all trigram
  indexing owed; ``index_trigrams`` then pays it, timed on its own (``pay_*``), with grep
  timed before (the tail read directly) and after the payment.
* ``after_no_trigram`` / ``after_no_words`` / ``after_no_index``: ``LcmStore.ingest`` with the
  trigram index, the word index, or both replaced by plain rowid tables (the same statements
  run, the FTS5 work does not): the difference to ``after`` is what that index costs.

Wall seconds and this process's CPU seconds are both reported; on a shared machine the CPU
figure is the steadier one (the shares of the indexes are computed from it).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.lcm_bench import _message
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.db import sqlite_only
from lcm.errors import ReplayFloodError
from lcm.ingest import store_messages
from lcm.normalize import NormalizedMessage, normalize_messages
from lcm.sessions import resolve_conversation
from lcm.tokens import estimate_tokens
from lcm.trigram import MAX_PENDING

BATCH = 500
CONVERSATIONS = 100
VARIANTS = ("before", "after", "after_no_trigram", "after_no_words", "after_no_index", "inline", "deferred")
#: the trigram variants (lcm.trigram): the pending-tail bound each ingests with (None: no bound)
_TRIGRAM_BOUND = {"inline": 0, "after": MAX_PENDING, "deferred": None}
#: the plain tables standing in for an index a variant leaves out
_PLAIN = {"after_no_trigram": ("messages_tri",), "after_no_words": ("messages_fts",),
          "after_no_index": ("messages_fts", "messages_tri")}


def _config() -> LcmConfig:
    return LcmConfig(log_file_enabled=False, replay_flood_threshold_external=1000,
                     replay_flood_threshold_internal=1000)


def _legacy_store(c: sqlite3.Connection, conversation_id: int, batch: list[NormalizedMessage],
                  cfg: LcmConfig) -> int:
    """The per-row ingest of commit 9eb2126 (its large-file branch left out: the corpus has none)."""
    keep = []
    for m in batch:
        if m.stable_event_key is not None and c.execute(
                "SELECT 1 FROM messages WHERE conversation_id = ? AND stable_event_key = ?",
                (conversation_id, m.stable_event_key)).fetchone():
            continue
        if m.explicit_time and c.execute(
                "SELECT 1 FROM messages WHERE conversation_id = ? AND identity_hash = ? AND created_at = ?",
                (conversation_id, m.identity_hash, m.created_at)).fetchone():
            continue
        keep.append(m)
    recent = [r[0] for r in c.execute(
        "SELECT identity_hash FROM messages WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?",
        (conversation_id, len(keep) * 2 + 64))][::-1]
    assert recent[-2:] != [m.identity_hash for m in keep[:2]]  # the corpus never overlaps
    groups = Counter((m.role, m.identity_hash, m.created_at[:19]) for m in keep)
    for (role, ident, second), count in groups.items():
        stored = c.execute(
            "SELECT count(*) FROM messages WHERE conversation_id = ? AND identity_hash = ? AND created_at >= ? "
            "AND created_at < ?", (conversation_id, ident, second, second + "\x7f")).fetchone()[0]
        if count + stored > cfg.replay_flood_threshold_external:
            raise ReplayFloodError("flood", role=role, count=count + stored, threshold=0)
    seq = c.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE conversation_id = ?",
                    (conversation_id,)).fetchone()[0]
    ordinal = c.execute("SELECT coalesce(max(ordinal), 0) FROM context_items WHERE conversation_id = ?",
                        (conversation_id,)).fetchone()[0]
    for m in keep:
        seq += 1
        ordinal += 1
        cur = c.execute(
            "INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, "
            "stable_event_key, file_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, seq, m.role, m.content, estimate_tokens(m.content), m.identity_hash,
             m.stable_event_key, None, m.created_at))
        c.execute("INSERT INTO context_items(conversation_id, ordinal, item_type, message_id) "
                  "VALUES (?, ?, 'message', ?)", (conversation_id, ordinal, cur.lastrowid))
    return len(keep)


def _open(path: Path, variant: str) -> LcmStore:
    store = LcmStore(path, _config(), clock=ManualClock())
    for table in _PLAIN.get(variant, ()):
        with sqlite_only(store.db, "ingest").atomic() as c:
            c.execute(f"DROP TABLE {table}")
            for trigger in ("ai", "ad", "au"):  # they belong to messages, not to the index
                c.execute(f"DROP TRIGGER {table}_{trigger}")
            c.execute(f"CREATE TABLE {table} (rowid INTEGER PRIMARY KEY, content TEXT, {table} TEXT, rank INT)")
            # FTS5 commands (ingest's per-batch 'merge') are rows here: dropped as they come
            c.execute(f"CREATE TRIGGER {table}_cmd BEFORE INSERT ON {table} WHEN new.{table} IS NOT NULL "
                      "BEGIN SELECT RAISE(IGNORE); END")
            # the insert trigger comes back writing into the plain table, as the real one does
            c.execute(f"CREATE TRIGGER {table}_ai AFTER INSERT ON messages WHEN NOT EXISTS "
                      f"(SELECT 1 FROM lcm_index_deferred) BEGIN INSERT INTO {table}(rowid, content) "
                      "VALUES (new.id, new.content); END")
    return store


def ingest_run(path: Path, variant: str, batches: Sequence[list[dict[str, str]]]) -> tuple[LcmStore, float, float]:
    """Ingest ``batches`` with ``variant``; the store (left open), the wall seconds it took and
    the CPU seconds this process spent (the steadier figure on a shared, loaded machine)."""
    store = _open(path, variant)
    clock: ManualClock = store.clock  # type: ignore[assignment]
    legacy = variant == "before"
    start, cpu = time.perf_counter(), time.process_time()
    for b, msgs in enumerate(batches):
        key = f"agent:bench:c{b % CONVERSATIONS}"
        if legacy:
            now = store._now()
            norm = normalize_messages(msgs, now)
            with sqlite_only(store.db, "ingest").atomic() as c:
                conv, _, _ = resolve_conversation(c, key, None, now)
                _legacy_store(c, conv, norm, store.config)
                c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conv))
        elif variant in ("inline", "deferred"):
            bound = _TRIGRAM_BOUND[variant]
            now = store._now()
            norm = normalize_messages(msgs, now)
            with sqlite_only(store.db, "ingest").atomic() as c:  # LcmStore.ingest's own steps, with the bound set here
                conv, _, _ = resolve_conversation(c, key, None, now)
                store_messages(c, conv, norm, store.config, store.files, now,
                               trigram_max_pending=len(batches) * BATCH + 1 if bound is None else bound)
        else:
            store.ingest(key, msgs)
        clock.advance(1)
    return store, time.perf_counter() - start, time.process_time() - cpu


def corpus(n: int, seed: int = 7) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    messages = [_message(rng, i) for i in range(n)]
    return [messages[i:i + BATCH] for i in range(0, n, BATCH)]


def _grep_ms(store: LcmStore, repeat: int) -> dict[str, dict[str, float]]:
    """Fastest and median of ``repeat`` runs of each case, in ms (the fastest is the steadier
    figure on a loaded machine)."""
    cases: dict[str, Callable[[], Any]] = {
        "full_text_rare_ms": lambda: store.grep("needle-zebra-quartz", mode="full_text", all_conversations=True),
        "regex_rare_literal_ms": lambda: store.grep(r"needle-zebra-\w+", mode="regex", all_conversations=True),
        "full_text_cjk_ms": lambda: store.grep("数据库迁移", mode="full_text", all_conversations=True),
    }
    out: dict[str, dict[str, float]] = {}
    for name, fn in cases.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        out[name] = {"min": round(min(times), 3), "median": round(statistics.median(times), 3)}
    return out


def run(n: int, variants: Sequence[str], repeat: int = 25) -> dict[str, Any]:
    batches = corpus(n)
    out: dict[str, Any] = {"messages": n, "batch": BATCH, "python": sys.version.split()[0],
                           "sqlite": sqlite3.sqlite_version, "variants": {}}
    with tempfile.TemporaryDirectory(prefix="lcm-ingest-bench-") as d:
        for variant in variants:
            store, secs, cpu = ingest_run(Path(d) / f"{variant}.db", variant, batches)
            row: dict[str, Any] = {"seconds": round(secs, 2), "msgs_per_s": round(n / secs),
                                   "cpu_seconds": round(cpu, 2), "msgs_per_cpu_s": round(n / cpu)}
            stored = store.db.scalar("SELECT count(*) FROM messages")
            assert stored == n, f"{variant} stored {stored} of {n}"
            if variant == "deferred":
                row["trigram_debt"] = store.status().debt.trigram  # type: ignore[union-attr]
                row["grep_with_debt"] = _grep_ms(store, 3)
                start, cpu = time.perf_counter(), time.process_time()
                paid = store.index_trigrams()
                pay_s, pay_cpu = time.perf_counter() - start, time.process_time() - cpu
                row.update(pay_seconds=round(pay_s, 2), pay_msgs_per_s=round(paid / pay_s),
                           pay_cpu_seconds=round(pay_cpu, 2), pay_msgs_per_cpu_s=round(paid / pay_cpu),
                           ingest_plus_pay_msgs_per_cpu_s=round(n / (cpu_total := row["cpu_seconds"] + pay_cpu)),
                           ingest_plus_pay_cpu_seconds=round(cpu_total, 2))
            if variant in ("before", "after", "inline", "deferred"):
                row["grep"] = _grep_ms(store, repeat)
                row["hits_rare"] = len(store.grep("needle-zebra-quartz", mode="full_text",
                                                  all_conversations=True).hits)
                row["db_bytes"] = store.status().size_bytes
                row["index_segments"] = {t: store.db.scalar(f"SELECT count(DISTINCT segid) FROM {t}_idx")
                                         for t in ("messages_fts", "messages_tri")}
            store.close()
            for suffix in ("", "-wal", "-shm"):  # keep the disk use to one database at a time
                Path(d, f"{variant}.db{suffix}").unlink(missing_ok=True)
            out["variants"][variant] = row
            print(f"# {variant}: {row}", file=sys.stderr, flush=True)
    out["ratios"] = ratios(out["variants"])
    return out


def ratios(rows: dict[str, Any]) -> dict[str, float]:
    """after/before speed-up (wall and CPU), and each index's share of the shipped path's CPU time."""
    got: dict[str, float] = {}
    if "before" in rows and "after" in rows:
        got["after_vs_before"] = round(rows["before"]["seconds"] / rows["after"]["seconds"], 2)
        got["after_vs_before_cpu"] = round(rows["before"]["cpu_seconds"] / rows["after"]["cpu_seconds"], 2)
    if "inline" in rows and "deferred" in rows:
        got["deferred_vs_inline_cpu"] = round(rows["inline"]["cpu_seconds"] / rows["deferred"]["cpu_seconds"], 2)
        got["deferred_vs_inline"] = round(rows["inline"]["seconds"] / rows["deferred"]["seconds"], 2)
    if "after" in rows:
        total = rows["after"]["cpu_seconds"]
        for variant, name in (("after_no_trigram", "trigram_share"), ("after_no_words", "words_share"),
                              ("after_no_index", "both_indexes_share")):
            if variant in rows:
                got[name] = round(1 - rows[variant]["cpu_seconds"] / total, 2)
    return got


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10k messages; runs in seconds")
    parser.add_argument("--size", type=int, default=100_000, help="messages (default 100000)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated of {VARIANTS}")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {VARIANTS}")
    print(json.dumps(run(10_000 if args.quick else args.size, variants), indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
