"""The semantic scan on PostgreSQL streams: a server-side cursor, a bounded batch per fetch,
and the same nearest items as SQLite however the scan is cut (ties at the cut included)."""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.db import Database
from lcm.pg.semantic import PgSemanticIndex
from lcm.vectors import top_k

KEY = "agent:a:main"
#: 8 texts, 8 copies each: 64 vectors where every score is shared by 8 rows, so a top k
#: cuts through ties and only the tie rule (lower id first) decides which rows are kept
WORDS = ["engine broke down", "budget review moved", "puppy named Biscuit", "schema deployed Friday",
         "taxes due in April", "travel to Lisbon", "cache timeout again", "worker queue stalled"]  # fmt: skip
MESSAGES = [{"role": "user", "content": f"note about {WORDS[i % 8]}", "event_id": f"e{i}",
             "created_at": f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}Z"} for i in range(64)]  # fmt: skip
QUERIES = ["engine budget", "puppy travel Lisbon", "cache worker", "Friday taxes"]


def _store(where: str, clock: ManualClock) -> LcmStore:
    store = LcmStore(where, LcmConfig(log_file_enabled=False), clock=clock, embedder=HashingEmbedder(64))
    store.ingest(KEY, MESSAGES)
    assert store.embed_pending().embedded_messages == len(MESSAGES)
    return store


def test_top_k_keeps_the_lower_ids_among_rows_tied_at_the_cut() -> None:
    ids = np.array([9, 3, 7, 1, 5, 2], dtype=np.int64)
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1, 0.5], dtype=np.float32)
    assert top_k(ids, scores, 3)[0].tolist() == [3, 1, 2]
    # merged batch by batch, in any order, the answer is the same as in one piece
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 0, 4, 1, 5, 3]):
        best_ids, best = ids[:0], scores[:0]
        for i in order:
            best_ids, best = top_k(np.append(best_ids, ids[i]), np.append(best, scores[i]), 3)
        assert best_ids.tolist() == [3, 1, 2]


def test_a_scan_of_many_batches_finds_what_sqlite_finds(pg_clean_url: str, clock: ManualClock) -> None:
    with _store(":memory:", clock) as lite, _store(pg_clean_url, clock) as pg:
        emb = HashingEmbedder(64)
        small = PgSemanticIndex(pg.db, pg.config, emb, scan_batch=5)  # 13 fetches for 64 vectors
        deadline = time.monotonic() + 60
        for q in QUERIES:
            vec = emb.embed([q], kind="query")[0]
            for k in (3, 10, 64):
                want, n_lite, late = lite.semantic.search("message", vec, None, None, None, k, deadline)
                got, n_pg, late_pg = small.search("message", vec, None, None, None, k, deadline)
                assert got == want and n_lite == n_pg == len(MESSAGES) and not late and not late_pg, (q, k)
            # and through the store (its default batch), every sort
            for sort in ("relevance", "recency", "hybrid"):
                a = lite.grep(q, mode="semantic", session_key=KEY, sort=sort, limit=10).hits
                b = pg.grep(q, mode="semantic", session_key=KEY, sort=sort, limit=10).hits
                assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b] and a, (q, sort)


def test_the_scan_holds_one_batch_from_a_server_side_cursor(pg_clean_url: str, clock: ManualClock) -> None:
    with _store(pg_clean_url, clock) as pg:
        small = PgSemanticIndex(pg.db, pg.config, HashingEmbedder(64), scan_batch=5)
        rows = small._scan("SELECT message_id, scale, vector FROM message_vectors", [], time.monotonic() + 60)
        first = next(rows)
        # the scanning session sits in its transaction, having asked the server for 5 rows only
        with psycopg.connect(pg_clean_url, autocommit=True) as other:
            asked = other.execute("SELECT query FROM pg_stat_activity WHERE state = 'idle in transaction' "
                                  "AND datname = current_database()").fetchall()  # fmt: skip
        rows.close()
        assert len(first) == 5 and any(q.startswith("FETCH FORWARD 5") for (q,) in asked), asked
        # a passed deadline: one batch is read, the rest left unread, and the search says so
        vec = HashingEmbedder(64).embed(["engine"], kind="query")[0]
        _, scanned, late = small.search("message", vec, None, None, None, 3, time.monotonic() - 1)
        assert (scanned, late) == (5, True)


def test_scan_batch_must_be_a_positive_integer_and_the_handle_postgres(pg_clean_url: str, clock: ManualClock) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False), clock=clock) as pg:
        for bad in (0, -1, True, 2.5):
            with pytest.raises(ValueError, match="scan_batch"):
                PgSemanticIndex(pg.db, pg.config, None, scan_batch=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a PostgreSQL handle; got Database"):
        PgSemanticIndex(Database(":memory:"), LcmConfig(), None)
