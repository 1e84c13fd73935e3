"""The supersede import benchmark runs end to end on a small file (hashing embedder)."""

from __future__ import annotations

from benchmarks.supersede_import_bench import run


def test_it_times_both_settings_on_the_same_notes() -> None:
    result = run(20, "hashing", 1, change_every=2)
    assert result["notes_stating_a_change"] >= 10 and result["judged_by"] == "offline"
    assert result["seconds_off"] > 0 and result["seconds_on"] > 0
    assert result["on_over_off"] is not None
