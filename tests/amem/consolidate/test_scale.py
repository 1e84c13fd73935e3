"""A quick scale run: 1k notes with planted duplicates through the benchmark's own code path."""

from __future__ import annotations

import pytest

from benchmarks.consolidate_bench import main, measure, plant


def test_plant_makes_the_share_of_duplicates_asked_for() -> None:
    notes, _, truth = plant(500, 0.1, 0.1)
    assert len(notes) == 500 and len(set(truth.values())) == 450
    assert all(n.id not in n.links for n in notes)


@pytest.mark.slow
def test_one_thousand_notes_merge_the_plant_and_nothing_else_much() -> None:
    result = measure(1000, dup_share=0.1, near_share=0.1)
    assert result["planted_duplicates"] == 100
    assert result["recall"] >= 0.99
    # near misses sit at cosine ~0.72 with noise; a few cross the threshold, most must not
    assert result["precision"] >= 0.95
    assert result["broken_links_after"] == 0
    assert result["second_run_merges"] == 0
    assert result["links_rewritten"] > 0


def test_cli_refuses_bad_shares(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--dup-share", "0.9"])
    assert "--dup-share" in capsys.readouterr().err
