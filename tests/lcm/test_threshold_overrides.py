"""contextThresholdOverrides: model, context-window and session matchers, AND-ed, most specific wins."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from lcm import LcmConfig, LcmStore
from lcm.compaction import resolve_params
from lcm.errors import LcmValidationError

RULES: list[dict[str, Any]] = [
    {"name": "big", "match": {"modelContextWindowMin": 900000}, "contextThreshold": 0.15, "freshTailCount": 16},
    {"name": "small", "match": {"modelContextWindowMax": 250000}, "contextThreshold": 0.2},
    {"name": "tg", "match": {"sessionPattern": "agent:*:telegram:**"}, "contextThreshold": 0.3},
    {"name": "sol", "match": {"model": "openai/gpt-5.6-sol"}, "contextThreshold": 0.4},
    {"name": "sol-tg", "match": {"model": "openai/gpt-5.6-sol", "sessionPattern": "agent:*:telegram:**"},
     "contextThreshold": 0.5},
    {"name": "big-dup", "match": {"modelContextWindowMin": 900000}, "contextThreshold": 0.9},
]
CFG = LcmConfig(context_threshold_overrides=RULES)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("session", "model", "window", "rule", "threshold"),
    [
        ("agent:a:main", None, 1_000_000, "big", 0.15),  # the earliest of two equal rules
        ("agent:a:main", None, 128_000, "small", 0.2),
        ("agent:a:main", None, None, "", 0.75),  # no window given: window rules cannot match
        ("agent:a:telegram:g:1", None, 1_000_000, "tg", 0.3),  # pattern (50) beats one bound (20)
        ("agent:a:main", "openai/gpt-5.6-sol", 1_000_000, "sol", 0.4),  # model (100) beats the rest
        ("agent:a:telegram:g:1", "openai/gpt-5.6-sol", None, "sol-tg", 0.5),  # both matchers: 150
        ("agent:a:main", "other/model", 500_000, "", 0.75),
    ],
)
def test_the_most_specific_matching_rule_applies(session: str, model: str | None, window: int | None,
                                                 rule: str, threshold: float) -> None:
    params = resolve_params(CFG, session, model=model, context_window=window)
    assert (params.rule, params.context_threshold) == (rule, threshold)


def test_assemble_applies_a_model_rule(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(context_threshold_overrides=[
        {"name": "tiny-window", "match": {"modelContextWindowMax": 50_000}, "contextThreshold": 0.1}])
    store.ingest("agent:a:main", [{"role": "user", "content": f"word{i} " * 200} for i in range(10)])
    plain = store.assemble("agent:a:main", 20_000)
    ruled = store.assemble("agent:a:main", 20_000, context_window=32_000)
    assert not plain.debt_recorded and ruled.debt_recorded  # 0.1 of the budget is crossed
    with pytest.raises(LcmValidationError) as err:
        store.assemble("agent:a:main", 20_000, context_window=0)
    assert err.value.field == "context_window"
