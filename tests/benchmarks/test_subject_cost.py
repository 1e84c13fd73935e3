"""``benchmarks.subject_cost`` on a CMRC-format file of our own sentences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import subject_cost

ARTICLE = ("星河一号气象卫星是中国航天科技集团研制的一颗极轨气象卫星，服务于国家气象中心。"
           "卫星于2003年5月由长征四号火箭发射升空，设计寿命为8年。"
           "星河一号气象卫星退役后，其业务由星河二号接替。")


def test_both_stores_are_timed_on_the_same_questions_and_the_step_s_runs_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "cmrc.json"
    answer = ARTICLE.index("设计寿命")
    data.write_text(json.dumps({"data": [{"paragraphs": [{"context": ARTICLE, "qas": [
        {"question": "星河一号气象卫星的设计寿命是多少年？", "id": "q1",
         "answers": [{"text": "8年", "answer_start": answer}]},
        {"question": "What replaced it?", "id": "q2",
         "answers": [{"text": "星河二号", "answer_start": ARTICLE.index("星河二号")}]},
    ]}]}]}, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "cost.json"
    assert subject_cost.main(["--data", str(data), "--rounds", "2", "--cache",
                              str(tmp_path / "cache"), "--out", str(out)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(capsys.readouterr().out) == result
    # the Chinese question takes the step, the English one does not
    assert (result["notes"], result["questions"], result["step_ran_for"]) == (3, 2, 1)
    for name in ("with", "without"):
        assert 0 < result[name]["p50_ms"] <= result[name]["p95_ms"]
    assert result["p50_ratio"] == pytest.approx(
        result["with"]["p50_ms"] / result["without"]["p50_ms"], abs=0.001)
