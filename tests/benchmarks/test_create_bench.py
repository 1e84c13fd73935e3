"""``benchmarks.create_bench`` runs at a tiny size and reports both ways of making a store."""

from __future__ import annotations

import pytest

from benchmarks.create_bench import main, run


def test_both_ways_are_timed_and_compared() -> None:
    out = run(2, 8, "temporary")
    assert out["stores"] == 2 and out["kind"] == "temporary"
    for side in ("engine", "blank"):
        assert out[side]["cpu_ms_p50"] > 0 and out[side]["wall_ms_p50"] > 0
    assert out["blank_over_engine_cpu"] == pytest.approx(
        out["blank"]["cpu_ms_p50"] / out["engine"]["cpu_ms_p50"], rel=0.01)


def test_a_bad_count_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--stores", "0"])
    assert "--stores must be at least 1" in capsys.readouterr().err
