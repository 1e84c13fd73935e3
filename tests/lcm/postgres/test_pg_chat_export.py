"""A chat export on PostgreSQL: conversation titles, and the export loaded through the library
path the CLI uses (``tools.chats.load``), idempotent as on SQLite."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError
from tests.tools.chat_exports import LISBON_ID, chatgpt_lisbon, claude_edited
from tools.chats.load import load_export, session_key

KEY = "agent:a:chatgpt:6634f0a2"


def test_a_title_is_kept_renamed_and_a_nul_in_it_refused(make_pg_store: Callable[..., LcmStore]) -> None:
    store = make_pg_store()
    store.ingest(KEY, [{"role": "user", "content": "plan a trip", "event_id": "u1"}], title="Lisbon trip")
    store.ingest(KEY, [{"role": "assistant", "content": "Day 1", "event_id": "a1"}])
    conversation = store.conversation(KEY)
    assert conversation is not None and conversation.title == "Lisbon trip"
    store.ingest(KEY, [], title="Lisbon and Sintra")
    renamed = store.conversation(KEY)
    assert renamed is not None and renamed.title == "Lisbon and Sintra"
    with pytest.raises(LcmValidationError) as caught:
        store.ingest("agent:a:chatgpt:other", [{"role": "user", "content": "hi"}], title="bad\x00title")
    assert caught.value.field == "title" and store.conversation("agent:a:chatgpt:other") is None


def test_an_export_loads_once(make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_pg_store()
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_lisbon()]), encoding="utf-8")
    first = load_export(store, src, "chatgpt", "alice")
    # 7 of the main line, 3 of its branches and the 2 markers saying where each branch forked
    assert (first.stored, first.branch_messages, first.fork_points) == (12, 3, 2)
    again = load_export(store, src, "chatgpt", "alice")
    assert (again.stored, again.skipped_duplicates) == (0, 12)
    key = session_key("alice", "chatgpt", LISBON_ID)
    assert [c.title for c in store.conversations(key)] == ["Lisbon trip"]
    src.write_text(json.dumps([claude_edited()]), encoding="utf-8")
    assert load_export(store, src, "claude", "alice").stored == 8  # 6 and 2 fork markers


def test_markers_new_to_branches_stored_before_them_move_into_place(make_pg_store: Callable[..., LcmStore],
                                                                    tmp_path: Path) -> None:
    # as on SQLite (tests/tools/test_chat_export_load.py): the same renumbering, portable SQL
    from tools.chats import chatgpt

    store = make_pg_store()
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_lisbon()]), encoding="utf-8")
    key = session_key("alice", "chatgpt", LISBON_ID) + ":branches"
    conv = chatgpt.convert(1, chatgpt_lisbon())
    store.ingest(key, [m for m in conv.branches if not m["event_id"].startswith("fork:")])
    report = load_export(store, src, "chatgpt", "alice")
    assert report.fork_points_placed == 2
    with store.db.reading() as c:
        order = [r[0] for r in c.execute(
            "SELECT m.stable_event_key FROM messages m JOIN conversations cv ON cv.id = m.conversation_id "
            "WHERE cv.session_key = ? ORDER BY m.seq", (key,))]
        context = [r[0] for r in c.execute(
            "SELECT m.stable_event_key FROM context_items ci JOIN messages m ON m.id = ci.message_id "
            "JOIN conversations cv ON cv.id = ci.conversation_id WHERE cv.session_key = ? ORDER BY ci.ordinal",
            (key,))]
    assert order == context == ["event:fork:u-2a", "event:u-2a", "event:a-2a", "event:fork:a-2b", "event:a-2b"]
