"""The repair kit's browse views (lcm.operator.browse): counts, message windows, the DAG, context, files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.operator import browse
from tests.lcm.conftest import chat
from tests.lcm.kit_helpers import KEY, dag_store


def test_conversations_carry_counts_and_last_activity(make_store: Callable[..., LcmStore]) -> None:
    store, conv_id = dag_store(make_store)
    other = store.ingest("agent:kit:other", chat(3)).conversation_id
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
