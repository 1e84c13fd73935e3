"""The store as a library: arguments of the wrong kind, use after close and pickling fail with
an error that names what the caller did, not an attribute of our internals."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore, load_config
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.kernel.clock import ManualClock


def test_a_name_for_the_embedder_or_a_dict_for_the_config_is_refused_by_argument() -> None:
    bad: Any = "hashing"
    with pytest.raises(TypeError, match="embedder must be an Embedder.*str.*overrides"):
        MemoryStore(":memory:", embedder=bad)  # was: AttributeError 'str' object has no attribute 'dim'
    with pytest.raises(TypeError, match="config must be an AmemConfig.*dict"):
        MemoryStore(":memory:", config={"embedder": "hashing"}, embedder=HashingEmbedder(64))  # type: ignore[arg-type]


def test_every_call_after_close_says_the_store_is_closed(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "s", config=load_config(), embedder=HashingEmbedder(64),
                        clock=ManualClock("2026-01-10T12:00:00+00:00"))
    store.add("hello", enrich=False)
    store.close()
    store.close()  # twice is fine
    calls = [lambda: store.add("x", enrich=False), lambda: store.add_many([{"text": "x"}]),
             store.flush, lambda: store.search("x"), store.count]
    for call in calls:  # add and flush raised the engine's BackendError, search ValidationError
        with pytest.raises(ValidationError, match="the store is closed") as info:
            call()
        assert info.value.field == "store"


def test_pickling_a_store_says_to_open_it_in_the_other_process() -> None:
    with MemoryStore(":memory:", config=load_config(), embedder=HashingEmbedder(64)) as store:
        with pytest.raises(TypeError, match="open the store in that process"):
            pickle.dumps(store)  # was: cannot pickle '_thread.RLock' object


def test_an_empty_agent_id_or_a_name_for_the_llm_is_refused_by_argument() -> None:
    with pytest.raises(ValidationError) as info:  # was: silently the configured agent
        MemoryStore(":memory:", config=load_config(), embedder=HashingEmbedder(64), agent_id="")
    assert info.value.field == "agent_id"
    bad: Any = "gpt-4o-mini"
    with pytest.raises(TypeError, match="llm must be an LLM.*str"):  # was: AttributeError at the first add
        MemoryStore(":memory:", config=load_config(), embedder=HashingEmbedder(64), llm=bad)


def _in_a_forked_child(work: Any) -> str:
    """What ``work()`` returned or raised in a child forked from this process."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        try:
            queue.put(repr(work()))
        except Exception as exc:
            queue.put(f"{type(exc).__name__}: {exc}")

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(60)
    return str(queue.get(timeout=5))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork only")
def test_a_forked_child_is_refused_the_parents_embedded_store(tmp_path: Path) -> None:
    """A child forked after the open wrote through the parent's engine: the parent never saw
    the note, and the next open found the BM25 statistics behind the engine."""
    with MemoryStore(tmp_path / "s", config=load_config(), embedder=HashingEmbedder(64)) as store:
        store.add("the parent's note", enrich=False)
        said = _in_a_forked_child(lambda: store.add("the child's note", enrich=False).status)
        assert said.startswith("StoreLockedError") and "open the store in one process" in said
        assert _in_a_forked_child(store.close) == "None"  # the parent's to close: nothing done
        assert store.count() == 1 and store.search("parent")  # still open here
    with MemoryStore(tmp_path / "s", config=load_config(), embedder=HashingEmbedder(64)) as again:
        assert again.count() == 1


def test_an_in_memory_store_left_unclosed_is_cleaned_up_without_a_traceback() -> None:
    """A ``:memory:`` store dropped without close(): a garbage collection that took the backend
    and its temporary directory together deleted the files first, and the finalizer then logged
    a traceback of the flush that failed in them."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import gc
        from amem import MemoryStore, load_config
        from amem.embed.hashing import HashingEmbedder

        def once() -> None:
            store = MemoryStore(":memory:", config=load_config(), embedder=HashingEmbedder(64))
            store.add("a note never closed", enrich=False)

        for _ in range(3):
            once()
            gc.collect()
    """)
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "was not closed" in done.stderr  # still said: the caller forgot close()
    assert "Traceback" not in done.stderr and "failed" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("path", ["", "  ", 123])
def test_an_empty_or_wrong_kind_path_is_refused_by_name(path: Any) -> None:
    with pytest.raises(ValueError, match="path must be a directory"):  # was: PosixPath('.') has an empty name
        MemoryStore(path, config=load_config(), embedder=HashingEmbedder(64))
