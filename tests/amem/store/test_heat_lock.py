"""A search counts its retrievals under the store's write lock, and never waits long for it."""

from __future__ import annotations

import threading

from amem import MemoryStore


def test_heat_is_counted_under_the_write_lock(edge_store: MemoryStore) -> None:
    store = edge_store
    store.add("Alice drinks green tea every morning", id="n1", enrich=False)
    held, release = threading.Event(), threading.Event()

    def writer() -> None:  # another change in progress (a consolidation, an import)
        with store.index.lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    assert held.wait(5)
    try:
        assert [r.id for r in store.search("green tea", limit=1)] == ["n1"]
        # the search answered, but wrote nothing while another change held the lock
        note, _ = store.index.load("n1", store.agent_id)
        assert note.retrieval_count == 0
    finally:
        release.set()
        thread.join()
    store.search("green tea", limit=1)
    assert store.index.load("n1", store.agent_id)[0].retrieval_count == 1
