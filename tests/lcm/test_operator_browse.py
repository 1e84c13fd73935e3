"""The repair kit's browse views (lcm.operator.browse): counts, message windows, the DAG, context, files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.operator import browse
from tests.lcm.conftest import chat
from tests.lcm.kit_helpers import KEY, dag_store


def test_conversations_carry_counts_and_last_activity(make_store: Callable[..., LcmStore]) -> None:
    store, conv_id = dag_store(make_store)
    other = store.ingest("agent:kit:other", chat(3)).conversation_id
    assert other is not None
    page = browse.conversations(store.db)
    rows = {r.id: r for r in page.conversations}
    assert set(rows) == {conv_id, other} and page.next_after_id is None
    row = rows[conv_id]
    assert row.message_count == 40 and row.file_count == 0 and row.active
    assert row.summary_count == store.db.scalar("SELECT count(*) FROM summaries WHERE conversation_id = ?", (conv_id,))
    assert row.summary_count > 0 and rows[other].summary_count == 0
    assert row.last_activity == store.db.scalar("SELECT max(created_at) FROM messages WHERE conversation_id = ?", (conv_id,))
    # keyset paging: one row a page, the cursor leads to the next one, and then stops
    first = browse.conversations(store.db, limit=1)
    assert [r.id for r in first.conversations] == [conv_id] and first.next_after_id == conv_id
    second = browse.conversations(store.db, limit=1, after_id=first.next_after_id)
    assert [r.id for r in second.conversations] == [other] and second.next_after_id is None
    assert [r.id for r in browse.conversations(store.db, session_key="agent:kit:other").conversations] == [other]
    with pytest.raises(LcmValidationError, match="limit"):
        browse.conversations(store.db, limit=0)


def test_message_windows_page_both_ways_and_show_coverage(make_store: Callable[..., LcmStore]) -> None:
    store, conv_id = dag_store(make_store)
    seen: list[int] = []
    page = browse.messages(store.db, conv_id, limit=15)
    assert page.prev_before_seq is None and page.total == 40
    while True:
        seen += [m.seq for m in page.messages]
        if page.next_after_seq is None:
            break
        page = browse.messages(store.db, conv_id, after_seq=page.next_after_seq, limit=15)
    all_seqs = [r[0] for r in store.db.query("SELECT seq FROM messages WHERE conversation_id = ? ORDER BY seq", (conv_id,))]
    assert seen == all_seqs
    last = browse.messages(store.db, conv_id, limit=10, newest=True)
    assert [m.seq for m in last.messages] == all_seqs[-10:] and last.next_after_seq is None
    back = browse.messages(store.db, conv_id, before_seq=last.prev_before_seq, limit=10)
    assert [m.seq for m in back.messages] == all_seqs[-20:-10]
    assert back.next_after_seq == all_seqs[-11]
    # old messages are covered by a leaf and out of the context; the tail is raw and live
    first = browse.messages(store.db, conv_id, limit=1).messages[0]
    assert first.summary_ids and not first.in_context
    assert last.messages[-1].in_context and not last.messages[-1].summary_ids
    with pytest.raises(LcmValidationError, match="not both"):
        browse.messages(store.db, conv_id, after_seq=1, before_seq=5)
    with pytest.raises(LcmNotFoundError, match="no conversation 999"):
        browse.messages(store.db, 999)


def test_summary_tree_holds_every_summary_once_with_its_sources(make_store: Callable[..., LcmStore]) -> None:
    store, conv_id = dag_store(make_store)
    tree = browse.summary_tree(store.db, conv_id)
    nodes = tree.walk()
    ids = {n.id for n in nodes}
    assert len(nodes) == len(ids) == tree.summary_count
    assert ids == {r[0] for r in store.db.query("SELECT summary_id FROM summaries WHERE conversation_id = ?", (conv_id,))}
    condensed = [n for n in nodes if n.kind == "condensed"]
    assert condensed and all(n.sources and all(s.depth == n.depth - 1 for s in n.sources) for n in condensed)
    leaves = [n for n in nodes if n.kind == "leaf"]
    assert all(n.message_ids and not n.sources for n in leaves)
    # the roots are exactly the summaries in the context (nothing condensed them further)
    live = {r[0] for r in store.db.query("SELECT summary_id FROM context_items WHERE conversation_id = ? "
                                         "AND summary_id IS NOT NULL", (conv_id,))}  # fmt: skip
    assert {r.id for r in tree.roots} == live and all(r.in_context for r in tree.roots)
    assert sum(tree.by_depth.values()) == tree.summary_count
    # every message a leaf covers is reachable from the roots
    covered = {m for n in leaves for m in n.message_ids}
    assert len(covered) == store.db.scalar("SELECT count(DISTINCT message_id) FROM summary_messages")


def test_context_view_is_what_assemble_returns_and_writes_nothing(make_store: Callable[..., LcmStore]) -> None:
    store, conv_id = dag_store(make_store)
    view = browse.context_view(store.db, store.config, conv_id, 100000)
    ctx = store.assemble(KEY, 100000)
    assert [(i.id, i.content) for i in view.items] == [(i.id, i.content) for i in ctx.items]
    assert view.total_tokens == ctx.total_tokens == view.summary_tokens + view.message_tokens
    assert view.prefix_hash == ctx.prefix_hash and not view.would_compact
    # a small budget: the view says assemble would compact first, and it recorded nothing itself
    small = browse.context_view(store.db, store.config, conv_id, 50)
    assert small.would_compact and small.dropped_count > 0 and small.total_tokens <= max(50, small.items[-1].token_count)
    assert store.db.scalar("SELECT count(*) FROM compaction_debt") == 0
    with pytest.raises(LcmValidationError, match="token_budget"):
        browse.context_view(store.db, store.config, conv_id, 0)


def test_large_files_biggest_first_with_exploration(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_store(str(tmp_path / "lcm.db"), large_file_threshold_tokens=200)
    small = "\n".join(f"line {i}" for i in range(300))
    big = "\n".join(f"row {i}: value={i}" for i in range(900)) + "\nFATAL: disk full"
    res = store.ingest(KEY, [{"role": "tool", "content": small, "name": "a.log"},
                             {"role": "tool", "content": big, "name": "b.log"}])  # fmt: skip
    files = browse.large_files(store.db)
    assert [f.file_name for f in files] == ["b.log", "a.log"] and {f.file_id for f in files} == set(res.file_ids)
    assert "FATAL" in files[0].exploration_summary and files[0].byte_size == len(big.encode())
    assert [f.file_name for f in browse.large_files(store.db, min_bytes=len(small.encode()) + 1)] == ["b.log"]
    assert browse.conversations(store.db).conversations[0].file_count == 2


def _at(minute: int) -> str:
    return f"2026-01-05T10:{minute:02d}:00.000Z"


def test_a_message_cursor_survives_the_renumbering_of_a_merge(
        make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    """A window's cursor is also the boundary message's id, which no merge changes: paging on
    from it after ``restore --merge`` renumbered the conversation (``seq``) neither repeats nor
    skips a message that was there; the sequence number it was handed with did both."""
    from lcm.operator.merge import merge_backup

    # a backup is a SQLite file whatever engine the store merged into runs on (this suite
    # runs again on PostgreSQL, where make_store gives a server's store)
    with LcmStore(str(tmp_path / "a" / "lcm.db"), LcmConfig(log_file_enabled=False)) as backup:
        backup.ingest(KEY, [{"role": "user", "content": f"old {m}", "event_id": f"o{m}",
                             "created_at": _at(m)} for m in (1, 3, 5, 7)])
    store = make_store(str(tmp_path / "b" / "lcm.db"))
    conv_id = store.ingest(KEY, [{"role": "user", "content": f"new {m}", "created_at": _at(m)}
                                 for m in (2, 4, 6, 8)]).conversation_id
    assert conv_id is not None
    first = browse.messages(store.db, conv_id, limit=2)
    assert [m.content for m in first.messages] == ["new 2", "new 4"]
    assert first.next_after_id == first.messages[-1].id and first.prev_before_id is None
    assert merge_backup(store, tmp_path / "a" / "lcm.db", None, "2026-02-01T00:00:00.000Z").conversations_reordered
    # the number now names another place: "new 4" moved from 2 to 4
    by_seq = browse.messages(store.db, conv_id, after_seq=first.next_after_seq, limit=2)
    assert [m.content for m in by_seq.messages] == ["old 3", "new 4"]  # "new 4" again
    seen = [m.content for m in first.messages]
    page = browse.messages(store.db, conv_id, after_id=first.next_after_id, limit=2)
    while True:
        seen += [m.content for m in page.messages]
        if page.next_after_id is None:
            break
        page = browse.messages(store.db, conv_id, after_id=page.next_after_id, limit=2)
    assert seen == ["new 2", "new 4", "old 5", "new 6", "old 7", "new 8"]  # none twice, none left out
    assert [m.content for m in page.messages] == ["old 7", "new 8"]
    back = browse.messages(store.db, conv_id, before_id=page.prev_before_id, limit=2)
    assert [m.content for m in back.messages] == ["old 5", "new 6"]
    assert back.next_after_id == back.messages[-1].id and back.prev_before_id == back.messages[0].id
    # a cursor naming no message of the conversation (deleted by retention, or another's): said
    with pytest.raises(LcmNotFoundError, match="msg_999"):
        browse.messages(store.db, conv_id, after_id=999)
    with pytest.raises(LcmValidationError, match="not both"):
        browse.messages(store.db, conv_id, after_id=first.next_after_id, after_seq=1)
