"""Depth-aware summary prompts (lcm.operator.prompts): levels, export / load / diff, and the summarizer using them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import LcmConfigError, LcmValidationError
from lcm.operator.prompts import DEFAULT_PROMPTS, LEVELS, PromptSet, diff_prompts, export_prompts, level_for, load_prompts
from tests.lcm.conftest import ScriptedLLM
from tests.lcm.kit_helpers import dag_store


def test_levels_follow_depth() -> None:
    assert [level_for("leaf", 0), level_for("condensed", 1), level_for("condensed", 2), level_for("condensed", 3),
            level_for("condensed", 9)] == ["leaf", "d1", "d2", "d3+", "d3+"]
    assert len(set(DEFAULT_PROMPTS.values())) == len(LEVELS)  # four distinct templates
    with pytest.raises(LcmValidationError, match="kind"):
        level_for("other", 0)


def test_export_edit_load_and_diff(tmp_path: Path) -> None:
    written = export_prompts(PromptSet.default(), tmp_path / "p")
    assert sorted(p.name for p in written) == ["d1.txt", "d2.txt", "d3plus.txt", "leaf.txt"]
    loaded = load_prompts(tmp_path / "p")
    assert dict(loaded.templates) == dict(DEFAULT_PROMPTS) and loaded.origins["d2"].endswith("d2.txt")
    assert diff_prompts(PromptSet.default(), loaded) == {}
    (tmp_path / "p" / "d2.txt").write_text("Write only the decisions. Keep ids.\n")
    (tmp_path / "p" / "leaf.txt").unlink()  # a missing level keeps the built-in text
    edited = load_prompts(tmp_path / "p")
    assert edited.origins["leaf"] == "built-in" and edited.templates["d2"] == "Write only the decisions. Keep ids."
    diff = diff_prompts(PromptSet.default(), edited)
    assert list(diff) == ["d2"] and "+Write only the decisions." in diff["d2"] and "-You merge summaries" in diff["d2"]
    with pytest.raises(LcmValidationError, match="already exist"):
        export_prompts(PromptSet.default(), tmp_path / "p")
    export_prompts(PromptSet.default(), tmp_path / "p", overwrite=True)
    assert load_prompts(tmp_path / "p").templates["d2"] == DEFAULT_PROMPTS["d2"]


def test_bad_prompt_directories_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(LcmConfigError, match="not a directory") as exc:
        load_prompts(tmp_path / "nowhere")
    assert exc.value.key == "summaryPromptsDir"
    (tmp_path / "d4.txt").write_text("x")
    with pytest.raises(LcmConfigError, match="d4.txt"):
        load_prompts(tmp_path)
    (tmp_path / "d4.txt").unlink()
    (tmp_path / "d1.txt").write_text("  \n")
    with pytest.raises(LcmConfigError, match="empty"):
        load_prompts(tmp_path)


def test_the_summarizer_writes_each_level_with_its_template(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    export_prompts(PromptSet.default(), tmp_path / "p")
    (tmp_path / "p" / "d1.txt").write_text("EDITED d1 prompt: merge the leaves.")
    llm = ScriptedLLM(default=lambda system, user: "a summary of what happened")
    store, conv = dag_store(make_store, llm=llm, summary_prompts_dir=str(tmp_path / "p"))
    by_depth = {int(r[0]): int(r[1]) for r in store.db.query(
        "SELECT depth, count(*) FROM summaries WHERE conversation_id = ? GROUP BY depth", (conv,))}  # fmt: skip
    systems = [system for system, _, _ in llm.calls]
    assert systems.count(DEFAULT_PROMPTS["leaf"]) == by_depth[0]
    assert systems.count("EDITED d1 prompt: merge the leaves.") == by_depth[1]
    assert systems.count(DEFAULT_PROMPTS["d2"]) == by_depth[2]
    with pytest.raises(LcmConfigError, match="summaryPromptsDir"):
        make_store(summary_prompts_dir=str(tmp_path / "missing"))


PREVIOUS = "Previous summary (context only"


def block(request: str) -> str:
    """The previous-summary block of a summarizer request (it ends at the first blank line)."""
    return request.split(PREVIOUS, 1)[1].split("\n\n", 1)[0]


def numbered(word: str) -> ScriptedLLM:
    counter = iter(range(1, 100_000))
    return ScriptedLLM(default=lambda system, user: f"{word}-{next(counter)} covers what happened")


def test_leaf_and_d1_prompts_get_the_previous_summary_of_their_level(make_store: Callable[..., LcmStore]) -> None:
    llm = numbered("SUMMARY")
    store, conv = dag_store(make_store, llm=llm)
    texts = {lv: [u for s, u, _ in llm.calls if s == DEFAULT_PROMPTS[lv]] for lv in ("leaf", "d1", "d2")}
    assert len(texts["leaf"]) >= 3 and len(texts["d1"]) >= 2 and texts["d2"]
    for level, kind, depth in (("leaf", "leaf", 0), ("d1", "condensed", 1)):
        made = [str(r[0]).split("\n")[1].split()[0] for r in store.db.query(
            "SELECT content FROM summaries WHERE conversation_id = ? AND kind = ? AND depth = ? ORDER BY pk",
            (conv, kind, depth))]  # fmt: skip
        calls = texts[level]
        assert PREVIOUS not in calls[0]  # the first of its level has nothing before it
        for before, call in zip(made, calls[1:]):  # each later one is handed the one just before it
            assert PREVIOUS in call and f"{before} covers what happened" in block(call)
    assert not any(PREVIOUS in u for u in texts["d2"])  # an overview is not a continuation


def test_a_rewrite_hands_the_previous_summary_as_it_will_read(make_store: Callable[..., LcmStore]) -> None:
    from lcm.compaction import Compactor
    from lcm.operator.repair import RepairKit
    from lcm.summarize import Summarizer

    store, conv = dag_store(make_store)  # extractive summaries
    llm = numbered("REWRITE")
    kit = RepairKit(store.db, store.config, Compactor(store.db, store.config, Summarizer(store.config, llm, store.clock),
                                                       store.clock, store.events))  # fmt: skip
    plan = kit.plan_rewrite_depth(conv, 0)
    assert len(plan.rewrites) >= 2
    leaf_calls = [u for s, u, _ in llm.calls if s == DEFAULT_PROMPTS["leaf"]]
    assert PREVIOUS not in leaf_calls[0]
    # the second leaf's request carries the first leaf's new text, not the stored extractive one
    assert "REWRITE-1 covers what happened" in block(leaf_calls[1])
