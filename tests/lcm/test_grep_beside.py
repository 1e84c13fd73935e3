"""A semantic or hybrid grep reads what needs no vector (the word leg, the items without one,
the scope's mean) on a worker while the question is embedded (``amem.kernel.beside``), and in
its own thread when it is already inside a read group of the store.

What ran where is read from SQLite's own statement trace (``set_trace_callback`` calls back in
the thread that runs the statement), not from a patched method."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock

KEY = "agent:a:main"
TURNS = [f"turn {i}: we talked about the {'zeppelin tickets' if i % 5 == 0 else 'weather'} today"
         for i in range(60)]


class GateEmbedder:
    """The hashing embedder, whose query embedding waits until the word leg has been read:
    a grep that read it only after the embedding would time out here and fail."""

    def __init__(self, word_leg_read: threading.Event) -> None:
        self._inner = HashingEmbedder(64)
        self.model_id, self.dim = self._inner.model_id, self._inner.dim
        self._read = word_leg_read
        self.waited: list[bool] = []
        self.threads: list[str] = []
        self.fail = False

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        if kind == "query":
            self.threads.append(threading.current_thread().name)
            self.waited.append(self._read.wait(timeout=10))
            if self.fail:
                raise RuntimeError("injected embedder failure")
        return self._inner.embed(texts, kind=kind)


def _store(embedder: object) -> LcmStore:
    store = LcmStore(":memory:", LcmConfig(log_file_enabled=False), clock=ManualClock(),
                     embedder=embedder)  # type: ignore[arg-type]
    store.ingest(KEY, [{"role": "user", "content": t} for t in TURNS])
    store.embed_pending()
    return store


def _traced(store: LcmStore, word_leg_read: threading.Event) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def trace(sql: str) -> None:
        seen.append((threading.current_thread().name, sql))
        if " MATCH " in sql:
            word_leg_read.set()

    store.db.conn.set_trace_callback(trace)  # type: ignore[attr-defined]
    return seen


def test_the_word_leg_is_read_on_a_worker_while_the_question_is_embedded() -> None:
    read = threading.Event()
    emb = GateEmbedder(read)
    read.set()  # the store's own embedding of the turns does not wait
    with _store(emb) as store:
        read.clear()
        seen = _traced(store, read)
        res = store.grep("where are the zeppelin tickets", mode="hybrid", session_key=KEY, limit=5)
        store.db.conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert emb.waited == [True]
    assert emb.threads == [threading.current_thread().name]
    word_leg = [name for name, sql in seen if " MATCH " in sql]
    assert word_leg and all(name.startswith("amem-beside") for name in word_leg)
    # the vector scan needs the vector: it runs here, after the embedding
    scan = [name for name, sql in seen if "SELECT v.message_id, v.scale, v.vector" in sql]
    assert scan and all(name == threading.current_thread().name for name in scan)
    assert res.hits and all("zeppelin" in h.snippet for h in res.hits)


#: the grep inside a read group, in a child process: were its reads sent to a worker, they would
#: wait for the lock the caller holds while the caller waits for them, and a deadlocked worker
#: thread would keep this test process from ever exiting; the child is killed instead
_INSIDE = """
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from test_grep_beside import KEY, GateEmbedder, _store
ready = threading.Event()
ready.set()
with _store(GateEmbedder(ready)) as store:
    names = set()
    store.db.conn.set_trace_callback(lambda sql: names.add(threading.current_thread().name))
    with store.db.reading():
        res = store.grep("zeppelin tickets", mode="hybrid", session_key=KEY, limit=5)
    store.db.conn.set_trace_callback(None)
print(json.dumps({"threads": sorted(names), "hits": [[h.id, h.score] for h in res.hits]}))
"""


def test_inside_a_read_group_the_reads_stay_in_the_callers_thread_and_find_the_same() -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    ready = threading.Event()
    ready.set()
    with _store(GateEmbedder(ready)) as store:
        alone = store.grep("zeppelin tickets", mode="hybrid", session_key=KEY, limit=5)
    try:
        child = subprocess.run([sys.executable, "-c", _INSIDE, str(Path(__file__).parent)],
                               capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a grep inside a read group waited for its own lock (killed after 60 s)")
    assert child.returncode == 0, child.stderr
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert out["threads"] == ["MainThread"]
    assert [tuple(h) for h in out["hits"]] == [(h.id, h.score) for h in alone.hits]


def test_an_embedder_error_is_raised_after_the_reads_end_and_loses_nothing() -> None:
    read = threading.Event()
    read.set()  # the embedder fails at once, while the worker is still reading
    emb = GateEmbedder(read)
    with _store(emb) as store:
        seen: list[str] = []

        def slow_word_leg(sql: str) -> None:
            if "summaries_fts MATCH" in sql:  # the word leg's last query (messages, then summaries)
                time.sleep(0.3)
                seen.append("word leg read")

        store.db.conn.set_trace_callback(slow_word_leg)  # type: ignore[attr-defined]
        emb.fail = True
        with pytest.raises(RuntimeError, match="injected embedder failure"):
            store.grep("zeppelin tickets", mode="hybrid", session_key=KEY, limit=5)
        # the error came out only once the worker's reads had ended: none outlives the grep
        assert seen == ["word leg read"]
        store.db.conn.set_trace_callback(None)  # type: ignore[attr-defined]
        emb.fail = False
        assert store.grep("zeppelin tickets", mode="hybrid", session_key=KEY, limit=5).hits
        assert store.status().messages == len(TURNS)


def test_greps_on_eight_threads_find_what_each_finds_alone() -> None:
    """The workers are shared by every grep (and search) of the process, and SQLite's one
    connection by every thread: greps running at once, each with reads on a worker, find
    exactly what each finds alone, for two conversations."""
    from concurrent.futures import ThreadPoolExecutor

    ready = threading.Event()
    ready.set()
    with _store(GateEmbedder(ready)) as store:
        other = "agent:b:main"
        store.ingest(other, [{"role": "user", "content": f"note {i}: the zeppelin sails at dawn {i}"}
                             for i in range(20)])
        store.embed_pending()
        jobs = [(key, mode, q) for key in (KEY, other) for mode in ("hybrid", "semantic")
                for q in ("zeppelin tickets", "weather today", "turn 15", "dawn")]

        def found(job: tuple[str, str, str]) -> list[tuple[str, float]]:
            key, mode, q = job
            return [(h.id, h.score) for h in store.grep(q, mode=mode, session_key=key, limit=5).hits]

        alone = [found(job) for job in jobs]
        assert all(alone)
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(found, jobs * 5))
    assert together == alone * 5
