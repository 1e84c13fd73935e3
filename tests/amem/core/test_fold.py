"""``fold_content``: a near-duplicate adds only the sentences its target lacks."""

from __future__ import annotations

import pytest

from amem.write.fold import fold_content

TURN = "Caroline: I went to the LGBTQ support group yesterday. It was so powerful."


def test_only_new_sentences_are_appended_as_one_paragraph() -> None:
    target = f"{TURN} Melanie: Wow, that sounds great!"
    new = f"{TURN} Melanie: How was the parade? Caroline: Amazing."
    assert fold_content(target, new) == f"{target}\n\nMelanie: How was the parade? Caroline: Amazing."


def test_a_kept_sentence_gets_its_speaker_back() -> None:
    # "I also painted a lake." continues Melanie's turn whose first sentence the target holds
    target = f"{TURN} Melanie: Wow, that sounds great!"
    new = "Melanie: Wow, that sounds great! I also painted a lake."
    assert fold_content(target, new) == f"{target}\n\nMelanie: I also painted a lake."


def test_the_same_words_from_another_speaker_are_new() -> None:
    target = "Caroline: Yes. Melanie: Where?"
    assert fold_content(target, "Melanie: Yes.") == f"{target}\n\nMelanie: Yes."
    assert fold_content(target, "Caroline: yes.") == target  # case and spacing do not count


@pytest.mark.parametrize("new", [
    "It was so powerful.",  # a sentence the target holds, by the same (carried) speaker
    f"  {TURN}  ",  # the whole text, inside the target
    "Caroline:   I went to the LGBTQ   support group yesterday.",
])
def test_nothing_new_leaves_the_target_unchanged(new: str) -> None:
    assert fold_content(TURN, new) == TURN


def test_text_without_speakers_and_lines_are_kept_apart() -> None:
    target = "Deploys run on Fridays. The pipeline needs CI to be green."
    new = "Deploys run on Fridays.\nRollbacks need a ticket. The pipeline needs CI to be green."
    assert fold_content(target, new) == f"{target}\n\nRollbacks need a ticket."
    two = "New line one.\nNew line two."
    assert fold_content(target, two) == f"{target}\n\nNew line one.\nNew line two."


def test_chinese_sentences() -> None:
    target = "我们周五发布。发布前需要安全审查。"
    new = "我们周五发布。回滚需要工单。"
    assert fold_content(target, new) == f"{target}\n\n回滚需要工单。"


def test_a_label_is_not_a_speaker() -> None:
    # "Note:" opens a sentence but is not a person: the sentences compare with their label
    target = "Note: the office is closed on Monday."
    assert fold_content(target, "Note: the office is closed on Monday. Bring keys.") == (
        f"{target}\n\nBring keys.")
