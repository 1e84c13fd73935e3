"""Batched ingest: the indexes stay exact, the duplicate and replay guards hold beyond one lookup
chunk, other writers are still indexed by the triggers, and a session key follows its host's
new session id without ever reaching another key's conversation."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.db import sqlite_only
from lcm.errors import ReplayFloodError
from lcm.resend import _CHUNK

from .conftest import chat

KEY = "agent:main:chat"


def count(store: LcmStore, sql: str, params: tuple[object, ...] = ()) -> int:
    return int(store.db.scalar(sql, params))


def check_indexes(store: LcmStore) -> None:
    """FTS5's own integrity check against the content table, for both message indexes, once
    the trigram debt ingest leaves (lcm.trigram) is paid."""
    store.index_trigrams()
    with store.db.atomic() as c:
        for table in ("messages_fts", "messages_tri"):
            c.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


def test_a_batch_is_indexed_exactly_and_leaves_no_flag(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(large_file_threshold_tokens=200)
    batch = chat(2 * _CHUNK + 10) + [
        {"role": "user", "content": "数据库迁移在周一完成"},
        {"role": "tool", "content": "zebra-quartz " * 400, "tool_call_id": "t-big"},  # a large file
    ]
    res = store.ingest(KEY, batch)
    assert res.stored == len(batch) and len(res.file_ids) == 1
    ids = [r[0] for r in store.db.query("SELECT id FROM messages ORDER BY seq")]
    assert ids == res.message_ids == list(range(ids[0], ids[0] + len(batch)))
    ctx = [r[0] for r in store.db.query("SELECT message_id FROM context_items ORDER BY ordinal")]
    assert ctx == ids
    check_indexes(store)
    assert count(store, "SELECT count(*) FROM lcm_index_deferred") == 0
    assert store.grep("数据库", mode="full_text", session_key=KEY).hits
    assert store.grep("module_804", mode="full_text", session_key=KEY).hits
    assert store.grep(r"bug #80\d", session_key=KEY).hits  # regex: its literal goes through the trigrams


def test_multi_row_inserts_stay_under_the_connections_parameter_limit(store: LcmStore) -> None:
    # A build of SQLite with a small bound-parameter limit (999 before 3.32): the batch's rows go
    # in several multi-row statements, each under the limit, and nothing is lost or doubled.
    sqlite_only(store.db, "test").conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 25)  # two message rows a statement
    res = store.ingest(KEY, chat(7))
    assert res.stored == 7
    assert [r[0] for r in store.db.query("SELECT seq FROM messages ORDER BY id")] == list(range(1, 8))
    check_indexes(store)
    assert count(store, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", ("please",)) == 4 == \
        count(store, "SELECT count(*) FROM messages WHERE content LIKE '%please%'")


def test_another_writer_is_still_indexed_by_the_triggers(store: LcmStore) -> None:
    conv = store.ingest(KEY, chat(2)).conversation_id
    with store.db.atomic() as c:
        c.execute("INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, created_at) "
                  "VALUES (?, 99, 'user', 'written by hand: walrus-lantern', 5, 'h', '2026-01-01T00:00:00.000Z')",
                  (conv,))  # fmt: skip
    check_indexes(store)
    assert count(store, "SELECT count(*) FROM messages_tri WHERE messages_tri MATCH ?", ('"walrus-lant"',)) == 1


def test_a_refused_batch_leaves_nothing_and_no_flag(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(replay_flood_threshold_external=2)
    store.ingest(KEY, chat(4))
    with pytest.raises(ReplayFloodError):
        store.ingest(KEY, [{"role": "user", "content": "buy now"}] * 3)
    assert count(store, "SELECT count(*) FROM messages") == 4
    assert count(store, "SELECT count(*) FROM lcm_index_deferred") == 0
    check_indexes(store)


def _texts(n: int) -> list[str]:
    return [f"report {i}: the nightly build of shard {i} is green" for i in range(n)]


def test_explicit_times_dedupe_across_lookup_chunks(store: LcmStore) -> None:
    n = 2 * _CHUNK + 50
    batch = [{"role": "user", "content": t, "created_at": "2026-03-01T10:00:00.001Z"} for t in _texts(n)]
    assert store.ingest(KEY, batch).stored == n
    again = store.ingest(KEY, list(reversed(batch)))  # reordered: no tail overlap to lean on
    assert (again.stored, again.skipped_duplicates) == (0, n)
    keyed = [{"role": "assistant", "content": f"answer {i}", "event_id": f"ev-{i}"} for i in range(n)]
    assert store.ingest(KEY, keyed).stored == n
    assert store.ingest(KEY, list(reversed(keyed))).skipped_duplicates == n


def test_the_same_event_twice_in_one_batch_is_stored_once(store: LcmStore) -> None:
    msg = {"role": "tool", "content": "ok", "tool_call_id": "call-7"}
    res = store.ingest(KEY, [msg, {"role": "user", "content": "next"}, msg])
    assert (res.stored, res.skipped_duplicates) == (2, 1)


def test_the_replay_guard_counts_a_group_in_any_lookup_chunk(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(replay_flood_threshold_internal=2)
    texts = _texts(2 * _CHUNK + 50)
    # the text whose identity sorts last falls in the last lookup chunk
    last = max(texts, key=lambda t: hashlib.sha256(f"assistant\0{t}".encode()).hexdigest())
    at = "2026-03-01T10:00:00.{:03d}Z"
    store.ingest(KEY, [{"role": "assistant", "content": t, "created_at": at.format(1)} for t in texts])
    # reversed, so the batch does not line up with the stored tail (which would skip it whole)
    second = [{"role": "assistant", "content": t, "created_at": at.format(2)} for t in reversed(texts)]
    with pytest.raises(ReplayFloodError) as err:  # 1 stored + 2 in this batch > 2, for one text only
        store.ingest(KEY, [*second, {"role": "assistant", "content": last, "created_at": at.format(3)}])
    assert err.value.count == 3
    assert count(store, "SELECT count(*) FROM messages") == len(texts)
    assert store.ingest(KEY, second).stored == len(texts)  # 1 stored + 1 each: within the limit


def test_a_session_key_follows_its_new_session_id(store: LcmStore) -> None:
    first = store.ingest(KEY, chat(2), session_id="file-1")
    second = store.ingest(KEY, chat(2, start=2), session_id="file-2")
    assert second.conversation_id == first.conversation_id and not second.new_conversation
    conv = store.conversation(KEY)
    assert conv is not None and conv.session_id == "file-2"
    found = store.conversation(session_id="file-2")
    assert found is not None and found.id == first.conversation_id
    assert store.conversation(session_id="file-1") is None
    # a host that knows only the id now reaches the same conversation
    assert store.ingest(None, chat(2, start=4), session_id="file-2").conversation_id == first.conversation_id


def test_a_session_id_never_leads_into_another_keys_conversation(store: LcmStore) -> None:
    bob = store.ingest("agent:bob:main", [{"role": "user", "content": "bob's secret plan"}], session_id="run-9")
    alice = store.ingest("agent:alice:main", [{"role": "user", "content": "alice here"}], session_id="run-9")
    assert alice.conversation_id != bob.conversation_id and alice.new_conversation
    assert not store.grep("secret", mode="full_text", session_key="agent:alice:main").hits
    # and bob taking alice's id later does not pull her next ingest into his conversation
    store.ingest("agent:bob:main", [{"role": "user", "content": "again"}], session_id="run-10")
    later = store.ingest("agent:alice:main", [{"role": "user", "content": "more"}], session_id="run-10")
    assert later.conversation_id == alice.conversation_id


def test_a_reopened_store_keeps_the_batched_index(tmp_path: Path, make_store: Callable[..., LcmStore]) -> None:
    path = str(tmp_path / "lcm.db")
    make_store(path).ingest(KEY, chat(30))
    again = make_store(path)
    assert again.ingest(KEY, chat(30)).stored == 0 and again.ingest(KEY, chat(5, start=30)).stored == 5
    check_indexes(again)


CHILD = """
import sys
sys.path.insert(0, {root!r})
from lcm import LcmConfig, LcmStore
store = LcmStore({path!r}, LcmConfig(log_file_enabled=False))
print("READY", flush=True)
for b in range(10**6):
    store.ingest("agent:main:chat", [{{"role": "user" if i % 2 == 0 else "assistant",
                  "content": f"batch {{b}} message {{i}}: deploy shard {{i}} of run {{b}}"}} for i in range(300)])
"""


def test_a_killed_ingest_leaves_exact_indexes_and_no_flag(tmp_path: Path) -> None:
    from .children import run_child

    root = str(Path(__file__).resolve().parents[2])
    path = str(tmp_path / "lcm.db")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(root=root, path=path))
    assert run_child(root, script, kill_after=1.5) == -9
    with LcmStore(path) as store:
        stored = count(store, "SELECT count(*) FROM messages")
        assert stored > 0 and stored % 300 == 0  # whole batches only
        assert count(store, "SELECT count(*) FROM lcm_index_deferred") == 0
        check_indexes(store)
        assert store.ingest(KEY, chat(4)).stored == 4
