"""``benchmarks.open_bench`` at tiny sizes, so the scale benchmark does not rot."""

from __future__ import annotations

import pytest

from benchmarks.open_bench import ratios, run


@pytest.mark.slow
def test_open_bench_measures_import_and_open_at_two_sizes() -> None:
    rows = run([150, 300])
    assert [r["notes"] for r in rows] == [150, 300]
    for row in rows:
        assert row["import"]["created"] == row["notes"]
        assert row["open"]["hits"] == 5 and row["open"]["open_s"] > 0
        assert row["import"]["peak_rss_mb"] > 0
    assert set(ratios(rows)) == {"notes", "import_peak_rss", "import_anon", "open_seconds",
                                 "open_peak_rss", "open_anon"}
    assert ratios(rows)["notes"] == 2.0
