"""benchmarks.lcm_semantic at its quick size (one conversation, hashing), so it does not rot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import lcm_semantic
from benchmarks.datasets import DEFAULT_LOCOMO

pytestmark = pytest.mark.skipif(not DEFAULT_LOCOMO.exists(),
                                reason=f"benchmark data not found at {DEFAULT_LOCOMO}")


def test_the_lcm_semantic_benchmark_runs_and_reports_every_method(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert lcm_semantic.main(["--embedder", "hashing", "--corpora", "1", "--scan", "2000",
                              "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["results"]) == {"full_text", "semantic", "hybrid", "bm25 (baseline)",
                                      "dense float32 (baseline)"}
    assert result["embed"]["items"] == result["turns"] > 0
    assert result["results"]["hybrid"]["cat1-4"]["n"] > 0
    assert result["scan"][0]["vectors"] == 2000 and result["scan"][0]["scan_ms"] > 0
