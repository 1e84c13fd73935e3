"""benchmarks/embed_bench.py runs end to end on a tiny LoCoMo-shaped file (hashing only: fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import embed_bench


def locomo_file(tmp_path: Path) -> Path:
    conversation = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "later"}],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "hello"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "look", "blip_caption": "a dog"},
            ],
        },
        "qa": [],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([conversation]), encoding="utf-8")
    return path


def test_turns_are_read_in_session_order(tmp_path: Path) -> None:
    turns = embed_bench.load_turns(locomo_file(tmp_path), 10)
    assert turns == ["Ann: hello", "Bo: look [shares a dog]", "Bo: later"]
    assert embed_bench.load_turns(locomo_file(tmp_path), 1) == ["Ann: hello"]


def test_run_and_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = embed_bench.run(quick=True, data=locomo_file(tmp_path), configs=["hashing"])
    row = result["embedders"]["hashing"]
    assert row["notes"] == 3 and row["notes_per_s"] > 0 and row["x_fastest"] == 1.0
    out = tmp_path / "out.json"
    code = embed_bench.main(
        ["--quick", "--data", str(locomo_file(tmp_path)), "--configs", "hashing", "--out", str(out)]
    )
    assert code == 0
    assert "hashing" in capsys.readouterr().out
    assert json.loads(out.read_text())["notes"] == 3
    with pytest.raises(ValueError, match="unknown configuration"):
        embed_bench.run(quick=True, data=locomo_file(tmp_path), configs=["nope"])
