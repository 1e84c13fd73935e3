"""One compaction of a conversation at a time: two stores on one SQLite file take turns."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.convlock import FileConversationLocks
from lcm.errors import StoreBusyError

from .conftest import chat

KEY = "agent:race:main"


class HeldLLM:
    """A's summarizer: its first call waits until ``release`` is set (or 2 s), the others answer at once."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(2.0)
        return "Summary: src/module.py was fixed and the tests pass."


def test_two_stores_assembling_one_conversation_never_serve_a_half_compacted_context(
        tmp_path: Path, clock: ManualClock) -> None:  # fmt: skip
    # Two hosts (two handles on one file, as two processes) assemble the same conversation over
    # its budget. A's first summary takes a while; B used to compact the same items meanwhile,
    # A's swap then found its items replaced and stopped, and A's turn got the raw history cut
    # to the budget with no summary in it. Now B waits for A's compaction, then reads its result.
    path = str(tmp_path / "lcm.db")
    cfg = LcmConfig(leaf_chunk_tokens=120, fresh_tail_count=8, log_file_enabled=False, summary_max_calls_per_window=100000)
    llm = HeldLLM()
    a = LcmStore(path, cfg, llm=llm, clock=clock)
    b = LcmStore(path, cfg, clock=clock)
    try:
        a.ingest(KEY, chat(300))
        results = {}
        worker = threading.Thread(target=lambda: results.update(a=a.assemble(KEY, 1500)))
        worker.start()
        assert llm.entered.wait(10)
        results["b"] = b.assemble(KEY, 1500)
        llm.release.set()
        worker.join(30)
        for name, ctx in sorted(results.items()):
            assert not [w for w in ctx.warnings if "changed" in w], (name, ctx.warnings)
            assert ctx.summary_count > 0 and ctx.dropped_count == 0, (name, ctx.summary_count, ctx.dropped_count)
    finally:
        a.close()
        b.close()


def test_a_waiter_says_it_waits_then_gives_up_as_store_locked(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = str(tmp_path / "lcm.db")
    holder = FileConversationLocks(db, limit_s=5)
    waiter = FileConversationLocks(db, limit_s=0.4, notice_after_s=0.1)
    with holder(7), caplog.at_level(logging.WARNING, logger="lcm.convlock"):
        with pytest.raises(StoreBusyError) as err:
            with waiter(7):
                pass
        with waiter(8):  # another conversation is not held up
            pass
    assert err.value.code == "store_locked" and "conversation 7" in str(err.value)
    assert any("waiting for the compaction lock of conversation 7" in r.getMessage() for r in caplog.records)
    with waiter(7):  # released: free again
        pass
