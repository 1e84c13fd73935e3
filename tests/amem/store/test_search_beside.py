"""Steps 1 and 2 side by side (``amem.search.beside``): the BM25 leg is read on a worker while
the query is embedded, with the same results, and no error of either is lost or outlives the
search."""

from __future__ import annotations

import os
import threading
import time
import warnings
from typing import Any, Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.errors import BackendError
from amem.kernel import beside

NOTES = ["Caroline went to the LGBTQ support group on Tuesday",
         "Melanie painted a sunrise over the lake last year",
         "Caroline is researching adoption agencies",
         "Melanie signed up for a pottery class yesterday"]


class WatchedEngine:
    """An edge engine that says when its sparse search starts and ends, and on which thread;
    ``fail`` makes that search raise as the engine does, ``slow`` makes it take that long."""

    def __init__(self, inner: EdgeBackend) -> None:
        self.inner = inner
        self.started = threading.Event()
        self.ended = threading.Event()
        self.threads: list[str] = []
        self.fail = False
        self.slow = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def sparse_search(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.current_thread().name)
        self.started.set()
        try:
            time.sleep(self.slow)
            if self.fail:
                raise BackendError("qdrant-edge sparse search failed: injected")
            return self.inner.sparse_search(*args, **kwargs)
        finally:
            self.ended.set()


class QueryGate:
    """A hashing embedder whose query embedding waits until the engine's sparse search has
    started (at most ``timeout`` s), and says whether it saw it start; ``fail`` raises."""

    def __init__(self, engine: WatchedEngine, timeout: float = 5.0) -> None:
        self.inner = HashingEmbedder(dim=64)
        self.engine = engine
        self.timeout = timeout
        self.saw_leg: list[bool] = []
        self.fail = False

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], kind: Any = "passage") -> np.ndarray:
        if kind == "query":
            self.saw_leg.append(self.engine.started.wait(self.timeout))
            if self.fail:
                raise RuntimeError("the embedder broke")
        return self.inner.embed(texts, kind=kind)


def make_store() -> tuple[MemoryStore, WatchedEngine, QueryGate]:
    engine = WatchedEngine(EdgeBackend.temporary(64))
    embedder = QueryGate(engine)
    store = MemoryStore(config=load_config(overrides={"heat": False}), embedder=embedder,
                        backend=engine)  # type: ignore[arg-type]
    for text in NOTES:
        store.add(text, enrich=False)
    engine.started.clear()
    engine.ended.clear()
    return store, engine, embedder


def test_the_bm25_leg_runs_on_a_worker_while_the_query_is_embedded() -> None:
    store, engine, embedder = make_store()
    with store:
        found = store.search("Caroline adoption agencies", limit=2, expand_links=False)
        # the embedding waited for the leg to start: had the leg waited for the embedding,
        # the wait would have timed out (5 s) and said so
        assert embedder.saw_leg == [True]
        assert engine.threads and engine.threads[0] != threading.current_thread().name
        assert engine.threads[0].startswith("amem-beside")
        assert found[0].content == NOTES[2]
        assert found[0].found_by == "both"


def test_a_query_without_terms_embeds_alone() -> None:
    store, engine, embedder = make_store()
    embedder.timeout = 0.05
    with store:
        store.search("the of and", limit=2, expand_links=False)  # stop words only
        assert embedder.saw_leg == [False] and engine.threads == []


def test_an_embedding_error_is_raised_after_the_leg_has_ended() -> None:
    """No engine call outlives the search that started it: the store can close right away."""
    store, engine, embedder = make_store()
    with store:
        embedder.fail = True
        engine.slow = 0.3
        with pytest.raises(RuntimeError, match="the embedder broke"):
            store.search("Melanie pottery", limit=2)
        assert engine.ended.is_set()
        embedder.fail, engine.slow = False, 0.0
        assert store.search("Melanie pottery", limit=1)[0].content == NOTES[3]


def test_an_engine_error_of_the_leg_reaches_the_caller_and_loses_nothing() -> None:
    store, engine, _ = make_store()
    with store:
        engine.fail = True
        with pytest.raises(BackendError, match="sparse search failed: injected"):
            store.search("Melanie painted", limit=2)
        engine.fail = False
        assert store.count() == len(NOTES)
        assert store.search("Melanie painted", limit=1)[0].content == NOTES[1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_gets_workers_of_its_own() -> None:
    """A child inherits the pool's object but none of its threads: it must make its own, or
    its first search would wait forever for a leg no thread runs."""
    parent_pool = beside._workers()
    assert parent_pool.submit(lambda: 1).result(timeout=5) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            pool = beside._workers()
            ok = pool is not parent_pool and pool.submit(lambda: 2).result(timeout=5) == 2
            store = MemoryStore(":memory:", config=load_config(),
                                embedder=HashingEmbedder(dim=32))
            store.add(NOTES[0], enrich=False)
            ok = ok and store.search("support group", limit=1)[0].content == NOTES[0]
            store.close()
            code = 0 if ok else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert beside._workers() is parent_pool


def test_searches_of_two_tenants_at_once_each_get_their_own_leg() -> None:
    """The workers are shared by every search of the process: searches running at once on
    several threads, for two agents, find what each finds alone (a leg's hits never reach
    another search, another tenant's least of all)."""
    from concurrent.futures import ThreadPoolExecutor

    store = MemoryStore(":memory:", embedder=HashingEmbedder(dim=64),
                        config=load_config(overrides={"heat": False, "link_expansion": False}))
    with store:
        for agent, words in (("ann", "violin concert Vienna"), ("bob", "violin repair Oslo")):
            for n in range(12):
                store.add(f"{agent} note {n}: {words} {n}", agent_id=agent, enrich=False)
        queries = [(agent, q) for agent in ("ann", "bob")
                   for q in ("violin", "concert", "repair Oslo", "note 3", "Vienna 7")]

        def found(job: tuple[str, str]) -> list[str]:
            agent, query = job
            return [r.id for r in store.search(query, limit=5, agent_id=agent)]

        alone = [found(job) for job in queries]
        assert any(alone[:5]) and any(alone[5:])
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(found, queries * 6))
        assert together == alone * 6
        mine = {agent: {n.id for n in store.list(agent_id=agent, limit=100)[0]}
                for agent in ("ann", "bob")}
        for (agent, _), ids in zip(queries * 6, together):
            assert set(ids) <= mine[agent]
