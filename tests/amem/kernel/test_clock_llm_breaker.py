"""The kernel's clock, LLM seams and circuit breaker: one of each for amem and lcm."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

import lcm
from amem.errors import LLMError
from amem.kernel.breaker import CircuitBreaker
from amem.kernel.clock import Clock, ManualClock, SystemClock
from amem.kernel.errors import CircuitOpenError
from amem.kernel.llm import LLM, DeadlineLLM, JsonLLM, TextLLM
from amem.llm import LLMClient, LLMConfig
from lcm import LcmConfig
from lcm.summarize import Summarizer


def test_amem_and_lcm_share_one_test_clock() -> None:
    # amem's FixedClock and lcm's ManualClock had two APIs; lcm's public name is now the kernel's.
    assert lcm.ManualClock is ManualClock
    assert isinstance(SystemClock(), Clock) and isinstance(ManualClock(), Clock)
    assert SystemClock().now().tzinfo is not None


def test_manual_clock_moves_only_when_told_and_stays_utc() -> None:
    clock = ManualClock("2026-03-01T12:00:00+02:00")
    assert clock.now() == datetime(2026, 3, 1, 10, tzinfo=UTC) and clock.now().tzinfo == UTC
    assert clock.advance(seconds=60) == datetime(2026, 3, 1, 10, 1, tzinfo=UTC) == clock.now()
    assert clock.advance() == datetime(2026, 3, 1, 10, 1, 1, tzinfo=UTC)  # one second by default
    clock.set(datetime(2027, 1, 1, tzinfo=timezone(timedelta(hours=-5))))
    assert clock.now() == datetime(2027, 1, 1, 5, tzinfo=UTC)
    assert ManualClock().now() == datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("naive", ["2026-01-10T12:00:00", datetime(2026, 1, 10, 12)])
def test_manual_clock_refuses_a_naive_time(naive: datetime | str) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock().set(naive)


class _TextOnly:
    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        return "ok"


class _WithDeadline(_TextOnly):
    def complete_within(self, system: str, user: str, *, max_tokens: int | None, seconds: float) -> str:
        return "ok"


def test_the_llm_seams_nest() -> None:
    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:9", model="m"))
    try:
        for seam in (TextLLM, JsonLLM, LLM):
            assert isinstance(client, seam), seam
    finally:
        client.close()
    assert isinstance(_TextOnly(), TextLLM) and lcm.SummaryLLM is TextLLM
    assert not isinstance(_TextOnly(), DeadlineLLM) and not isinstance(_TextOnly(), LLM)
    assert isinstance(_WithDeadline(), DeadlineLLM) and isinstance(_WithDeadline(), TextLLM)


class _Seconds:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_breaker_opens_at_the_threshold_and_half_opens_after_the_cooldown() -> None:
    seconds = _Seconds()
    breaker = CircuitBreaker(2, 30.0, clock=seconds, name="test endpoint")
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.check()
    breaker.record_failure()
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError, match=r"circuit open for test endpoint: 2 consecutive failures"):
        breaker.check()
    seconds.t += 30.0
    assert breaker.state == "half-open"
    breaker.check()
    breaker.record_failure()  # the trial call failed: open again at once, for another cooldown
    assert breaker.state == "open"
    seconds.t += 30.0
    breaker.record_success()
    assert breaker.state == "closed" and breaker.failures == 0


def test_breaker_refuses_with_the_callers_error_and_checks_its_arguments() -> None:
    breaker = CircuitBreaker(1, 5.0, clock=_Seconds(), refuse=LLMError)
    breaker.trip("deadline")
    with pytest.raises(LLMError, match="circuit open"):
        breaker.check()
    with pytest.raises(ValueError, match="threshold"):
        CircuitBreaker(0, 1.0)
    with pytest.raises(ValueError, match="cooldown"):
        CircuitBreaker(1, -1.0)
    never = CircuitBreaker(1, 0.0, clock=_Seconds())  # lcm allows circuitBreakerCooldownMs = 0
    never.record_failure()
    assert never.state == "half-open"
    never.check()


class _Failing:
    def __init__(self) -> None:
        self.calls = 0

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        self.calls += 1
        raise RuntimeError("503")


def test_lcm_summaries_use_the_kernel_breaker_on_the_store_clock() -> None:
    clock = ManualClock()
    llm = _Failing()
    cfg = LcmConfig(circuit_breaker_threshold=2, circuit_breaker_cooldown_ms=60_000)
    summarizer = Summarizer(cfg, llm, clock)
    for _ in range(2):
        assert summarizer._call("s", "u", 10) is None
    assert summarizer.llm_available() == (False, "circuit-open")
    clock.advance(59)
    assert summarizer.llm_available() == (False, "circuit-open")
    clock.advance(1)  # the cooldown is over on the store's clock: one trial call may go
    assert summarizer.llm_available() == (True, "")
    assert summarizer._call("s", "u", 10) is None and llm.calls == 3
    assert summarizer.llm_available() == (False, "circuit-open")  # the trial failed: open again
