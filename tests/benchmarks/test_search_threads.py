"""``benchmarks.search_threads`` at a tiny size: every copy searched, every figure read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import search_threads
from benchmarks.datasets import DEFAULT_LOCOMO

pytestmark = pytest.mark.skipif(not DEFAULT_LOCOMO.exists(),
                                reason=f"benchmark data not found at {DEFAULT_LOCOMO}")


def test_each_thread_count_is_its_own_copy_measured_on_the_same_queries(tmp_path: Path) -> None:
    out = tmp_path / "threads.json"
    rc = search_threads.main(["--size", "300", "--threads", "1,3", "--queries", "6",
                              "--embedder", "hashing", "--optimize-every", "150",
                              "--segment-mb", "1", "--out", str(out)])
    assert rc == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["queries"] == 6 and result["size"] == 300
    assert isinstance(result["segments"], int) and result["segments"] >= 1
    assert set(result["threads"]) == {"1", "3"}
    assert result["threads"]["1"]["full_over_first_row"] == 1.0
    for row in result["threads"].values():
        assert row["full_p50_ms"] > 0 and row["engine_p50_ms"] > 0 and row["embed_p50_ms"] > 0
        assert row["full_over_engine_plus_embed"] == pytest.approx(
            row["full_p50_ms"] / (row["engine_p50_ms"] + row["embed_p50_ms"]), abs=0.01)


def test_a_thread_count_below_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        search_threads.main(["--threads", "0,2"])
    assert "--threads takes counts >= 1" in capsys.readouterr().err
