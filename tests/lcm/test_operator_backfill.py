"""Backfill (lcm.operator.backfill): import a pre-lcm transcript, compact it, transplant it; safe to repeat."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lcm import LcmStore
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.operator import browse
from lcm.operator.backfill import apply_backfill, plan_backfill
from tests.lcm.conftest import chat
from tests.lcm.kit_helpers import DAG_CONFIG


def old_transcript(n: int) -> list[dict[str, str]]:
    return [{**m, "created_at": f"2025-03-01T10:{i // 60:02d}:{i % 60:02d}Z"} for i, m in enumerate(chat(n, prefix="old"))]


def test_backfill_imports_compacts_and_transplants_once(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(**DAG_CONFIG)
    live = store.ingest("agent:kit:main", chat(4, start=900)).conversation_id
    assert live is not None
    transcript = old_transcript(40)
    plan = plan_backfill(store, transcript, session_id="sess-1", transplant_to=live)
    assert (plan.message_count, plan.already_imported, plan.conversation_id) == (40, False, None)
    assert plan.token_count > 0 and plan.leaf_chunks >= 1
    assert store.db.scalar("SELECT count(*) FROM conversations") == 1  # the plan wrote nothing
    done = apply_backfill(store, plan, transcript)
    assert done.applied and done.imported == 40 and done.summaries_made > 0 and done.conversation_id is not None
    assert done.transplant is not None and done.transplant.applied and not done.warnings
    # the live conversation now starts with the backfilled summaries, its own messages after them
    view = browse.context_view(store.db, store.config, live, 100000)
    roots = [done.transplant.id_map[r] for r in done.transplant.root_ids]
    assert [i.id for i in view.items[:len(roots)]] == roots
    assert [i.type for i in view.items[len(roots):]] == ["message"] * 4
    created = store.db.scalar("SELECT min(created_at) FROM messages WHERE conversation_id = ?", (done.conversation_id,))
    assert created.startswith("2025-03-01")  # the transcript's own times are kept
    assert store.doctor().ok
    # again: nothing imported twice, the transplant is refused as a duplicate (said, not raised)
    again = apply_backfill(store, plan_backfill(store, transcript, session_id="sess-1", transplant_to=live), transcript)
    assert again.imported == 0 and any("imported before" in w for w in again.warnings)
    assert any("transplant refused" in w for w in again.warnings)
    assert store.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ?", (done.conversation_id,)) == 40


def test_backfill_refuses_bad_input_before_writing(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    with pytest.raises(LcmValidationError, match="no messages"):
        plan_backfill(store, [], session_id="s")
    with pytest.raises(LcmValidationError, match="session_id"):
        plan_backfill(store, old_transcript(2), session_id=" ")
    with pytest.raises(LcmValidationError) as bad:
        plan_backfill(store, [{"role": "user", "content": "hi"}, {"content": "no role"}], session_id="s")
    assert bad.value.field is not None and "messages[1]" in bad.value.field
    with pytest.raises(LcmNotFoundError):
        plan_backfill(store, old_transcript(2), session_id="s", transplant_to=999)
    plan = plan_backfill(store, old_transcript(2), session_id="s")
    with pytest.raises(LcmValidationError, match="made for 2 messages"):
        apply_backfill(store, plan, old_transcript(3))
    assert store.db.scalar("SELECT count(*) FROM messages") == 0


def test_backfill_single_root_condenses_the_whole_transcript_into_one_summary(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(**DAG_CONFIG)
    live = store.ingest("agent:kit:main", chat(4, start=900)).conversation_id
    assert live is not None
    transcript = old_transcript(40)
    plan = plan_backfill(store, transcript, session_id="one", transplant_to=live, single_root=True)
    assert plan.single_root and plan.to_dict()["single_root"] is True
    done = apply_backfill(store, plan, transcript)
    conv = done.conversation_id
    assert conv is not None and done.root_summary_id is not None and not done.warnings
    # the backfill's context is that one root (its fresh tail too went into it) ...
    items = browse.context_view(store.db, store.config, conv, 100000).items
    assert [(i.type, i.id) for i in items] == [("summary", done.root_summary_id)]
    # ... and the root reaches every one of the 40 messages through its sources
    tree = browse.summary_tree(store.db, conv)
    assert [r.id for r in tree.roots] == [done.root_summary_id]
    leaves = [n for n in tree.walk() if n.kind == "leaf"]
    covered = store.db.scalar(
        f"SELECT count(DISTINCT message_id) FROM summary_messages WHERE summary_id IN ({','.join('?' * len(leaves))})",
        [n.id for n in leaves])  # fmt: skip
    assert covered == 40
    assert done.transplant is not None and done.transplant.root_ids == [done.root_summary_id]
    view = browse.context_view(store.db, store.config, live, 100000)
    assert [i.type for i in view.items] == ["summary"] + ["message"] * 4
    assert store.doctor().ok
    again = apply_backfill(store, plan_backfill(store, transcript, session_id="one", single_root=True), transcript)
    assert again.root_summary_id == done.root_summary_id and again.summaries_made == 0


def test_single_root_groups_are_pure_and_always_shrink_the_context() -> None:
    from lcm.compaction import Item
    from lcm.operator.backfill import _groups

    def m(n: int, tokens: int = 10) -> Item:
        return Item(n, "message", n, None, tokens, "user", None)

    def s(n: int, tokens: int = 10, depth: int = 0) -> Item:
        return Item(n, "summary", None, f"sum_{n}", tokens, None, depth)

    def shape(groups: list[list[Item]]) -> list[list[int]]:
        return [[it.ordinal for it in g] for g in groups]

    assert shape(_groups([s(0), s(1, depth=2), s(2), m(3), m(4)], cap=100)) == [[0, 1, 2], [3, 4]]
    assert shape(_groups([s(0, 60), s(1, 60), s(2, 60)], cap=100)) == [[0, 1, 2]]  # a lone last one joins
    assert shape(_groups([s(0, 60), s(1, 60), s(2, 60), s(3, 60)], cap=100)) == [[0, 1], [2, 3]]
    assert shape(_groups([m(0, 300), m(1, 300)], cap=100)) == [[0], [1]]  # a big message is a leaf alone
    assert shape(_groups([s(0), m(1)], cap=100)) == [[1]]  # the lone summary waits for the next pass
