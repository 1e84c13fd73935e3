"""Two retrieval runs question by question: how many questions a change moves up and down.

    python -m benchmarks.compare before.json after.json
    python -m benchmarks.compare before.json after.json --category 1 --metric R@10
    python -m benchmarks.compare before.json after.json --method tool@10 --category 1-4

Each file is the ``--out`` of ``python -m benchmarks.retrieval`` (one run, or a
``--realizations`` run: then realizations are paired by number). A mean moved by a few
questions reads like a gain; this pairs the two runs' ``per_question`` rows (same corpus,
same question) and reports, per group (all, each half, each corpus):

* the mean difference of the metric;
* the questions it moved up and down, and a two-sided exact sign test on those counts (the
  chance of a split at least this uneven if a change moved questions up or down at random);
* with several realizations, each question's difference summed over them first, so a
  question the embedder's noise flips back and forth counts once, by its net move.

On the LoCoMo dev questions the link lift (step 4b2) against no lift moves 9 multi-hop
questions up and 4 down over four realizations; ordering the link candidates by terms and
meaning together against the built order moved 4 up and 5 down, though its mean gained
(benchmarks/RESULTS.md, "The order of the offline link candidates").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

#: the groups a category option names: one category, LoCoMo's 1-4, or every question
CATEGORY_GROUPS = {"1-4": ("1", "2", "3", "4")}


def sign_test(up: int, down: int) -> float:
    """Two-sided exact sign test: P(a split at least as uneven as ``up`` / ``down``) when each
    moved question went up or down with probability 1/2 (1.0 when nothing moved)."""
    if up < 0 or down < 0:
        raise ValueError(f"counts must be >= 0, got {up} and {down}")
    n = up + down
    if n == 0:
        return 1.0
    # exact integers: 2 ** n passes a float's range past ~1,000 moved questions (CMRC has 1,042)
    tail = Fraction(sum(math.comb(n, k) for k in range(min(up, down) + 1)), 2 ** n)
    return min(1.0, float(2 * tail))


def runs_of(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A ``benchmarks.retrieval`` output as realization -> run (a single run is realization
    "0", or the one its settings name)."""
    if "realizations" in result:
        return {str(k): run for k, run in result["realizations"].items()}
    return {str(result.get("settings", {}).get("realization", 0)): result}


def _rows(run: Mapping[str, Any], method: str) -> dict[tuple[str, int], Mapping[str, Any]]:
    rows = run.get("per_question", {}).get(method)
    if rows is None:
        raise ValueError(f"the run has no per-question rows for {method!r} (an output of "
                         "benchmarks.retrieval from before per_question, or a method it did "
                         "not run, e.g. tool@10 without --links)")
    return {(str(r["corpus"]), int(r["index"])): r for r in rows}


def _wanted(category: str | None) -> tuple[str, ...] | None:
    if category is None or category == "all":
        return None
    return CATEGORY_GROUPS.get(category, (category,))


def differences(before: Mapping[str, Any], after: Mapping[str, Any], *, method: str = "store",
                metric: str = "R@10", category: str | None = None
                ) -> dict[tuple[str, int], tuple[float, Mapping[str, Any]]]:
    """(corpus, question index) -> (after - before summed over the paired realizations, the
    question's row), for the questions of ``category`` (None or "all": every question)."""
    a, b = runs_of(before), runs_of(after)
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError(f"no realization in both runs (before: {sorted(a)}, after: {sorted(b)})")
    wanted = _wanted(category)
    out: dict[tuple[str, int], tuple[float, Mapping[str, Any]]] = {}
    for k in shared:
        rows_a, rows_b = _rows(a[k], method), _rows(b[k], method)
        if rows_a.keys() != rows_b.keys():
            raise ValueError(f"realization {k}: the runs did not ask the same questions")
        for key, row in rows_a.items():
            if wanted is not None and str(row["category"]) not in wanted:
                continue
            if metric not in row:
                held = [m for m in row if m not in ("corpus", "index", "category", "half",
                                                    "question")]
                raise ValueError(f"unknown metric {metric!r}; the rows hold {', '.join(held)}")
            moved = float(rows_b[key][metric]) - float(row[metric])
            out[key] = (out.get(key, (0.0, row))[0] + moved, row)
    return out


def summary(diffs: Mapping[tuple[str, int], tuple[float, Mapping[str, Any]]],
            realizations: int = 1) -> list[dict[str, Any]]:
    """Per group (all, half a, half b, each corpus): questions, mean difference (per
    realization), up, down, and the sign test's p."""
    groups: dict[str, list[float]] = {"all": []}
    for (corpus, _), (moved, row) in diffs.items():
        groups["all"].append(moved)
        if row.get("half"):
            groups.setdefault(f"half {row['half']}", []).append(moved)
        groups.setdefault(corpus, []).append(moved)
    corpora = sorted(name for name in groups if name != "all" and not name.startswith("half "))
    order = ["all", *(h for h in ("half a", "half b") if h in groups), *corpora]
    out = []
    for name in order:
        moves = groups[name]
        up = sum(m > 1e-12 for m in moves)
        down = sum(m < -1e-12 for m in moves)
        out.append({"group": name, "questions": len(moves),
                    "mean": sum(moves) / len(moves) / realizations if moves else 0.0,
                    "up": up, "down": down, "p": sign_test(up, down)})
    return out


def table(rows: Iterable[Mapping[str, Any]]) -> str:
    lines = ["group | questions | mean diff | up | down | sign test p"]
    for r in rows:
        lines.append(f"{r['group']} | {r['questions']} | {r['mean']:+.4f} | {r['up']} | "
                     f"{r['down']} | {r['p']:.3f}")
    return "\n".join(lines)


def moved(diffs: Mapping[tuple[str, int], tuple[float, Mapping[str, Any]]]
          ) -> list[tuple[str, int, float, str]]:
    """The questions that moved, most moved first: (corpus, index, summed difference, the
    question's text)."""
    out = [(c, i, d, str(row.get("question", ""))) for (c, i), (d, row) in diffs.items()
           if abs(d) > 1e-12]
    return sorted(out, key=lambda t: (-abs(t[2]), t[0], t[1]))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path, help="benchmarks.retrieval --out of the baseline")
    p.add_argument("after", type=Path, help="benchmarks.retrieval --out of the change")
    p.add_argument("--method", default="store", help="store (default), tool@5 or tool@10")
    p.add_argument("--metric", default="R@10", help="R@10 (default), hit@1 or MRR")
    p.add_argument("--category", help="a LoCoMo category (1-5), 1-4, or all (default)")
    p.add_argument("--list", type=int, default=10, metavar="N",
                   help="list the N most moved questions (default 10; 0: none)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        before, after = (json.loads(path.read_text()) for path in (args.before, args.after))
        diffs = differences(before, after, method=args.method, metric=args.metric,
                            category=args.category)
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        print(f"benchmarks.compare: {exc}", file=sys.stderr)
        return 2
    realizations = len(set(runs_of(before)) & set(runs_of(after)))
    print(f"{args.method} {args.metric}, category {args.category or 'all'}, "
          f"{realizations} realization(s) paired; each question's difference summed over them\n")
    print(table(summary(diffs, realizations)))
    if args.list:
        print("\nmost moved (corpus, question, summed difference):")
        for corpus, index, d, question in moved(diffs)[:args.list]:
            print(f"  {corpus} #{index} {d:+.3f} {question}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
