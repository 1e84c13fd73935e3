"""A starting server waits a moment for a command that holds the store (a supervisor's restart
while `amem add` runs exited at once with exit 4), and still says who holds it past the wait."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from amem.backends._lock import StoreLock
from amem.errors import StoreLockedError
from tools.cli.serve import open_waiting
from tools.runtime import Runtime


def _runtime(home: Path) -> Runtime:
    return Runtime.load({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing"})


def test_a_store_held_briefly_is_opened_once_it_is_free(tmp_path: Path) -> None:
    with _runtime(tmp_path) as setup:  # the store exists
        setup.memory.add("a note", enrich=False)
        store_dir = Path(setup.settings.amem.store_path)
    held = StoreLock(store_dir)
    held.acquire()  # as `amem add` in another process would
    threading.Timer(0.6, held.release).start()
    with _runtime(tmp_path) as rt:
        memory = open_waiting(rt, wait_s=10)
        assert memory.count() == 1


def test_past_the_wait_the_holder_is_named(tmp_path: Path) -> None:
    with _runtime(tmp_path) as rt:
        store_dir = Path(rt.settings.amem.store_path)
        rt.memory  # noqa: B018 - opened (and so held) by this runtime
        with _runtime(tmp_path) as other, pytest.raises(StoreLockedError) as refused:
            open_waiting(other, wait_s=0.3)
    assert str(store_dir) in str(refused.value)
