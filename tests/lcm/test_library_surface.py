"""LcmStore as a library: a wrong-kind config, use after close and pickling fail with an error
in lcm's tree (or a TypeError) that names what the caller did."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmConfig, LcmError, LcmStore
from lcm.errors import StoreClosedError


def test_a_dict_for_the_config_is_refused_by_argument() -> None:
    bad: Any = {"freshTailCount": 8}
    with pytest.raises(TypeError, match="config must be an LcmConfig.*dict"):
        LcmStore(":memory:", config=bad)  # was: AttributeError 'dict' has no attribute 'database_path'


def test_every_call_after_close_is_an_lcm_error_naming_the_store(tmp_path: Path) -> None:
    db = tmp_path / "lcm.db"
    store = LcmStore(db, LcmConfig(log_file_enabled=False))
    store.ingest("k", [{"role": "user", "content": "hi"}])
    store.close()
    store.close()  # twice is fine
    for call in (lambda: store.ingest("k", [{"role": "user", "content": "hi"}]), store.status,
                 lambda: store.grep("hi", mode="full_text", session_key="k")):
        with pytest.raises(LcmError, match=f"conversation store {db} is closed") as info:
            call()  # was: a bare sqlite3.ProgrammingError, outside lcm's tree
        assert isinstance(info.value, StoreClosedError) and info.value.code == "store_closed"
        assert isinstance(info.value, sqlite3.ProgrammingError)  # what callers caught before


def test_pickling_a_store_says_to_open_it_in_the_other_process() -> None:
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as store:
        with pytest.raises(TypeError, match="open the store in that process"):
            pickle.dumps(store)  # was: cannot pickle 'sqlite3.Connection' object


def test_help_shows_a_docstring_for_every_public_method_of_the_entry_classes() -> None:
    import inspect

    from amem import MemoryStore
    from tools import ToolFacade

    for cls in (LcmStore, MemoryStore, ToolFacade):
        bare = [name for name, f in inspect.getmembers(cls, inspect.isfunction)
                if not name.startswith("_") and not (f.__doc__ or "").strip()]
        assert not bare, f"{cls.__name__}: {bare}"  # LcmStore.close and doctor_clean had none


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork only")
def test_a_forked_child_is_told_to_open_its_own_store(tmp_path: Path) -> None:
    """A SQLite connection must not cross a fork; the child wrote through the parent's."""
    import multiprocessing

    from lcm.errors import ForkedStoreError

    store = LcmStore(tmp_path / "lcm.db", LcmConfig(log_file_enabled=False))
    store.ingest("k", [{"role": "user", "content": "parent"}])
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        try:
            store.ingest("k", [{"role": "user", "content": "child"}])
            queue.put("stored")
        except ForkedStoreError as exc:
            store.close()  # the parent's connection: left alone
            with LcmStore(tmp_path / "lcm.db", LcmConfig(log_file_enabled=False)) as own:
                own.ingest("k", [{"role": "user", "content": "child"}])
            queue.put(f"{exc.code} {exc.owner_pid}")

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(60)
    assert queue.get(timeout=5) == f"store_forked {__import__('os').getpid()}"
    assert store.status().messages == 2  # the parent's connection still works and sees both
    store.close()


@pytest.mark.parametrize("path", ["", 123])
def test_an_empty_or_wrong_kind_path_is_refused_by_name(path: Any) -> None:
    with pytest.raises(ValueError, match="path must be a database file"):  # was: "the conversation store  cannot be opened"
        LcmStore(path)
