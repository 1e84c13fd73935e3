"""The performance suite: every benchmark in one process, written to ``benchmarks/RESULTS.md``.

    python -m benchmarks.run_all                         # full sizes (an hour or more here)
    python -m benchmarks.run_all --quick                 # seconds; to benchmarks/out/RESULTS-quick.md
    python -m benchmarks.run_all --sizes 1000,10000 --import-size 1000 --only search,import

Runs, in this order: search latency at each size with and without ``optimize()`` next to the
raw engine query and the openclaw-style baseline (``search_bench``), with the process's peak
RSS after each search store; embedder throughput (``embed_bench``); bulk import and ``add``
latency (``import_bench``); LCM ingest, grep and assembly (``lcm_bench``); consolidation
(``consolidate_bench``). Search goes first so the RSS figure is that of the search stores, not
of the embedders another benchmark loads.

Each benchmark is called through its ``run(quick=...)``. A failure (or a module that does not
exist yet) is recorded in the results, never fatal to the others. The Markdown file is
rewritten whole, except the section between ``<!-- retrieval -->`` and ``<!-- /retrieval -->``
(the retrieval-quality table, written by hand from ``benchmarks.retrieval``) and the one between
``<!-- manual -->`` and ``<!-- /manual -->`` (long hand-run benchmarks), both kept verbatim.
The raw figures go to a JSON file beside it (``--json``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import _report
from ._util import current_rss_mb, git_commit, machine_facts, peak_rss_mb

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "RESULTS.md"
QUICK_OUT = ROOT / "benchmarks" / "out" / "RESULTS-quick.md"


@dataclass(frozen=True)
class SuiteOptions:
    """What to run and at which sizes; ``quick`` shrinks every benchmark to seconds."""

    quick: bool = False
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    embedder: str = "e5-small"
    import_size: int = 10_000
    embed_configs: tuple[str, ...] | None = None
    n_queries: int = 100
    optimize: bool = True
    import_profile: int = 0

    def __post_init__(self) -> None:
        if not self.sizes or any(s <= 0 for s in self.sizes):
            raise ValueError(f"sizes must be positive note counts, got {self.sizes}")
        if self.import_size <= 0:
            raise ValueError(f"import_size must be positive, got {self.import_size}")
        if self.import_profile < 0:
            raise ValueError(f"import_profile must be 0 (off) or positive, got {self.import_profile}")
        if self.n_queries <= 0:
            raise ValueError(f"n_queries must be positive, got {self.n_queries}")


Benchmark = Callable[[SuiteOptions], dict[str, Any]]


def _module(name: str) -> Any:
    """``benchmarks.<name>``; a module that is not written yet raises ``ModuleNotFoundError``."""
    return importlib.import_module(f"{__package__}.{name}")


def search(options: SuiteOptions) -> dict[str, Any]:
    """``search_bench`` one size at a time, so the peak RSS after each store can be read."""
    bench = _module("search_bench")
    out: dict[str, Any] = {"sizes": {}, "rss": {"peak_mb_before": peak_rss_mb()}}
    for size in options.sizes:
        part = bench.run(options.quick, [size], options.optimize, options.embedder,
                         options.n_queries)
        out["embedder"] = part["embedder"]
        out["sizes"].update(part["sizes"])
        # ru_maxrss never falls: after the largest store it is that store's peak (or higher)
        out["rss"][str(size)] = {"peak_mb_after": peak_rss_mb(), "rss_mb_now": current_rss_mb()}
    return out


def embed(options: SuiteOptions) -> dict[str, Any]:
    configs = list(options.embed_configs) if options.embed_configs else None
    return _module("embed_bench").run(options.quick, configs=configs)  # type: ignore[no-any-return]


def import_(options: SuiteOptions) -> dict[str, Any]:
    return _module("import_bench").run(  # type: ignore[no-any-return]
        options.quick, options.import_size, options.embedder, profile=options.import_profile)


def lcm(options: SuiteOptions) -> dict[str, Any]:
    return _module("lcm_bench").run(options.quick)  # type: ignore[no-any-return]


def consolidate(options: SuiteOptions) -> dict[str, Any]:
    return _module("consolidate_bench").run(options.quick)  # type: ignore[no-any-return]


BENCHMARKS: dict[str, Benchmark] = {
    "search": search, "embed": embed, "import": import_, "lcm": lcm, "consolidate": consolidate,
}


def run_suite(options: SuiteOptions, benchmarks: Mapping[str, Benchmark] | None = None,
              only: Sequence[str] | None = None,
              checkpoint: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Run each benchmark in turn; every one ends ``ok``, ``failed`` or ``missing``.

    ``checkpoint`` gets the results so far after each benchmark, so a long run that is killed
    keeps what it measured.
    """
    chosen = dict(benchmarks if benchmarks is not None else BENCHMARKS)
    if only:
        unknown = sorted(set(only) - set(chosen))
        if unknown:
            raise ValueError(f"unknown benchmark(s) {unknown}; known: {sorted(chosen)}")
        chosen = {name: fn for name, fn in chosen.items() if name in only}
    started = datetime.now(timezone.utc)
    suite: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"), "quick": options.quick,
        "options": {**options.__dict__, "sizes": list(options.sizes)},
        "commit": git_commit(ROOT), "machine": machine_facts(), "benchmarks": {},
    }
    for name, fn in chosen.items():
        log.warning("benchmark %s: starting", name)
        t0 = time.perf_counter()
        entry: dict[str, Any]
        try:
            entry = {"status": "ok", "result": fn(options)}
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith(f"{__package__}."):
                entry = {"status": "failed", "error": _error(exc)}
            else:
                entry = {"status": "missing", "error": f"no module {exc.name}"}
        except Exception as exc:  # one broken benchmark must not cost the others their figures
            entry = {"status": "failed", "error": _error(exc)}
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        entry["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        log.warning("benchmark %s: %s in %.1f s", name, entry["status"], entry["seconds"])
        if "error" in entry:  # said at once: a long suite should not hide a failure until it ends
            log.warning("benchmark %s: %s", name, entry["error"])
        suite["benchmarks"][name] = entry
        if checkpoint is not None:
            checkpoint(suite)
    suite["loadavg_end"] = machine_facts()["loadavg"]
    suite["peak_rss_mb"] = peak_rss_mb()
    return suite


def _error(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-6:]).strip()


def merge_previous(suite: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """``suite`` plus the entries of an earlier run for benchmarks this run did not include.

    Each kept entry carries its own command and date, which the Markdown shows, so a rerun of
    one benchmark (``--only search --merge``) does not erase the others' figures.
    """
    merged = dict(previous.get("benchmarks", {}))
    merged.update(suite["benchmarks"])
    order = [n for n in BENCHMARKS if n in merged] + [n for n in merged if n not in BENCHMARKS]
    return {**suite, "benchmarks": {name: merged[name] for name in order}}


RETRIEVAL = re.compile(r"<!-- retrieval -->.*?<!-- /retrieval -->", re.S)
EMPTY_RETRIEVAL = ("<!-- retrieval -->\n## Retrieval quality\n\n_Not filled in yet: run "
                   "`python -m benchmarks.retrieval` and paste its table here._\n"
                   "<!-- /retrieval -->")


def retrieval_section(previous: str | None) -> str:
    """The marked retrieval section of the old file, verbatim (a placeholder when absent)."""
    match = RETRIEVAL.search(previous or "")
    return match.group(0) if match else EMPTY_RETRIEVAL


#: figures of long hand-run benchmarks (1M-message grep, 100k consolidation), kept verbatim too
MANUAL = re.compile(r"<!-- manual -->.*?<!-- /manual -->", re.S)


#: a benchmark's section as ``_report.section`` writes it: the heading, then
#: "_`name`: status in N s[ (from `command`, date)]._", up to the next heading
SECTION = re.compile(r"^## [^\n]*\n\n_`(?P<name>[\w-]+)`: (?P<status>[^\n]*)\n.*?(?=^## |\Z)",
                     re.M | re.S)
HEADER = re.compile(r"^- Command: `(?P<command>[^`]*)`.*?^- Date: (?P<date>[^;\n]*)", re.M | re.S)


def previous_sections(text: str) -> dict[str, str]:
    """The benchmark sections of a results file ``run_all`` wrote, by benchmark name, verbatim
    but for their origin: a section that carried none shared the old header's command and date,
    so it is given them as it is kept under a new header."""
    header = HEADER.search(text)
    origin = f" (from `{header['command']}`, {header['date']})" if header else ""
    generated = re.split(r"<!-- (?:retrieval|manual) -->", text, maxsplit=1)[0]
    kept: dict[str, str] = {}
    for m in SECTION.finditer(generated):
        block = m.group(0).rstrip() + "\n"
        if "(from `" not in m["status"] and m["status"].endswith("._"):
            line = m["status"][:-2] + origin + "._"
            block = block.replace(m["status"], line, 1)
        kept[m["name"]] = block
    return kept


def write_results(suite: dict[str, Any], command: str, out: Path, *,
                  keep_sections: bool = False) -> str:
    """Rewrite ``out`` from ``suite``, keeping its retrieval and manual sections; return the text.

    With ``keep_sections`` (``--merge``) the old file's sections of benchmarks ``suite`` does
    not hold are kept too. The raw results ``merge_previous`` reads are not committed
    (``benchmarks/out/``), so on another checkout they are absent, and without this a rerun of
    one benchmark dropped every other section of the committed file.
    """
    previous = out.read_text(encoding="utf-8") if out.exists() else None
    kept = retrieval_section(previous)
    manual = MANUAL.search(previous or "")
    if manual:
        kept += "\n\n" + manual.group(0)
    earlier = ({n: block for n, block in previous_sections(previous).items()
                if n not in suite["benchmarks"]} if keep_sections and previous else {})
    text = _report.render(suite, command, kept, earlier)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="every benchmark at its quick size")
    p.add_argument("--sizes", help="search store sizes, comma-separated (1000,10000,100000; "
                                   "quick: 1000)")
    p.add_argument("--embedder", default="e5-small", help="embedder for search and import")
    p.add_argument("--import-size", type=int, default=10_000, help="notes to import (quick: 300)")
    p.add_argument("--import-profile", type=int, default=0, metavar="N",
                   help="also cProfile an enriched import of N notes")
    p.add_argument("--embed-configs", help="embed_bench configurations, comma-separated "
                                           "(default: its own full or quick set)")
    p.add_argument("--queries", type=int, default=100, help="search queries per size")
    p.add_argument("--no-optimize", action="store_true", help="skip the after-optimize() pass")
    p.add_argument("--only", help=f"run only these, comma-separated: {', '.join(BENCHMARKS)}")
    p.add_argument("--merge", action="store_true",
                   help="keep the previous run's figures for benchmarks not run now (from --json;"
                        " where it lacks them, the old Markdown's sections verbatim)")
    p.add_argument("--out", type=Path, help=f"Markdown file (default {DEFAULT_OUT.relative_to(ROOT)}"
                                            f", quick: {QUICK_OUT.relative_to(ROOT)})")
    p.add_argument("--json", type=Path, help="raw results (default: --out with .json, under "
                                             "benchmarks/out/)")
    return p.parse_args(argv)


def options_from(args: argparse.Namespace) -> SuiteOptions:
    base = SuiteOptions(quick=args.quick, embedder=args.embedder, import_size=args.import_size,
                        n_queries=args.queries, optimize=not args.no_optimize,
                        import_profile=args.import_profile)
    if args.sizes:
        try:
            sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
        except ValueError:
            raise ValueError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
        base = replace(base, sizes=sizes)
    elif args.quick:
        base = replace(base, sizes=(1_000,))
    if args.embed_configs:
        base = replace(base, embed_configs=tuple(c.strip() for c in args.embed_configs.split(",")))
    return base


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    try:
        options = options_from(args)
    except ValueError as exc:
        print(f"run_all: {exc}", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    command = "python -m benchmarks.run_all" + (" " + shlex.join(argv) if argv else "")
    raw = args.json or ROOT / "benchmarks" / "out" / (out.stem + ".json")
    # read before the first checkpoint overwrites it
    previous = (json.loads(raw.read_text(encoding="utf-8"))
                if args.merge and raw.is_file() else None)

    def save(partial: dict[str, Any]) -> dict[str, Any]:
        for entry in partial["benchmarks"].values():
            entry.setdefault("command", command)
        whole = merge_previous(partial, previous) if previous else partial
        write_results(whole, command, out, keep_sections=args.merge)
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(whole, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return whole

    try:
        suite = save(run_suite(options, only=only, checkpoint=save))
    except ValueError as exc:
        print(f"run_all: {exc}", file=sys.stderr)
        return 2
    failed = [n for n, e in suite["benchmarks"].items() if e["status"] != "ok"]
    print(f"wrote {out} and {raw}" + (f"; not ok: {', '.join(failed)}" if failed else ""))
    return 1 if any(suite["benchmarks"][n]["status"] == "failed" for n in failed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
