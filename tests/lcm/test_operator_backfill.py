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
