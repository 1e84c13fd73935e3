"""The request budgets of ``amem serve --http`` (``tools.ratelimit``) on a manual clock: a
bucket's burst and refill, callers kept apart, owners' larger budget, off switches, the
report, and the ``[serve]`` settings."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from amem.errors import ConfigError
from amem.kernel.clock import ManualClock
from tools.ratelimit import RateLimiter, RateLimits, TokenBucket
from tools.settings import load_settings


def test_a_bucket_serves_its_burst_then_tells_the_wait_and_refills() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=100.0)
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) == pytest.approx(0.5)   # one token every half second
    assert bucket.take(100.25) == pytest.approx(0.25)  # a refused take costs nothing
    assert bucket.take(100.5) == 0.0
    assert bucket.take(110.0) == 0.0                   # a long pause refills to the burst only
    assert [bucket.take(110.0) for _ in range(2)] == [0.0, 0.0]
    assert bucket.take(110.0) > 0


def test_a_clock_set_back_refills_nothing() -> None:
    bucket = TokenBucket(rate=1.0, burst=1, now=50.0)
    assert bucket.take(50.0) == 0.0
    assert bucket.take(40.0) == pytest.approx(1.0)  # ten seconds back: no token, no negative wait
    assert bucket.take(41.0) == 0.0                 # and it counts on from the new reading


def test_a_bucket_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate=0.0, burst=1, now=0.0)
    with pytest.raises(ValueError):
        TokenBucket(rate=1.0, burst=0, now=0.0)


LIMITS = RateLimits(writes_per_minute=60, write_burst=2, reads_per_minute=120, read_burst=4,
                    owner_factor=3)


def test_one_caller_at_its_limit_leaves_another_untouched() -> None:
    clock = ManualClock()
    limiter = RateLimiter(LIMITS, clock)
    assert limiter.check("alice-key", "write", agent="alice") is None
    assert limiter.check("alice-key", "write", agent="alice") is None
    refused = limiter.check("alice-key", "write", agent="alice")
    assert refused is not None and refused.kind == "write"
    assert refused.retry_after_s == 1 and (refused.per_minute, refused.burst) == (60, 2)
    # bob's budget is his own, and alice's reads are a budget apart from her writes
    assert [limiter.check("bob-key", "write", agent="bob") for _ in range(2)] == [None, None]
    assert [limiter.check("alice-key", "read", agent="alice") for _ in range(4)] == [None] * 4
    assert limiter.check("alice-key", "read", agent="alice") is not None
    clock.advance(1.0)
    assert limiter.check("alice-key", "write", agent="alice") is None


def test_owners_get_a_larger_budget_or_none() -> None:
    limiter = RateLimiter(LIMITS, ManualClock())
    served = [limiter.check("server-record", "write", owner=True) for _ in range(7)]
    assert served[:6] == [None] * 6 and served[6] is not None  # three times a burst of 2
    assert served[6].per_minute == 180
    free = RateLimiter(RateLimits(owner_factor=0, write_burst=1), ManualClock())
    assert all(free.check("owner-key", "write", owner=True) is None for _ in range(500))
    assert free.check("agent-key", "write") is None and free.check("agent-key", "write") is not None


def test_off_switches() -> None:
    off = RateLimiter(RateLimits(enabled=False, write_burst=1), ManualClock())
    assert all(off.check("k", "write") is None for _ in range(1000))
    unlimited_reads = RateLimiter(RateLimits(reads_per_minute=0, read_burst=1), ManualClock())
    assert all(unlimited_reads.check("k", "read") is None for _ in range(1000))
    assert off.report()["on"] is False and off.report()["keys"]["k"]["writes"] == 1000


def test_the_report_counts_per_key_most_refused_first() -> None:
    clock = ManualClock()
    limiter = RateLimiter(LIMITS, clock)
    for _ in range(5):
        limiter.check("a1b2c3d4e5f6", "write", agent="alice")
    limiter.check("0f0f0f0f0f0f", "read", agent="bob")
    report = limiter.report()
    assert report["on"] is True and report["refused"] == 3
    assert report["writes"] == "60 a minute, bursts of 2" and report["owners"] == "3 x"
    assert list(report["keys"]) == ["a1b2c3d4e5f6", "0f0f0f0f0f0f"]
    alice = report["keys"]["a1b2c3d4e5f6"]
    assert (alice["agent"], alice["writes"], alice["writes_refused"], alice["reads_refused"]) == (
        "alice", 2, 3, 0)
    assert alice["last_refused"] == clock.now().isoformat(timespec="seconds")
    assert "last_refused" not in report["keys"]["0f0f0f0f0f0f"]
    json.dumps(report)  # what `amem status --json` prints


def test_limits_are_checked_when_built() -> None:
    for bad in ({"write_burst": 0}, {"writes_per_minute": -1}, {"owner_factor": -2}):
        with pytest.raises(ConfigError):
            RateLimits(**bad)  # type: ignore[arg-type]


def test_the_serve_table_the_environment_and_arguments(tmp_path: Path) -> None:
    assert load_settings(env={}).serve == RateLimits()
    config = tmp_path / "amem.toml"
    config.write_text("[serve]\nwrites_per_minute = 30\nwrite_burst = 5\nowner_factor = 0\n")
    serve = load_settings(config, env={}).serve
    assert (serve.enabled, serve.writes_per_minute, serve.write_burst, serve.owner_factor) == (
        True, 30, 5, 0)
    assert serve.reads_per_minute == RateLimits().reads_per_minute
    env = {"AMEM_SERVE_RATE_LIMIT": "off", "AMEM_SERVE_READ_BURST": "9"}
    serve = load_settings(config, env=env).serve
    assert (serve.enabled, serve.read_burst, serve.write_burst) == (False, 9, 5)
    assert load_settings(config, env=env, read_burst=11).serve.read_burst == 11
    config.write_text("[serve]\nrate_limit = false\n")
    assert load_settings(config, env={}).serve.enabled is False


def test_a_misspelt_serve_setting_is_an_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "amem.toml"
    config.write_text("[serve]\nwrite_per_minute = 30\n")
    with pytest.raises(ConfigError, match="write_per_minute.*did you mean 'writes_per_minute'"):
        load_settings(config, env={})
    with pytest.raises(ConfigError, match="AMEM_SERVE_RATELIMIT.*AMEM_SERVE_RATE_LIMIT"):
        load_settings(env={"AMEM_SERVE_RATELIMIT": "off"})
    config.write_text("[serve]\nwrite_burst = 0\n")
    with pytest.raises(ConfigError, match="write_burst"):
        load_settings(config, env={})


def test_a_manual_clock_moves_the_budget_not_time() -> None:
    clock = ManualClock()
    limiter = RateLimiter(RateLimits(writes_per_minute=6, write_burst=1), clock)
    assert limiter.check("k", "write") is None
    refused = limiter.check("k", "write")
    # ten seconds to wait, one of them spent while the answer is held (hold_s = 1)
    assert refused is not None and refused.retry_after == pytest.approx(10)
    assert refused.retry_after_s == 9
    clock.set(clock.now() + timedelta(seconds=9.5))
    assert limiter.check("k", "write") is not None
    clock.advance(0.5)
    assert limiter.check("k", "write") is None


def test_a_refusal_is_held_for_its_wait_at_most_hold_s() -> None:
    limiter = RateLimiter(RateLimits(writes_per_minute=6, write_burst=1, hold_s=2), ManualClock())
    assert limiter.check("k", "write") is None
    refused = limiter.check("k", "write")
    assert refused is not None and refused.retry_after == pytest.approx(10) and refused.hold == 2
    quick = RateLimiter(RateLimits(writes_per_minute=600, write_burst=1), ManualClock())
    quick.check("k", "write")
    soon = quick.check("k", "write")
    assert soon is not None and soon.hold == pytest.approx(0.1)  # never longer than the wait
