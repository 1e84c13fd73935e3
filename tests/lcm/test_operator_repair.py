"""The repair kit's writes (lcm.operator): rewrite, subtree, repair, dissolve and transplant, planned then applied."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from lcm import LcmStore
from lcm.compaction import Compactor
from lcm.errors import ConcurrentChangeError, LcmNotFoundError, LcmValidationError
from lcm.operator import browse
from lcm.operator.dissolve import apply_dissolve, plan_dissolve
from lcm.operator.prompts import DEFAULT_PROMPTS
from lcm.operator.repair import RepairKit, RepairUnavailableError
from lcm.operator.transplant import apply_transplant, plan_transplant
from lcm.summarize import Summarizer
from tests.lcm.conftest import ScriptedLLM, chat
from tests.lcm.kit_helpers import KEY, dag_store


class VersionedLLM(ScriptedLLM):
    """Replies ``<version> summary #n``, and remembers every prompt; ``fail`` makes calls raise."""

    def __init__(self, version: str = "v1") -> None:
        super().__init__(default=self._reply)
        self.version = version
        self.fail = False
        self.n = 0

    def _reply(self, system: str, user: str) -> str:
        if self.fail:
            raise RuntimeError("model down")
        self.n += 1
        return f"{self.version} summary #{self.n} of {len(user)} chars"


def contents(store: LcmStore, conv: int) -> dict[str, tuple[str, int, str, str]]:
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in store.db.query(
        "SELECT summary_id, content, token_count, model, status FROM summaries WHERE conversation_id = ?", (conv,))}


def descendant_counts_are_right(store: LcmStore) -> bool:
    bad = store.db.query(
        "SELECT s.summary_id FROM summaries s WHERE s.kind = 'condensed' AND s.descendant_token_count <> "
        "(SELECT sum(x.token_count + x.descendant_token_count) FROM summary_parents p JOIN summaries x "
        "ON x.summary_id = p.parent_summary_id WHERE p.summary_id = s.summary_id)")
    return not bad


def with_llm(store: LcmStore, llm: Any) -> RepairKit:
    """A kit over ``store`` whose summarizer has ``llm`` (the store's own has none)."""
    summarizer = Summarizer(store.config, llm, store.clock)
    return RepairKit(store.db, store.config, Compactor(store.db, store.config, summarizer, store.clock, store.events))


def test_rewrite_one_summary_with_its_level_prompt_and_a_diff(make_store: Callable[..., LcmStore]) -> None:
    llm = VersionedLLM()
    store, conv = dag_store(make_store, llm=llm)
    kit = RepairKit.of(store)
    tree = browse.summary_tree(store.db, conv)
    leaf = next(n for n in tree.walk() if n.kind == "leaf")
    before = contents(store, conv)
    llm.version = "v2"
    plan = kit.plan_rewrite(leaf.id)
    assert contents(store, conv) == before  # planning writes nothing
    assert [r.summary_id for r in plan.rewrites] == [leaf.id] and plan.rewrites[0].level == "leaf"
    assert llm.calls[-1][0] == DEFAULT_PROMPTS["leaf"]
    r = plan.rewrites[0]
    assert r.old_content.startswith("Summary of") and "v1 summary" in r.old_content and "v2 summary" in r.new_content
    assert any(line.startswith("-") and "v1 summary" in line for line in r.diff.splitlines())
    assert any(line.startswith("+") and "v2 summary" in line for line in r.diff.splitlines())
    done = kit.apply(plan)
    assert done.applied and contents(store, conv)[leaf.id][0] == r.new_content
    assert descendant_counts_are_right(store) and store.doctor().ok
    with pytest.raises(LcmValidationError, match="applied already"):
        kit.apply(done)


def test_rewrite_all_goes_bottom_up_and_parents_read_the_new_sources(make_store: Callable[..., LcmStore]) -> None:
    llm = VersionedLLM()
    store, conv = dag_store(make_store, llm=llm)
    kit = RepairKit.of(store)
    llm.version = "v2"
    first = len(llm.calls)
    plan = kit.plan_rewrite_all(conv)
    depths = [r.depth for r in plan.rewrites]
    assert depths == sorted(depths) and len(plan.rewrites) == len(contents(store, conv))
    # each condensed summary was asked with its level's prompt, over its sources' new text
    new_text = {r.summary_id: r.new_content for r in plan.rewrites}
    for r, (system, user, _) in zip(plan.rewrites, llm.calls[first:]):
        assert system == DEFAULT_PROMPTS[r.level]
        if r.kind == "condensed":
            sources = [s.id for s in next(n for n in browse.summary_tree(store.db, conv).walk() if n.id == r.summary_id).sources]
            assert all(new_text[s] in user for s in sources) and "v1 summary" not in user
    kit.apply(plan)
    assert all("v2 summary" in c[0] for c in contents(store, conv).values())
    assert descendant_counts_are_right(store) and store.doctor().ok
    # every summary at one depth, and a subtree
    llm.version = "v3"
    d1 = kit.plan_rewrite_depth(conv, 1)
    assert d1.rewrites and {r.depth for r in d1.rewrites} == {1}
    root = browse.summary_tree(store.db, conv).roots[0]
    sub = kit.plan_rewrite_subtree(root.sources[0].id)
    below = root.sources[0]
    assert {r.summary_id for r in sub.rewrites} == {below.id, *(s.id for s in below.sources)}
    assert sub.rewrites[-1].summary_id == below.id  # the top comes last


def test_a_rewrite_never_degrades_and_never_overwrites_a_change(make_store: Callable[..., LcmStore]) -> None:
    llm = VersionedLLM()
    store, conv = dag_store(make_store, llm=llm)
    kit = RepairKit.of(store)
    leaf = next(n for n in browse.summary_tree(store.db, conv).walk() if n.kind == "leaf")
    llm.fail = True
    failed = kit.plan_rewrite(leaf.id)
    assert not failed.rewrites and "LLM failed" in failed.skipped[0].reason and "model down" in failed.skipped[0].reason
    # an LLM-written summary is not replaced by an extractive one when no LLM is configured
    no_llm = with_llm(store, None).plan_rewrite(leaf.id)
    assert not no_llm.rewrites and "no LLM is configured" in no_llm.skipped[0].reason
    llm.fail = False
    llm.version = "v2"
    plan = kit.plan_rewrite_all(conv)
    with store.db.atomic() as c:
        c.execute("UPDATE summaries SET content = 'edited meanwhile' WHERE summary_id = ?", (plan.rewrites[-1].summary_id,))
    before = contents(store, conv)
    with pytest.raises(ConcurrentChangeError, match=plan.rewrites[-1].summary_id):
        kit.apply(plan)
    assert contents(store, conv) == before  # all or nothing
    with pytest.raises(LcmNotFoundError):
        kit.plan_rewrite("sum_0000000000000000")
    with pytest.raises(LcmNotFoundError):
        kit.plan_rewrite_all(999)


def test_repair_upgrades_extractive_summaries_once_an_llm_is_configured(make_store: Callable[..., LcmStore]) -> None:
    store, conv = dag_store(make_store)  # no LLM: every summary is extractive
    assert {c[2] for c in contents(store, conv).values()} == {"extractive"}
    with pytest.raises(RepairUnavailableError, match="none is configured"):
        RepairKit.of(store).plan_repair(conv)
    llm = VersionedLLM("llm")
    llm.script = [RuntimeError("first call fails"), RuntimeError("and its retry")]
    kit = with_llm(store, llm)
    plan = kit.plan_repair(conv)
    # the first summary failed twice (normal and aggressive prompts) and is skipped, the rest upgraded
    assert len(plan.skipped) == 1 and "LLM failed" in plan.skipped[0].reason
    assert len(plan.rewrites) == len(contents(store, conv)) - 1
    assert all(r.old_model == "extractive" and r.new_status == "ok" for r in plan.rewrites)
    kit.apply(plan)
    after = contents(store, conv)
    assert after[plan.skipped[0].summary_id][2] == "extractive"
    assert sum(1 for c in after.values() if c[2] != "extractive") == len(plan.rewrites)
    # the next repair finds only the one left, and an upgraded summary is not a candidate any more
    again = kit.plan_repair(conv)
    assert [r.summary_id for r in again.rewrites] == [plan.skipped[0].summary_id]
    one = kit.plan_repair(summary_id=plan.rewrites[0].summary_id)
    assert not one.rewrites and "nothing to repair" in one.skipped[0].reason


def test_dissolve_restores_the_sources_in_place_with_the_token_impact(make_store: Callable[..., LcmStore]) -> None:
    store, conv = dag_store(make_store)
    root = browse.summary_tree(store.db, conv).roots[0]
    before = browse.context_view(store.db, store.config, conv, 100000)
    plan = plan_dissolve(store.db, root.id)
    assert [r.summary_id for r in plan.restored] == [s.id for s in root.sources]
    assert plan.token_delta == sum(s.token_count for s in root.sources) - root.token_count
    assert plan.context_tokens_before == before.stored_tokens and plan.items_shifted == before.tail_count
    apply_dissolve(store.db, plan)
    after = browse.context_view(store.db, store.config, conv, 100000)
    assert [i.id for i in after.items] == [s.id for s in root.sources] + [i.id for i in before.items[1:]]
    assert after.stored_tokens == plan.context_tokens_after
    assert store.db.scalar("SELECT count(*) FROM summaries WHERE summary_id = ?", (root.id,)) == 0  # purged
    assert store.doctor().ok
    # a d1 source back in the context can be dissolved in turn; kept (no purge), it leaves the context only
    d1 = root.sources[0]
    apply_dissolve(store.db, plan_dissolve(store.db, d1.id, purge=False))
    assert store.db.scalar("SELECT count(*) FROM summaries WHERE summary_id = ?", (d1.id,)) == 1
    with pytest.raises(LcmValidationError, match="not in the active context"):
        plan_dissolve(store.db, d1.id)
    with pytest.raises(LcmValidationError, match="leaf"):
        plan_dissolve(store.db, d1.sources[0].id)


def test_dissolve_refuses_a_summary_condensed_further_and_a_stale_plan(make_store: Callable[..., LcmStore]) -> None:
    store, conv = dag_store(make_store)
    root = browse.summary_tree(store.db, conv).roots[0]
    with pytest.raises(LcmValidationError, match=f"condensed into {root.id}"):
        plan_dissolve(store.db, root.sources[0].id)
    plan = plan_dissolve(store.db, root.id)
    with store.db.atomic() as c:  # the context moves under the plan (as another writer would)
        c.execute("UPDATE context_items SET ordinal = ordinal + 1000 WHERE summary_id = ?", (root.id,))
    before = store.db.query("SELECT ordinal, item_type, message_id, summary_id FROM context_items ORDER BY ordinal")
    with pytest.raises(ConcurrentChangeError, match="changed since the plan"):
        apply_dissolve(store.db, plan)
    after = store.db.query("SELECT ordinal, item_type, message_id, summary_id FROM context_items ORDER BY ordinal")
    assert [tuple(r) for r in after] == [tuple(r) for r in before]


def test_transplant_deep_copies_the_dag_and_refuses_a_second_copy(make_store: Callable[..., LcmStore]) -> None:
    store, source = dag_store(make_store)
    target = store.ingest("agent:kit:new", chat(6, start=500)).conversation_id
    assert target is not None
    before_target = browse.context_view(store.db, store.config, target, 100000)
    plan = plan_transplant(store.db, source, target)
    tree = browse.summary_tree(store.db, source)
    assert plan.root_ids == [r.id for r in tree.roots] and set(plan.summary_ids) == {n.id for n in tree.walk()}
    covered = store.db.scalar("SELECT count(DISTINCT message_id) FROM summary_messages")
    assert plan.message_count == covered and not plan.duplicates
    done = apply_transplant(store.db, plan, "2026-01-01T00:00:00Z")
    copied = browse.summary_tree(store.db, target)
    assert [n.content_preview for n in copied.walk()] == [n.content_preview for n in tree.walk()]
    assert {n.id for n in copied.walk()} == {done.id_map[s] for s in plan.summary_ids}
    # the copies' leaves cover copies of the messages, owned by the target, older than its own
    rows = store.db.query("SELECT m.conversation_id, m.seq FROM summary_messages sm JOIN messages m ON m.id = sm.message_id "
                          "JOIN summaries s ON s.summary_id = sm.summary_id WHERE s.conversation_id = ?", (target,))
    first_own = store.db.scalar("SELECT min(seq) FROM messages m WHERE conversation_id = ? AND NOT EXISTS "
                                "(SELECT 1 FROM summary_messages sm WHERE sm.message_id = m.id)", (target,))
    assert len(rows) == covered and all(r[0] == target and r[1] < first_own for r in rows)
    after = browse.context_view(store.db, store.config, target, 100000)
    assert [i.id for i in after.items] == [done.id_map[r] for r in plan.root_ids] + [i.id for i in before_target.items]
    assert after.stored_tokens == before_target.stored_tokens + plan.context_tokens_added
    expanded = store.expand([done.id_map[plan.root_ids[0]]], max_depth=None, token_cap=100000)
    assert expanded.messages and {m.conversation_id for m in expanded.messages} == {target}
    assert store.doctor().ok
    # the same DAG again: every summary is a duplicate, and apply refuses without writing
    again = plan_transplant(store.db, source, target)
    assert {d.source_summary_id for d in again.duplicates} == set(plan.summary_ids)
    n = store.db.scalar("SELECT count(*) FROM summaries")
    with pytest.raises(LcmValidationError, match="already holds"):
        apply_transplant(store.db, again, "2026-01-01T00:00:00Z")
    assert store.db.scalar("SELECT count(*) FROM summaries") == n
    with pytest.raises(LcmValidationError, match="same conversation"):
        plan_transplant(store.db, source, source)
    with pytest.raises(LcmValidationError, match="not summaries of conversation"):
        plan_transplant(store.db, target, source, summary_ids=[plan.root_ids[0]])
