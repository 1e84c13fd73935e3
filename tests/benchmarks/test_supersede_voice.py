"""``benchmarks.supersede_judge_bench --voice third``: a turn as an agent would note it."""

from __future__ import annotations

from benchmarks.supersede_judge_bench import Turn, _view, third_person


def test_third_person_names_the_speaker_and_gives_no_subject() -> None:
    turn = Turn("s", "D1:1", "Jon", "I'm back! I lost my job, so my sister and I've moved. "
                                     "Call me, I'll tell you myself. Mine was the best.")
    noted = third_person(turn)
    assert noted.text == ("Jon is back! Jon lost Jon's job, so Jon's sister and Jon has moved. "
                          "Call Jon, Jon will tell you Jon. Jon's was the best.")
    assert _view(noted, "n").subjects == () and _view(turn, "n").subjects == ("Jon",)
    # words holding the letters are left alone; "I" is only the pronoun
    assert third_person(Turn("s", "D1:2", "Ann", "Myriad items in Iceland")).text == \
        "Myriad items in Iceland"
