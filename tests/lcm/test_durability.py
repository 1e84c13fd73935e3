"""Concurrency (threads ingesting at once) and crash safety (SIGKILL mid-compaction)."""

from __future__ import annotations

import signal
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock

from .children import run_child
from .conftest import chat


@pytest.mark.parametrize("where", [":memory:", "file"])
def test_concurrent_ingest_from_threads(tmp_path: Path, where: str) -> None:
    path = ":memory:" if where == ":memory:" else str(tmp_path / "lcm.db")
    store = LcmStore(path, LcmConfig(fresh_tail_count=16), clock=ManualClock())
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for batch in range(10):
                store.ingest(f"agent:t{n % 4}:chat", chat(20, start=batch * 20, prefix=f"w{n}"))
                if batch % 5 == 4:
                    store.compact(f"agent:t{n % 4}:chat", force=True)
                store.grep(f"w{n}", session_key=f"agent:t{n % 4}:chat", limit=5)
        except BaseException as exc:  # surfaced to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    st = store.status()
    assert st.messages == 8 * 10 * 20 and st.conversations == 4
    assert store.doctor().ok
    seqs = store.db.query("SELECT conversation_id, count(*), max(seq) FROM messages GROUP BY conversation_id")
    assert all(r[1] == r[2] for r in seqs)  # no gaps or duplicate sequence numbers
    store.close()


_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from lcm import LcmConfig, LcmStore
    from tests.lcm.conftest import chat

    class SlowLLM:
        def complete(self, system, user, *, max_tokens=None):
            time.sleep(0.01)
            return "Summary: src/module.py fixed.\\nExpand for details about: modules"

    cfg = LcmConfig(leaf_chunk_tokens=120, fresh_tail_count=8, max_sweep_iterations=100000,
                    condensed_min_fanout=2, sweep_deadline_ms=600000, log_file_enabled=False)
    store = LcmStore({path!r}, cfg, llm=SlowLLM())
    store.ingest("agent:crash", chat(3000))
    print("READY", flush=True)
    store.compact("agent:crash", force=True)
    print("DONE", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("delay", [0.3, 0.9])
def test_sigkill_mid_compaction_leaves_a_healthy_database(tmp_path: Path, delay: float) -> None:
    path = str(tmp_path / "crash.db")
    root = str(Path(__file__).resolve().parents[2])
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=root, path=path))
    assert run_child(root, script, kill_after=delay) == -signal.SIGKILL
    with LcmStore(path, LcmConfig(log_file_enabled=False), clock=ManualClock()) as store:
        st = store.status()
        assert st.messages == 3000 and st.summaries > 0  # killed part-way through
        report = store.doctor()
        assert report.ok, report.issues[:5]
        # The next compaction carries on from where the killed one stopped.
        before = st.summaries
        store.compact("agent:crash", force=True)
        assert store.status().summaries > before and store.doctor().ok
