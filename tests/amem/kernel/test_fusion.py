"""One RRF for amem and lcm, with one deterministic tie-break."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from amem.kernel.fusion import rrf

ROOT = Path(__file__).resolve().parents[3]


def test_only_the_kernel_defines_an_rrf() -> None:
    # amem and lcm each had a copy that broke ties differently; a second definition would
    # bring that back, so every module of the four packages is read.
    defined = sorted(
        str(path.relative_to(ROOT))
        for package in ("amem", "lcm", "tools", "scheduler")
        for path in (ROOT / package).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "rrf"
    )
    assert defined == ["amem/kernel/fusion.py"]


def test_scores_follow_the_formula() -> None:
    fused = dict(rrf([["a", "b"], ["b"]], k=60, weights=[1.0, 0.5]))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 0.5 / 61)


def test_ties_go_to_the_id_seen_first_not_to_its_printed_form() -> None:
    # 10 and 9 tie exactly (ranks 1+2 and 2+1). lcm's old copy sorted ties by str(id), which put
    # rowid 10 before 9 whatever the rankings said; the first ranking now decides.
    assert [i for i, _ in rrf([[9, 10], [10, 9]])] == [9, 10]
    assert [i for i, _ in rrf([[10, 9], [9, 10]])] == [10, 9]
    assert [i for i, _ in rrf([["b", "a"], ["a", "b"]])] == ["b", "a"]


def test_a_repeated_id_counts_once_at_its_best_rank() -> None:
    assert dict(rrf([["a", "a", "b"]]))["a"] == pytest.approx(1 / 61)


@pytest.mark.parametrize("kwargs,message", [({"k": 0}, "k must be"), ({"weights": [1.0]}, "one weight")])
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rrf([["a"], ["b"]], **kwargs)  # type: ignore[arg-type]
