"""``amem.joins``: what a fold or merge put into a note, and the note's text without it, taken
out exactly or not at all (pure functions over literal histories)."""

from __future__ import annotations

from typing import Any

import pytest

from amem.errors import ValidationError
from amem.joins import find_join, lists_without, joined, text_without, without
from amem.write.fold import fold_content

A = "Alice has a cat."
B = "Alice has a cat. The cat is grey."
C = "The cat is grey. It sleeps all day."


def _fold(part: str, text: str, appended: str, **more: Any) -> dict[str, Any]:
    return {"action": "fold", "triggered_by": part, "folded_text": text, "appended": appended,
            **more}


def test_without_takes_out_one_whole_paragraph_only() -> None:
    assert without("a\n\nb\n\nc", "b") == "a\n\nc"
    assert without("a\n\nb", "b") == "a"
    assert without("a\n\nbc", "b") is None  # not whole
    assert without("a\n\nb\n\nb", "b") is None  # twice: which one is not told
    assert without("a", "") is None


def test_the_last_fold_comes_out_and_the_text_is_the_one_before() -> None:
    once = fold_content(A, B)
    history = [_fold("p1", B, once[len(A) + 2:])]
    assert text_without(find_join("n", history, "p1"), once, history) == (A, None)


def test_a_later_fold_sharing_a_sentence_keeps_the_text() -> None:
    """C's "The cat is grey." was held by B's paragraph, so C's fold appended only "It sleeps
    all day.": taking B's paragraph out would lose a sentence of C, which stays joined."""
    once = fold_content(A, B)
    twice = fold_content(once, C)
    history = [_fold("p1", B, once[len(A) + 2:]), _fold("p2", C, twice[len(once) + 2:])]
    text, why = text_without(find_join("n", history, "p1"), twice, history)
    assert text == twice and why is not None and "p2" in why
    # the later one comes out cleanly
    assert text_without(find_join("n", history, "p2"), twice, history) == (once, None)


def test_an_older_fold_is_redone_to_find_its_paragraph() -> None:
    once = fold_content(A, B)
    history = [{"action": "fold", "triggered_by": "p1", "folded_text": B}]
    assert text_without(find_join("n", history, "p1"), once, history) == (A, None)
    edited = once.replace("grey", "black")
    text, why = text_without(find_join("n", history, "p1"), edited, history)
    assert text == edited and why is not None


def test_an_llm_merge_is_undone_only_while_nothing_changed_the_text_since() -> None:
    merge = {"action": "consolidate_merge", "merged": "m", "merged_text": B,
             "merged_by": "llm:x", "old_content": A, "new_hash": None}
    history: list[dict[str, Any]] = [merge]
    assert text_without(find_join("n", history, "m"), "rewritten", history) == (A, None)
    history.append({"action": "update", "old_content": "rewritten"})
    text, why = text_without(find_join("n", history, "m"), "edited", history)
    assert text == "edited" and why is not None


def test_lists_keep_what_a_later_join_brought_too() -> None:
    history = [_fold("p1", B, "", added={"tags": ["pets", "grey"]}),
               _fold("p2", C, "", brought={"tags": ["grey"]})]
    join = find_join("n", history, "p1")
    later = [j for j in joined(history) if j.position > join.position]
    assert lists_without({"tags": ["alice", "pets", "grey"]}, join, later) == {"tags": ["pets"]}


def test_a_part_never_received_or_separated_already_is_refused() -> None:
    history = [_fold("p1", B, ""), {"action": "separated", "part": "p1", "into": "p1"}]
    with pytest.raises(ValidationError) as done:
        find_join("n", history, "p1")
    assert done.value.field == "part" and "already" in str(done.value)
    with pytest.raises(ValidationError) as never:
        find_join("n", history, "p9")
    assert never.value.field == "part" and "received no fold or merge" in str(never.value)


def test_notes_a_person_separated_stay_apart() -> None:
    from amem.write.together import Apart, kept_apart

    target = Apart("t", "ht", frozenset({"p1", "p2"}), frozenset({"h1", "h2"}))
    p1, p2 = Apart("p1", "h1", frozenset({"t"})), Apart("p2", "h2", frozenset({"t"}))
    assert kept_apart(target, p1) and kept_apart(p2, target)
    assert kept_apart(p1, p2)  # two texts taken out of one note: three facts told apart
    told_again = Apart("new", "h1")  # p1's text told again after p1 was deleted
    assert kept_apart(told_again, target) and not kept_apart(told_again, Apart("x", "hx"))


def test_a_paragraph_left_in_comes_out_once_the_join_holding_it_is_out() -> None:
    """B separated first had to stay (C's fold leaned on its sentence); once C is separated
    too, B's paragraph comes out as well and the note is A again."""
    from amem.joins import settle_left

    once = fold_content(A, B)
    twice = fold_content(once, C)
    history: list[dict[str, Any]] = [
        _fold("p1", B, once[len(A) + 2:]), _fold("p2", C, twice[len(once) + 2:]),
        {"action": "separated", "part": "p1", "into": "p1", "text": "kept"}]
    assert settle_left(twice, history) == (twice, [])  # C still joined: B's paragraph stays
    text, why = text_without(find_join("n", history, "p2"), twice, history)
    assert (text, why) == (once, None)
    history.append({"action": "separated", "part": "p2", "into": "p2", "text": "restored"})
    assert settle_left(text, history) == (A, ["p1"])
    history[-1]["also_taken_out"] = ["p1"]
    assert settle_left(A, history) == (A, [])  # said once


def test_a_merges_heat_goes_back_by_its_record() -> None:
    """The merged note gets what it had at the merge; the survivor keeps its own plus what
    accrued since, and its own last access unless it was used since the merge."""
    from amem.joins import heat_back

    heat = {"retrieval_count": 5, "last_accessed": "2026-01-02T00:00:00+00:00",
            "part": {"retrieval_count": 3, "last_accessed": "2026-01-03T00:00:00+00:00"}}
    entry = {"action": "consolidate_merge", "merged": "p", "merged_text": A, "heat": heat}
    join = find_join("n", [entry], "p")
    # not used since the merge: 5 + 3 summed, the later access kept
    assert heat_back(join, 8, "2026-01-03T00:00:00+00:00") == (
        {"retrieval_count": 5, "last_accessed": "2026-01-02T00:00:00+00:00"},
        {"retrieval_count": 3, "last_accessed": "2026-01-03T00:00:00+00:00"})
    # found twice since: those stay with the survivor, and so does its later access
    assert heat_back(join, 10, "2026-01-09T00:00:00+00:00")[0] == {
        "retrieval_count": 7, "last_accessed": "2026-01-09T00:00:00+00:00"}
    # a count below the sum (set by hand since) never takes the survivor below its own
    assert heat_back(join, 4, "")[0]["retrieval_count"] == 5
    # a merge recorded before the heat was, and a fold (no heat of its own): nothing to give
    legacy = find_join("n", [{k: v for k, v in entry.items() if k != "heat"}], "p")
    assert heat_back(legacy, 8, "") is None
    fold = find_join("n", [_fold("f", B, "The cat is grey.")], "f")
    assert heat_back(fold, 8, "") is None
