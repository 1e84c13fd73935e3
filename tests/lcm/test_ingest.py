"""Ingest and sessions: idempotency, the replay guard, resolution by key/id, reset, cron, patterns, large files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore, ManualClock
from lcm.errors import LcmNotFoundError, LcmValidationError, PathEscapeError, ReplayFloodError

from .conftest import chat

KEY = "agent:main:chat"


def count(store: LcmStore, table: str) -> int:
    return int(store.db.scalar(f"SELECT count(*) FROM {table}"))


def test_resending_a_batch_stores_nothing_twice(store: LcmStore) -> None:
    first = store.ingest(KEY, chat(10))
    assert first.stored == 10 and first.new_conversation
    again = store.ingest(KEY, chat(10))
    assert (again.stored, again.skipped_duplicates) == (0, 10)
    overlap = store.ingest(KEY, chat(6, start=6))  # 4 old + 2 new
    assert (overlap.stored, overlap.skipped_duplicates) == (2, 4)
    assert count(store, "messages") == 12 == count(store, "context_items")


def test_the_window_alignment_only_drops_what_lines_up(store: LcmStore, clock: ManualClock) -> None:
    store.ingest(KEY, chat(10))
    clock.advance(300)  # past the resend window: only the tail alignment can call a batch re-sent
    # the batch's first message is in the stored history but the batch does not line up: all new
    assert store.ingest(KEY, [chat(10)[3], *chat(2, start=40)]).stored == 3
    # a run from the middle of the history is an earlier exchange said again: stored (the old
    # alignment, anywhere in a window of recent messages, dropped it)
    assert (r := store.ingest(KEY, chat(4, start=2))).stored == 4 and r.skipped_duplicates == 0
    # a lone message equal to one stored is too ambiguous to drop (a tool may repeat itself)
    assert store.ingest(KEY, [chat(10)[9]]).stored == 1
    # the tail re-sent with a new message after it: only the new one
    tail = [chat(4, start=2)[3], chat(10)[9], *chat(1, start=50)]
    assert (r := store.ingest(KEY, tail)).stored == 1 and r.skipped_duplicates == 2
    # a batch that is the tail whole and no batch taken lately: the exchange repeated, stored
    assert store.ingest(KEY, [chat(10)[9], *chat(1, start=50)]).stored == 2
    assert count(store, "messages") == 21


def test_stable_event_keys_and_explicit_times_dedupe(store: LcmStore) -> None:
    msgs = [
        {"role": "assistant", "content": "v1 text", "response_id": "r1"},
        {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "t1"},
        {"role": "user", "content": "hello", "created_at": "2025-02-01T10:00:00Z"},
    ]
    store.ingest(KEY, msgs)
    store.ingest(KEY, [{"role": "user", "content": "unrelated"}])
    # Same events in another representation (redacted text) and out of order.
    resent = [
        {"role": "user", "content": "hello", "created_at": "2025-02-01T10:00:00+00:00"},
        {"role": "assistant", "content": "v1 [redacted]", "responseId": "r1"},
        {"role": "tool", "content": "{\"ok\": 1}", "toolCallId": "t1"},
    ]
    res = store.ingest(KEY, resent)
    assert res.stored == 0 and res.skipped_duplicates == 3


def test_replay_flood_is_refused_and_writes_nothing(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, [{"role": "user", "content": "first"}])
    flood = [{"role": "user", "content": "buy now"}] * 4
    with pytest.raises(ReplayFloodError) as err:
        store.ingest(KEY, flood)
    assert err.value.role == "user" and err.value.count == 4 and err.value.threshold == 3
    assert count(store, "messages") == 1
    # Three identical user messages in one second are allowed; internal roles allow 32.
    assert store.ingest(KEY, [{"role": "user", "content": "ok"}] * 3).stored == 3
    assert store.ingest(KEY, [{"role": "tool", "content": "{\"status\": \"ok\"}"}] * 32).stored == 32
    with pytest.raises(ReplayFloodError):
        store.ingest(KEY, [{"role": "tool", "content": "{\"status\": \"ok\"}"}])  # 33rd in that second
    relaxed = make_store(replay_flood_threshold_external=10)
    assert relaxed.ingest(KEY, flood).stored == 4


def test_the_replay_guard_counts_what_has_no_id_or_a_time_of_its_own(make_store: Callable[..., LcmStore]) -> None:
    # Messages with host ids and no times: each id proves a distinct event and the ingest's
    # second says nothing of when it was said, so a transcript's repeats are stored.
    store = make_store()
    keyed = [{"role": "user", "content": "continue", "event_id": f"line-{i}"} for i in range(10)]
    assert store.ingest(KEY, keyed).stored == 10
    assert store.ingest(KEY, keyed).skipped_duplicates == 10  # the ids still dedupe a re-send
    # with a time of its own, a message is counted in its second, id or not
    timed = [{"role": "user", "content": "buy", "event_id": f"t-{i}", "created_at": "2025-01-01T00:00:00Z"}
             for i in range(4)]
    with pytest.raises(ReplayFloodError) as err:
        store.ingest(KEY, timed)
    assert err.value.count == 4
    # anonymous messages are what a runaway host loops on: counted by the ingest's second
    with pytest.raises(ReplayFloodError):
        store.ingest(KEY, [{"role": "user", "content": "buy now"}] * 4)
    assert count(store, "messages") == 10


def test_a_write_lock_held_past_the_wait_is_store_locked(tmp_path: Path) -> None:
    import sqlite3

    from lcm.db import Database
    from lcm.errors import StoreBusyError

    path = tmp_path / "lcm.db"
    db = Database(path, busy_timeout_ms=50)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, mid-transaction
    try:
        with pytest.raises(StoreBusyError) as err:
            with db.atomic() as c:
                c.execute("CREATE TABLE t(x)")
        assert err.value.code == "store_locked" and err.value.path == str(path)
        assert str(path) in str(err.value) and "0.05 s wait" in str(err.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    with db.atomic() as c:  # the handle is usable once the lock is gone
        c.execute("CREATE TABLE t(x)")
    db.close()


def test_replay_guard_counts_per_second(store: LcmStore, clock: ManualClock) -> None:
    store.ingest(KEY, [{"role": "user", "content": "again"}] * 2)
    clock.advance(1)
    assert store.ingest(KEY, [{"role": "user", "content": "x"}, {"role": "user", "content": "again"}] * 1).stored == 2


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ("not a list", "messages"),
        ([{"role": "wizard", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": "x", "created_at": "yesterday"}], "messages[0].created_at"),
        ([{"role": "user", "content": "x", "created_at": "2025-01-01T00:00:00"}], "messages[0].created_at"),
        ([{"role": "user", "content": "x"}, 3], "messages[1]"),
    ],
)
def test_bad_messages_are_clear_errors(store: LcmStore, messages: Any, field: str) -> None:
    with pytest.raises(LcmValidationError) as err:
        store.ingest(KEY, messages)
    assert err.value.field == field
    assert count(store, "messages") == 0 and count(store, "conversations") == 0


def test_content_parts_and_tool_calls_are_kept(store: LcmStore) -> None:
    store.ingest(KEY, [
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": "u"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "grep_logs"}}]},
    ])  # fmt: skip
    rows = store.db.query("SELECT content FROM messages ORDER BY seq")
    # an image part is said by a placeholder with its address (lcm.normalize.media_placeholder)
    assert rows[0][0] == "look\n[image: u]"
    assert "grep_logs" in rows[1][0]


def test_any_mapping_normalizes_as_a_dict_does() -> None:
    # normalize_messages takes a short path for plain dicts; other mappings, a str subclass and
    # a created_at present as None (no explicit time, the timestamp key not consulted) give the
    # same messages.
    from types import MappingProxyType

    from lcm.normalize import normalize_messages

    class Name(str):
        pass

    now = "2026-01-01T00:00:00.000Z"
    msg = {"role": "toolResult", "content": [{"type": "text", "text": "ok"}], "name": Name("grep"),
           "tool_call_id": "t1", "created_at": None, "timestamp": "2025-05-05T00:00:00+00:00"}  # fmt: skip
    plain = normalize_messages([msg], now)
    assert normalize_messages([MappingProxyType(msg)], now) == plain
    (m,) = plain
    assert (m.role, m.content, m.name, m.stable_event_key) == ("tool", "ok", "grep", "tool-result:t1")
    assert (m.created_at, m.explicit_time) == (now, False)
    (t,) = normalize_messages([{"role": "user", "content": "hi", "timestamp": 1_700_000_000}], now)
    assert (t.created_at, t.explicit_time) == ("2023-11-14T22:13:20.000Z", True)


def test_resolution_by_key_then_session_id(store: LcmStore) -> None:
    a = store.ingest(None, [{"role": "user", "content": "hi"}], session_id="s-1")
    b = store.ingest(KEY, [{"role": "user", "content": "next"}], session_id="s-1")
    assert a.conversation_id == b.conversation_id  # found by session id, key adopted
    conv = store.conversation(KEY)
    assert conv is not None and conv.session_key == KEY and conv.session_id == "s-1"
    with pytest.raises(LcmValidationError):
        store.ingest(None, [{"role": "user", "content": "x"}])


def test_reset_archives_and_opens_a_new_conversation(store: LcmStore) -> None:
    first = store.ingest(KEY, chat(4))
    res = store.reset(KEY)
    assert res.archived_conversation_id == first.conversation_id
    second = store.ingest(KEY, chat(2, prefix="after"))
    assert second.conversation_id == res.conversation_id != first.conversation_id
    family = store.conversations(KEY)
    assert [c.active for c in family] == [False, True] and family[0].archive_cause == "reset"
    hits = store.grep("msg 1:", session_key=KEY)  # the family covers the archived conversation
    assert hits.hits and hits.hits[0].conversation_id == first.conversation_id


def test_cron_keys_get_a_conversation_per_run(store: LcmStore) -> None:
    key = "agent:ops:cron:nightly"
    r1 = store.ingest(key, chat(2), session_id="run-1")
    r1b = store.ingest(key, chat(2, start=2), session_id="run-1")
    r2 = store.ingest(key, chat(2), session_id="run-2")
    assert r1.conversation_id == r1b.conversation_id != r2.conversation_id
    assert r2.archived_conversation_id == r1.conversation_id
    # An ordinary key keeps its conversation when the runtime session id changes.
    n1 = store.ingest(KEY, chat(2), session_id="a")
    n2 = store.ingest(KEY, chat(2, start=2), session_id="b")
    assert n1.conversation_id == n2.conversation_id


def test_ignored_and_stateless_sessions_write_nothing(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(ignore_session_patterns=("agent:*:cron:**",), stateless_session_patterns=("agent:*:subagent:**",))
    assert store.ingest("agent:x:cron:job:1", chat(3)).ignored
    assert store.ingest("agent:x:subagent:abc", chat(3)).stateless
    assert count(store, "messages") == 0 and count(store, "conversations") == 0
    assert store.ingest("agent:x:main", chat(3)).stored == 3


def test_large_payload_goes_to_a_file(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=1000)
    payload = "\n".join(f"row {i}: value={i * 7} status=ok" for i in range(1000)) + "\nFATAL: disk /dev/sda1 full"
    res = store.ingest(KEY, [{"role": "tool", "content": payload, "name": "dump.log"}])
    assert len(res.file_ids) == 1
    fid = res.file_ids[0]
    content = store.db.scalar("SELECT content FROM messages")
    assert content.startswith(f"[LCM File: {fid} | dump.log") and len(content) < len(payload) // 4
    assert "FATAL" in content  # the exploration summary keeps the error line
    desc = store.describe(fid, offset=0, limit=50)
    assert desc.kind == "file" and desc.slice_text == payload[:50] and desc.slice_truncated
    assert (tmp_path / "lcm-files").is_dir()
    with pytest.raises(LcmNotFoundError):
        store.describe("file_0000000000000000")


def test_a_large_payload_reads_back_with_its_line_endings(make_store: Callable[..., LcmStore],
                                                         tmp_path: Path) -> None:
    # the file is written byte for byte; reading it in text mode turned each "\r\n" (a pasted
    # Windows log) and a lone "\r" into "\n": describe gave another text than the one stored
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=1000)
    payload = "\r\n".join(f"row {i}: value={i * 7}" for i in range(1000)) + "\rprogress 100%\r\nend"
    fid = store.ingest(KEY, [{"role": "tool", "content": payload, "name": "win.log"}]).file_ids[0]
    whole = store.describe(fid, offset=0, limit=len(payload) + 10)
    assert whole.slice_text == payload and not whole.slice_truncated
    part = store.describe(fid, offset=11, limit=40)  # from inside the first "\r\n"
    assert part.slice_text == payload[11:51] and part.slice_truncated


def test_grep_says_when_large_messages_were_not_searched(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    # a word inside a message stored as a file is found by scope "files" alone: the default
    # scope found nothing and said nothing (exploratory test, 2026-12-05)
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=1000)
    store.ingest(KEY, [{"role": "user", "content": "a short note about zebras"}])
    plain = store.grep("zebra", scope="both", session_key=KEY)
    assert plain.hits and not plain.warnings  # no file in scope: nothing to say
    log = " ".join(f"filler{i}" for i in range(3000)) + " UNIQUEZEBRA42"
    store.ingest(KEY, [{"role": "user", "content": "log: " + log}])
    for mode in ("regex", "full_text"):
        found = store.grep("UNIQUEZEBRA42", mode=mode, scope="both", session_key=KEY)
        assert not found.hits
        assert found.warnings == ["1 large message is stored as a file and not searched here (the message "
                                  "index holds a reference to each): scope 'files' (--scope files) searches them"]
    assert store.grep("UNIQUEZEBRA42", scope="files", session_key=KEY).hits
    assert not store.grep("UNIQUEZEBRA42", scope="both", session_key="agent:main:other").warnings  # not in scope


def test_file_ids_cannot_escape_the_directory(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=100)
    fid = store.ingest(KEY, [{"role": "tool", "content": "x " * 1000}]).file_ids[0]
    with store.db.atomic() as c:  # simulate a tampered row
        c.execute("UPDATE large_files SET storage_path = '../../etc/passwd' WHERE file_id = ?", (fid,))
    with pytest.raises(PathEscapeError):
        store.describe(fid)
    with pytest.raises(LcmValidationError):
        store.describe("../../etc/passwd")
    report = store.doctor()
    assert not report.ok and report.checks["missing_files"] == 1


def test_a_lone_repeated_message_is_kept(store: LcmStore, clock: ManualClock) -> None:
    # The same tool output in two turns is two events: without ids it must not be dropped.
    store.ingest(KEY, [{"role": "tool", "content": "{\"status\": \"ok\"}"}])
    clock.advance(5)
    assert store.ingest(KEY, [{"role": "tool", "content": "{\"status\": \"ok\"}"}]).stored == 1
