"""``benchmarks.lcm_pg_bench --compare-assembly`` at a tiny size, so the old/new comparison does not rot."""

from __future__ import annotations

import json

import pytest

from benchmarks.lcm_pg_bench import main


def test_compare_assembly_times_both_sides_on_both_engines(capsys: pytest.CaptureFixture[str]) -> None:
    # HEAD's own modules as the 'old' side: always in the clone; the bench refuses a revision
    # whose context differs from the code here, so a run that prints figures assembled the same
    assert main(["--size", "200", "--conversations", "3", "--compare-assembly", "HEAD"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    for key in ("assemble_1000_old_p50_ms", "assemble_1000_new_p50_ms", "assemble_1000_old_over_new"):
        assert results[key]["sqlite"] > 0 and results[key]["postgresql"] > 0


def test_compare_assembly_names_a_revision_it_cannot_read() -> None:
    with pytest.raises(SystemExit, match="cannot read lcm/compaction.py at git revision 'no-such-rev'"):
        main(["--size", "100", "--conversations", "2", "--compare-assembly", "no-such-rev"])
