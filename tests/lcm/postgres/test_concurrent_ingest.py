"""Many writers: two processes ingesting into one conversation lose nothing and duplicate nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from lcm import LcmConfig, LcmStore

_CHILD = """
import sys, time
from lcm import LcmStore
url, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
with LcmStore(url) as store:
    while time.time() < start:
        time.sleep(0.001)
    for b in range(0, 60, 5):
        shared = [{"role": "tool", "content": f"shared {i}", "event_id": f"ev-{i}"} for i in range(b, b + 5)]
        own = [{"role": "user", "content": f"{who} says {i}", "event_id": f"{who}-{i}"} for i in range(b, b + 5)]
        store.ingest("agent:main:shared", shared + own)
"""


def test_two_processes_ingesting_one_conversation(pg_url: str) -> None:
    root = Path(__file__).resolve().parents[3]
    start = time.time() + 1.0  # both children connected before either writes
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, pg_url, who, str(start)], cwd=root,
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    with LcmStore(pg_url) as store:
        rows = store.db.query("SELECT conversation_id, seq, content FROM messages ORDER BY seq")
        assert len({r[0] for r in rows}) == 1  # one conversation, not one per racing process
        contents = [r[2] for r in rows]
        want = {f"shared {i}" for i in range(60)} | {f"{w} says {i}" for w in "ab" for i in range(60)}
        assert len(contents) == len(want) == 180 and set(contents) == want  # nothing lost, nothing twice
        assert [r[1] for r in rows] == list(range(1, 181))  # seq has no gap and no collision
        items = store.db.query("SELECT ordinal FROM context_items ORDER BY ordinal")
        assert [r[0] for r in items] == list(range(1, 181))


_COMPACT = """
import sys, time
from lcm import LcmConfig, LcmStore
url, start = sys.argv[1], float(sys.argv[2])
with LcmStore(url, LcmConfig(fresh_tail_count=8)) as store:
    while time.time() < start:
        time.sleep(0.001)
    print(store.compact("agent:main:shared", force=True).leaf_summaries)
"""


def test_two_processes_compacting_one_conversation_take_turns(pg_url: str) -> None:
    from tests.lcm.conftest import chat

    with LcmStore(pg_url) as store:
        store.ingest("agent:main:shared", chat(120))
    root = Path(__file__).resolve().parents[3]
    start = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", _COMPACT, pg_url, str(start)], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err  # no unique-key clash, no ConcurrentChangeError escaping
    with LcmStore(pg_url) as store:
        # every message is reachable exactly once: in the context, or under exactly one leaf summary
        in_context = {r[0] for r in store.db.query("SELECT message_id FROM context_items WHERE item_type = 'message'")}
        covered = [r[0] for r in store.db.query("SELECT message_id FROM summary_messages")]
        assert len(covered) == len(set(covered)) and not in_context & set(covered)
        assert in_context | set(covered) == set(range(1, 121))
        ordinals = [r[0] for r in store.db.query("SELECT ordinal FROM context_items ORDER BY ordinal")]
        assert len(ordinals) == len(set(ordinals))


_HOLDER = """
import sys, time
from lcm import LcmConfig, LcmStore

class Slow:
    def complete(self, system, user, *, max_tokens=None):
        time.sleep(60)
        return "never"

with LcmStore(sys.argv[1], LcmConfig(fresh_tail_count=8), llm=Slow()) as store:
    store.compact("agent:main:shared", force=True)
"""


def test_a_killed_compaction_releases_its_lock(pg_url: str) -> None:
    from tests.lcm.conftest import chat

    with LcmStore(pg_url, LcmConfig(fresh_tail_count=8)) as store:
        store.ingest("agent:main:shared", chat(40))
        root = Path(__file__).resolve().parents[3]
        holder = subprocess.Popen([sys.executable, "-c", _HOLDER, pg_url], cwd=root, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 20
            while not store.db.scalar("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                                      "WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()"):
                assert holder.poll() is None and time.time() < deadline, "the holder never took the lock"
                time.sleep(0.05)
        finally:
            holder.kill()  # SIGKILL: no unlock, no rollback from the client; the server ends its session
            holder.wait(10)
        start = time.time()
        res = store.compact("agent:main:shared", force=True)
        assert res.leaf_summaries and time.time() - start < 10


_RETRY = """
import sys, time
from lcm import LcmStore
url, start = sys.argv[1], float(sys.argv[2])
batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"anonymous {i}"} for i in range(5)]
with LcmStore(url) as store:
    while time.time() < start:
        time.sleep(0.001)
    print(store.ingest("agent:main:shared", batch).stored)
"""


def test_a_retry_racing_its_original_from_another_host_is_stored_once(pg_url: str) -> None:
    # two hosts (processes) send the same batch of anonymous messages at once: the conversation
    # lock orders them and the second finds the first's batch (lcm.ingest, "the same batch again")
    root = Path(__file__).resolve().parents[3]
    start = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, "-c", _RETRY, pg_url, str(start)], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    stored = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        stored.append(int(out.strip()))
    assert sorted(stored) == [0, 5]
    with LcmStore(pg_url) as store:
        assert int(store.db.scalar("SELECT count(*) FROM messages")) == 5
