"""A compaction SIGKILLed at random points, then rerun, ends exactly where an uninterrupted one does."""

from __future__ import annotations

import random
import re
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmConfig, LcmStore, ManualClock

from .children import run_child
from .conftest import chat

KEY = "agent:crash:main"
MESSAGES = 600
_SUM_ID = re.compile(r"sum_[0-9a-f]{16}")


class EchoLLM:
    """A deterministic summarizer: the reply depends only on the prompt with summary ids masked
    (they are random), so two runs that summarize the same spans write the same text."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        time.sleep(self.delay)
        import hashlib

        digest = hashlib.sha1(_SUM_ID.sub("sum_*", system + user).encode()).hexdigest()[:16]
        return f"Summary {digest}: src/module.py fixed.\nExpand for details about: modules"


def _config() -> LcmConfig:
    # The spend guard counts LLM calls per process, so a rerun would be let through where the
    # first run was cut to extractive summaries; it is opened wide to compare like with like.
    return LcmConfig(leaf_chunk_tokens=120, fresh_tail_count=8, max_sweep_iterations=100000,
                     condensed_min_fanout=2, sweep_deadline_ms=600000, log_file_enabled=False,
                     summary_max_calls_per_window=100000)  # fmt: skip


_CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from lcm import LcmStore, ManualClock
    from tests.lcm.test_kill_compaction import EchoLLM, KEY, MESSAGES, _config
    from tests.lcm.conftest import chat

    # ~97 summaries x 15 ms: a whole run lasts well over the 0.6 s a kill may wait, so the first
    # kill always lands mid-run however fast the machine is (4 ms let a quiet one finish first).
    store = LcmStore({path!r}, _config(), llm=EchoLLM(delay=0.015), clock=ManualClock())
    if not store.status().messages:
        store.ingest(KEY, chat(MESSAGES))
    print("READY", flush=True)
    store.compact(KEY, force=True)
    print("DONE", flush=True)
    """
)


def _shape(store: LcmStore) -> dict[str, Any]:
    """Everything a compaction decides, with random summary ids replaced by what they cover."""
    names: dict[str, str] = {}
    rows = store.db.query("SELECT * FROM summaries ORDER BY depth, earliest_at, latest_at, content")
    for r in rows:  # children come first (lower depth), so their names exist already
        if r["kind"] == "leaf":
            covered = [x[0] for x in store.db.query(
                "SELECT message_id FROM summary_messages WHERE summary_id = ? ORDER BY ordinal", (r["summary_id"],))]
        else:
            covered = [names[x[0]] for x in store.db.query(
                "SELECT parent_summary_id FROM summary_parents WHERE summary_id = ? ORDER BY ordinal", (r["summary_id"],))]
        names[r["summary_id"]] = f"{r['kind']}{r['depth']}{covered}"
    summaries = sorted((names[r["summary_id"]], _SUM_ID.sub("sum_*", r["content"]), r["token_count"]) for r in rows)
    context = [(r["item_type"], r["message_id"] if r["item_type"] == "message" else names[r["summary_id"]])
               for r in store.db.query("SELECT * FROM context_items ORDER BY ordinal")]
    return {"summaries": summaries, "context": context}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("whole") / "whole.db"
    with LcmStore(path, _config(), llm=EchoLLM(), clock=ManualClock()) as store:
        store.ingest(KEY, chat(MESSAGES))
        assert store.compact(KEY, force=True).ran
        assert store.doctor().ok
        return _shape(store)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_compactions_rerun_to_the_uninterrupted_result(
    tmp_path: Path, uninterrupted: dict[str, Any], seed: int
) -> None:
    rng = random.Random(seed)
    root = str(Path(__file__).resolve().parents[2])
    path = str(tmp_path / "crash.db")
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=root, path=path))
    kills = 0
    for _ in range(2):  # killed twice at random points, each time part-way through
        code = run_child(root, script, kill_after=rng.uniform(0.05, 0.6))
        kills += code == -signal.SIGKILL
        with LcmStore(path, _config(), clock=ManualClock()) as store:
            report = store.doctor()
            assert report.ok, report.issues[:5]
            assert store.status().messages == MESSAGES  # nothing lost
    assert kills >= 1  # the first kill lands mid-run (a whole run takes about 1.5 s or more)
    assert run_child(root, script, kill_after=None) == 0  # the rerun completes
    with LcmStore(path, _config(), clock=ManualClock()) as store:
        assert store.doctor().ok
        assert _shape(store) == uninterrupted
