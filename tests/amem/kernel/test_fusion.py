"""One RRF for amem and lcm, with one deterministic tie-break."""

from __future__ import annotations

import pytest

import amem.ranking
import lcm.ranking
from amem.kernel.fusion import rrf


def test_amem_and_lcm_fuse_with_the_kernel_rrf() -> None:
    assert amem.ranking.rrf is rrf and lcm.ranking.rrf is rrf


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
