"""Two retrieval runs compared question by question: rows, pairing, counts and the sign test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.compare import differences, main, moved, sign_test, summary
from benchmarks.datasets import Corpus, Query
from benchmarks.retrieval import per_question


def test_the_sign_test_is_the_exact_two_sided_binomial_tail() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(9, 0) == sign_test(0, 9) == 2 / 2 ** 9
    assert sign_test(9, 3) == pytest.approx(2 * (1 + 12 + 66 + 220) / 2 ** 12)  # 0.146
    assert sign_test(4, 5) == 1.0  # capped: both tails hold every outcome
    assert sign_test(560, 540) == pytest.approx(0.567, abs=0.001)  # past a float's 2 ** 1024
    assert sign_test(1100, 0) == 0.0
    with pytest.raises(ValueError, match="counts must be >= 0"):
        sign_test(-1, 2)


def test_per_question_rows_carry_the_halves_and_the_metrics() -> None:
    corpus = Corpus("conv-x", queries=[
        Query("which trips?", {"t1", "t2"}, "1"),
        Query("adversarial", {"z"}, "5"),  # no half: halves() skips category 5
        Query("when?", {"w"}, "2")])
    rankings = {"store": [[["t1", "m", "t2"], ["z"], ["m", "w"]]], "bm25": [[[], [], []]]}
    rows = per_question([corpus], rankings)
    assert set(rows) == {"store"}  # baselines are read as means only
    first, adversarial, when = rows["store"]
    assert (first["half"], adversarial["half"], when["half"]) == ("a", None, "b")
    assert first["R@10"] == 1.0 and first["hit@1"] == 1.0 and first["MRR"] == 1.0
    assert when["hit@1"] == 0.0 and when["MRR"] == 0.5
    assert first["question"] == "which trips?" and adversarial["category"] == "5"


def _run(scores: list[float], realization: int = 0) -> dict[str, Any]:
    """A retrieval output whose store scored R@10 ``scores`` on conv-x's questions (category
    1, then alternating 2 and 5)."""
    rows = [{"corpus": "conv-x", "index": i, "question": f"q{i}", "category": c,
             "half": h, "R@10": s, "hit@1": s, "MRR": s}
            for i, (s, c, h) in enumerate(zip(scores, ["1", "2", "5", "1"],
                                              ["a", "b", None, "a"]))]
    return {"settings": {"realization": realization}, "per_question": {"store": rows}}


def test_questions_are_paired_and_their_moves_summed_over_realizations() -> None:
    before = {"realizations": {"0": _run([0.0, 1.0, 0.5, 0.5]),
                               "1": _run([1.0, 1.0, 0.5, 0.5], 1)}}
    after = {"realizations": {"0": _run([1.0, 0.0, 0.5, 1.0]),  # q0 up, q1 down, q3 up
                              "1": _run([0.0, 1.0, 0.5, 1.0], 1)}}  # q0 back down, q3 up
    diffs = differences(before, after)
    # q0 flipped back and forth: net 0, not moved; q3 up twice; q1 down once
    assert {k: d for k, (d, _) in diffs.items()} == {
        ("conv-x", 0): 0.0, ("conv-x", 1): -1.0, ("conv-x", 2): 0.0, ("conv-x", 3): 1.0}
    rows = {r["group"]: r for r in summary(diffs, realizations=2)}
    assert [r["group"] for r in summary(diffs, 2)] == ["all", "half a", "half b", "conv-x"]
    assert (rows["all"]["up"], rows["all"]["down"], rows["all"]["questions"]) == (1, 1, 4)
    assert rows["all"]["mean"] == 0.0 and rows["all"]["p"] == 1.0
    assert (rows["half a"]["up"], rows["half b"]["down"]) == (1, 1)
    assert moved(diffs) == [("conv-x", 1, -1.0, "q1"), ("conv-x", 3, 1.0, "q3")]
    only_1 = differences(before, after, category="1")
    assert sorted(only_1) == [("conv-x", 0), ("conv-x", 3)]
    assert sorted(differences(before, after, category="1-4")) == [
        ("conv-x", 0), ("conv-x", 1), ("conv-x", 3)]


def test_runs_that_cannot_be_paired_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="no realization in both runs"):
        differences(_run([1.0] * 4, 0), _run([1.0] * 4, 1))
    with pytest.raises(ValueError, match="did not ask the same questions"):
        shorter = _run([1.0] * 4)
        shorter["per_question"]["store"].pop()
        differences(_run([1.0] * 4), shorter)
    with pytest.raises(ValueError, match="no per-question rows for 'tool@10'"):
        differences(_run([1.0] * 4), _run([1.0] * 4), method="tool@10")
    with pytest.raises(ValueError, match="unknown metric 'R@3'"):
        differences(_run([1.0] * 4), _run([1.0] * 4), metric="R@3")


def test_the_command_prints_the_table_and_names_a_bad_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(_run([0.0, 1.0, 0.5, 0.5])))
    after.write_text(json.dumps(_run([1.0, 1.0, 0.5, 1.0])))
    assert main([str(before), str(after), "--category", "1"]) == 0
    out = capsys.readouterr().out
    assert "all | 2 | +0.7500 | 2 | 0 | 0.500" in out
    assert "conv-x #0 +1.000 q0" in out
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"settings": {}, "results": {}}))  # from before per_question
    assert main([str(old), str(after)]) == 2
    assert "no per-question rows for 'store'" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.json"), str(after)]) == 2
    assert "missing.json" in capsys.readouterr().err
