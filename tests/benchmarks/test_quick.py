"""The performance suite at its quick sizes, so no benchmark rots; plus the runner's own rules."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import pytest

from benchmarks import run_all
from benchmarks._util import fmt_ratio, latency_ms, percentile, ratio
from benchmarks.datasets import DEFAULT_LOCOMO
from benchmarks.import_bench import build_items, pipeline_cpu, plain_add
from benchmarks.run_all import SuiteOptions, run_suite, write_results

# The benchmarks read real third-party data from ../shared (beside the checkout, as in CI);
# it may not be copied into the repo, so a checkout without it cannot run them.
pytestmark = pytest.mark.skipif(not DEFAULT_LOCOMO.exists(),
                                reason=f"benchmark data not found at {DEFAULT_LOCOMO}")

EXPECTED = ("search", "embed", "import", "lcm", "consolidate")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, dict[str, Any]]:
    """One quick run of the whole suite through the real command line (hashing embedder)."""
    tmp = tmp_path_factory.mktemp("suite")
    md, raw = tmp / "RESULTS.md", tmp / "results.json"
    rc = run_all.main(["--quick", "--embedder", "hashing", "--embed-configs", "hashing,minilm/t1",
                       "--queries", "10", "--out", str(md), "--json", str(raw)])
    return rc, md, json.loads(raw.read_text(encoding="utf-8"))


def _numbers(node: Any, path: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        yield path, float(node)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}[{i}]")


def test_every_benchmark_runs_ok(quick: tuple[int, Path, dict[str, Any]]) -> None:
    rc, _, suite = quick
    statuses = {name: entry["status"] for name, entry in suite["benchmarks"].items()}
    assert statuses == {name: "ok" for name in EXPECTED}, suite["benchmarks"]
    assert rc == 0


def test_every_figure_is_finite_and_not_negative(quick: tuple[int, Path, dict[str, Any]]) -> None:
    figures = list(_numbers(quick[2]["benchmarks"]))
    assert len(figures) > 100
    # a change of the resident set (``*_change_mb``) is the one figure that may fall below 0
    bad = [(p, v) for p, v in figures
           if not math.isfinite(v) or (v < 0 and not p.endswith("_change_mb"))]
    assert bad == []


def test_search_figures(quick: tuple[int, Path, dict[str, Any]]) -> None:
    result = quick[2]["benchmarks"]["search"]["result"]
    row = result["sizes"]["1000"]
    for stage in ("before_optimize", "after_optimize"):
        m = row[stage]
        for part in ("full", "engine", "embed", "baseline"):
            assert m[part]["p50_ms"] > 0 and m[part]["p95_ms"] >= m[part]["p50_ms"]
        assert m["ratios"]["baseline_over_full_p50"] > 0
        assert m["ratios"]["full_over_engine_plus_embed_p50"] > 0
    assert row["upserts_per_s"] > 0
    assert result["rss"]["1000"]["peak_mb_after"] >= result["rss"]["peak_mb_before"] > 0


def test_import_figures(quick: tuple[int, Path, dict[str, Any]]) -> None:
    result = quick[2]["benchmarks"]["import"]["result"]
    assert result["notes"] == 300
    for phase in ("raw", "import_no_enrich", "import_enrich", "raw_note_texts"):
        assert result[phase]["notes_per_s"] > 0
    # the fast path stores every unique note; enrichment may fold near-duplicates away
    assert result["import_no_enrich"]["created"] == 300
    assert result["import_no_enrich"]["count_after"] == 300
    assert result["import_enrich"]["skipped"] == 0
    assert 0 < result["ratios"]["import_enrich_over_raw"]
    add = result["add_latency"]
    assert add["add"]["n"] == 20 and add["add"]["p50_ms"] > 0
    assert add["store_notes_before"] == result["import_enrich"]["count_after"]
    assert isinstance(result["meets_aim"], bool)


def test_other_benchmarks_figures(quick: tuple[int, Path, dict[str, Any]]) -> None:
    b = quick[2]["benchmarks"]
    embedders = b["embed"]["result"]["embedders"]
    assert embedders["hashing"]["notes_per_s"] > 0
    assert b["lcm"]["result"]["sizes"][0]["ingest_msgs_per_s"] > 0
    assert b["lcm"]["result"]["sizes"][0]["grep"]["full_text_rare"]["hits"] >= 1
    cons = b["consolidate"]["result"]["results"][0]
    assert cons["consolidate_s"] > 0 and cons["broken_links_after"] == 0


def test_markdown_has_every_table_and_the_facts(quick: tuple[int, Path, dict[str, Any]]) -> None:
    text = quick[1].read_text(encoding="utf-8")
    for title in ("## Search latency", "## Embedder throughput", "## Bulk import and `add`",
                  "## LCM ingest", "## Consolidation", "<!-- retrieval -->"):
        assert title in text
    assert "`python -m benchmarks.run_all --quick --embedder hashing" in text
    assert "qdrant-edge-py 0.9.0" in text and "cores" in text
    assert "| 1 000 | after |" in text


@pytest.mark.parametrize("kept", [
    "<!-- retrieval -->\n## Retrieval\n\n| method | R@10 |\n|---|---|\n| store | 0.61 |\n<!-- /retrieval -->",
    "<!-- manual -->\n## LCM grep at 1M messages\n\n| grep ms | 0.57 |\n<!-- /manual -->",
], ids=["retrieval", "manual"])
def test_kept_sections_survive_a_rewrite(quick: tuple[int, Path, dict[str, Any]],
                                         tmp_path: Path, kept: str) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text(f"# old\n\nstale figures\n\n{kept}\n\ntrailing\n", encoding="utf-8")
    text = write_results(quick[2], "python -m benchmarks.run_all --quick", out)
    assert kept in text and "stale figures" not in text
    assert text.count(kept.split("\n", 1)[0]) == 1


def test_a_failing_or_missing_benchmark_is_recorded_not_fatal(tmp_path: Path) -> None:
    def fine(options: SuiteOptions) -> dict[str, Any]:
        return {"quick": options.quick}

    def broken(options: SuiteOptions) -> dict[str, Any]:
        raise RuntimeError("engine exploded")

    def absent(options: SuiteOptions) -> dict[str, Any]:
        return run_all._module("no_such_bench").run(options.quick)  # type: ignore[no-any-return]

    suite = run_suite(SuiteOptions(quick=True), {"broken": broken, "absent": absent, "fine": fine})
    entries = suite["benchmarks"]
    assert entries["broken"]["status"] == "failed" and "engine exploded" in entries["broken"]["error"]
    assert (entries["absent"]["status"], entries["absent"]["error"]) == (
        "missing", "no module benchmarks.no_such_bench")
    assert (entries["fine"]["status"], entries["fine"]["result"]) == ("ok", {"quick": True})
    assert all(e["seconds"] >= 0 and e["date"].endswith("UTC") for e in entries.values())
    text = write_results(suite, "cmd", tmp_path / "R.md")
    assert "engine exploded" in text and "missing" in text


def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="sizes"):
        SuiteOptions(sizes=(0,))
    with pytest.raises(ValueError, match="unknown benchmark"):
        run_suite(SuiteOptions(quick=True), only=["nope"])
    assert run_all.main(["--quick", "--sizes", "1k"]) == 2
    assert "--sizes must be comma-separated integers" in capsys.readouterr().err


def test_timing_helpers() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([1.0, 2.0], 0.95) == 2.0
    with pytest.raises(ValueError):
        percentile([], 0.5)
    lat = latency_ms([0.001, 0.002, 0.003])
    assert lat == {"p50_ms": 2.0, "p95_ms": 3.0, "max_ms": 3.0, "n": 3}
    assert ratio(3.0, 2.0) == 1.5 and ratio(1.0, 0.0) is None and ratio(None, 1.0) is None
    assert fmt_ratio(None) == "—" and fmt_ratio(0.6) == "0.60x"


def test_import_items_are_unique_real_turns() -> None:
    items = build_items(2000)
    texts = [item["text"] for item in items]
    assert len(texts) == 2000 == len(set(texts))
    assert all(": " in t for t in texts)  # "<speaker>: <text>"
    with pytest.raises(ValueError, match="positive"):
        build_items(0)


def test_plain_add_times_adds_into_a_store_of_exactly_size_notes() -> None:
    result = plain_add(120, "hashing", adds=6)
    assert result["import_no_enrich"]["count_after"] == 120
    latency = result["add_latency"]
    assert latency["store_notes_before"] == 120 and latency["add"]["n"] == 6
    assert sum(latency["statuses"].values()) == 6 and latency["add"]["p50_ms"] > 0


def test_pipeline_cpu_fills_the_cache_first_then_times_an_import_without_the_encoder(
        tmp_path: Path) -> None:
    first = pipeline_cpu(80, tmp_path / "cache", "hashing")
    assert first["cache_filled"] is True and first["notes"] == 80
    assert 0 < first["notes_stored"] <= 80 and first["pipeline_cpu_s"] > 0
    again = pipeline_cpu(80, tmp_path / "cache", "hashing")  # the cache file is read back
    assert again["cache_filled"] is False and again["notes_stored"] == first["notes_stored"]


def test_merge_keeps_earlier_figures_of_benchmarks_not_rerun(tmp_path: Path) -> None:
    previous = {"benchmarks": {
        "search": {"status": "failed", "error": "old", "seconds": 1.0, "command": "cmd A"},
        "lcm": {"status": "ok", "result": {"x": 1}, "seconds": 2.0, "command": "cmd A",
                "date": "2026-01-01 00:00 UTC"}}}
    now = run_suite(SuiteOptions(quick=True), {"search": lambda o: {"y": 2}})
    now["benchmarks"]["search"]["command"] = "cmd B"
    merged = run_all.merge_previous(now, previous)
    assert list(merged["benchmarks"]) == ["search", "lcm"]
    assert merged["benchmarks"]["search"]["result"] == {"y": 2}
    assert merged["benchmarks"]["lcm"] == previous["benchmarks"]["lcm"]
    text = write_results(merged, "cmd B", tmp_path / "R.md")
    assert "earlier figures kept from `cmd A`" in text
    assert "(from `cmd A`, 2026-01-01 00:00 UTC)" in text


def test_merge_without_the_raw_results_keeps_the_old_files_other_sections(tmp_path: Path) -> None:
    """On another checkout the raw results are absent (``benchmarks/out`` is not committed):
    ``--merge`` then keeps the committed file's other sections verbatim, with the run they came
    from, instead of dropping them."""
    out = tmp_path / "R.md"
    first = run_suite(SuiteOptions(quick=True), {"search": lambda o: {"old": 1},
                                                  "embed": lambda o: {"e": 1},
                                                  "lcm": lambda o: {"l": 1}})
    write_results(first, "cmd A", out)
    out.write_text(out.read_text(encoding="utf-8")
                   + "\n<!-- manual -->\n## Hand-run\n\n_`fake`: ok in 1 s._\n<!-- /manual -->\n",
                   encoding="utf-8")
    old_embed = run_all.previous_sections(out.read_text(encoding="utf-8"))["embed"]
    assert "(from `cmd A`, " in old_embed and '"e": 1' in old_embed
    now = run_suite(SuiteOptions(quick=True), {"search": lambda o: {"new": 2}})
    text = write_results(now, "cmd B", out, keep_sections=True)
    sections = run_all.previous_sections(text)
    assert list(sections) == ["search", "embed", "lcm"]  # the suite's order, not the run's
    assert '"new": 2' in sections["search"] and '"old": 1' not in text
    assert sections["embed"] == old_embed and '"l": 1' in sections["lcm"]
    assert "embed: kept from the previous file" in text and "## Hand-run" in text
    assert "fake" not in sections  # the manual section is kept whole, not as a benchmark's
    # without --merge the file holds what this run measured, as before
    assert '"e": 1' not in write_results(now, "cmd B", out)
