"""``benchmarks.lcm_ingest_parts_bench`` at a tiny size on both engines, so it does not rot."""

from __future__ import annotations

import json

import pytest

from benchmarks.lcm_ingest_parts_bench import main


@pytest.mark.parametrize(("engine", "variants"), [
    ("sqlite", {"shipped", "unbounded", "shipped_b500", "unbounded_b500", "flush_1mb"}),
    ("postgresql", {"full", "no_tri", "no_words", "no_both", "no_tsv", "deferred", "side"})])  # fmt: skip
def test_every_variant_ingests_every_message(engine: str, variants: set[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--engine", engine, "--size", "1000", "--conversations", "7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["messages"] == 1000 and set(out["results"]) == variants
    assert all(r["msgs_per_s"] > 0 and r["msgs_per_client_cpu_s"] > 0 for r in out["results"].values())
