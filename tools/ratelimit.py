"""Per-caller request budgets of ``amem serve --http``: a key at its limit waits, the others do not.

Several agents share one server: one write lock on the store and two CPU cores for embedding.
A looping agent (or a leaked key) sending thousands of requests a second would starve every
other agent, so each caller the guard (``tools.http_guard``) admitted gets two token buckets
of its own, one for requests that change data and one for requests that read:

    a bucket holds at most ``burst`` tokens and refills at ``per_minute / 60`` tokens a second;
    a request takes one token, or is refused with the seconds until one is there.

A refused request takes no token, so a client that waits the ``Retry-After`` it was told is
served; a client that ignores it is refused again and does not lengthen its wait. The guard
answers a refusal only after the wait (at most ``hold_s``, a second by default), on the event
loop's timer: an agent looping on refusals sends one a second per connection instead of
hundreds, whose HTTP work alone slowed the other keys (``benchmarks.rate_flood_bench`` on 2
cores: another key's search p50 12 ms alone, 38 ms beside a flood refused at once, 18 ms beside
the same flood held).
Buckets are kept per caller (the key's id; the server record's secret and the stand-in of
``--insecure-no-auth`` are one caller each), so a caller's refusals never touch another's
budget.

**Writes cost more than reads** (an add embeds, links and takes the store's write lock; a
search embeds a query and reads), so the default write budget is a fifth of the read budget.

**Owners get ten times the budget, not none.** The owner's callers are the data directory's
own ``amem`` CLI (``amem add`` and the reads routed through the server), the inspector, and
owner keys. Their requests are interactive and rare, far below ten times an agent's budget,
and each owner caller has its own buckets, so ``amem status`` stays served while an agent key
floods. A limit that high still bounds a host configured with an owner key that loops: no
caller can take the whole server. ``owner_factor = 0`` exempts owners entirely.

The time comes from the shared ``Clock`` seam (``amem.kernel.clock``), so tests move a
``ManualClock`` instead of sleeping. The system clock is wall time: a step back refills
nothing (elapsed time is never negative), a step forward refills at most a full bucket.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from amem.errors import ConfigError
from amem.kernel.clock import Clock, SystemClock
from amem.kernel.settings import Section, setting

log = logging.getLogger(__name__)

__all__ = ["RateLimits", "TokenBucket", "RateLimiter", "Refusal", "SECTION", "Kind"]

#: the two budgets of a caller
Kind = Literal["write", "read"]
#: callers shown by name in the report (each issued key is one; more is a report too long to read)
REPORT_CALLERS = 50
#: a caller refused again within this many seconds is not logged again
_LOG_EVERY_S = 60.0


@dataclass(frozen=True)
class RateLimits:
    """The request budgets of ``amem serve --http`` (the ``[serve]`` table, ``AMEM_SERVE_*``).

    Attributes:
        enabled: ``false`` (``rate_limit = false``, ``AMEM_SERVE_RATE_LIMIT=off``,
            ``amem serve --no-rate-limit``): no budget at all.
        writes_per_minute: requests that change data, per caller and minute, sustained;
            0: writes unlimited.
        write_burst: writes a caller may send at once after a quiet spell.
        reads_per_minute, read_burst: the same for requests that change nothing.
        owner_factor: owner callers' budgets are this many times an agent's; 0: unlimited.
        hold_s: a refusal is answered after the wait it names, at most this many seconds
            (0: at once), so a client looping on refusals is slowed to its budget's pace.
    """

    enabled: bool = setting(True, key="rate_limit", env="AMEM_SERVE_RATE_LIMIT")
    writes_per_minute: float = setting(120.0, at_least=0)
    write_burst: int = setting(30, at_least=1)
    reads_per_minute: float = setting(600.0, at_least=0)
    read_burst: int = setting(60, at_least=1)
    owner_factor: float = setting(10.0, at_least=0)
    hold_s: float = setting(1.0, at_least=0, at_most=10)

    def __post_init__(self) -> None:
        SECTION.validate(self)

    def budget(self, kind: Kind, *, owner: bool) -> tuple[float, int] | None:
        """``(tokens a second, burst)`` of a caller's ``kind`` of request; ``None``: unlimited."""
        if not self.enabled or (owner and self.owner_factor == 0):
            return None
        per_minute, burst = ((self.writes_per_minute, self.write_burst) if kind == "write"
                             else (self.reads_per_minute, self.read_burst))
        if per_minute == 0:
            return None
        factor = self.owner_factor if owner else 1.0
        return per_minute * factor / 60.0, max(1, round(burst * factor))

    def describe(self) -> dict[str, Any]:
        """The budgets in words, for ``amem status``."""
        if not self.enabled:
            return {"on": False}

        def words(per_minute: float, burst: int) -> str:
            return "unlimited" if per_minute == 0 else f"{per_minute:g} a minute, bursts of {burst}"

        return {"on": True, "writes": words(self.writes_per_minute, self.write_burst),
                "reads": words(self.reads_per_minute, self.read_burst),
                "owners": "unlimited" if self.owner_factor == 0 else f"{self.owner_factor:g} x"}


#: the ``[serve]`` table's loader (text values parsed as the command line hands them over)
SECTION = Section(RateLimits, error=ConfigError, env_prefix="AMEM_SERVE_", lenient=True)


class TokenBucket:
    """``burst`` tokens at most, refilled at ``rate`` tokens a second; starts full."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if not rate > 0 or burst < 1:
            raise ValueError(f"a bucket needs a positive rate and a burst of at least 1, got "
                             f"{rate} and {burst}")
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self._last = now

    def take(self, now: float) -> float:
        """Take a token: 0.0 when taken, else the seconds until one is there (none taken)."""
        # a clock set back refills nothing, and counts on from its new reading
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self._last) * self.rate)
        self._last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


@dataclass(frozen=True)
class Refusal:
    """A request over its caller's budget: which budget, when a token is there, and how long
    the answer is held back (the wait, at most ``RateLimits.hold_s``)."""

    kind: Kind
    retry_after: float
    per_minute: float
    burst: int
    hold: float = 0.0

    @property
    def retry_after_s(self) -> int:
        """Whole seconds to wait once the answer arrives, as ``Retry-After`` says them: what
        is left of the wait after the ``hold`` (rounded up, at least one)."""
        return max(1, math.ceil(self.retry_after - self.hold))


@dataclass
class _Caller:
    agent: str | None
    owner: bool
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    served: dict[str, int] = field(default_factory=lambda: {"write": 0, "read": 0})
    refused: dict[str, int] = field(default_factory=lambda: {"write": 0, "read": 0})
    last_refused: datetime | None = None
    logged_at: float = -math.inf


class RateLimiter:
    """The buckets of every caller, and what they refused (``report``, for ``amem status``).

    One per server; ``check`` runs on the event loop and ``report`` in a worker thread, so
    both hold a lock (a dictionary update, never I/O). Only callers the guard admitted reach
    it (an unknown key is refused before), so its table grows with the issued keys, never
    with the requests.
    """

    def __init__(self, limits: RateLimits, clock: Clock | None = None) -> None:
        self.limits = limits
        self._clock = clock or SystemClock()
        self._callers: dict[str, _Caller] = {}
        self._lock = threading.Lock()

    def check(self, caller: str, kind: Kind, *, owner: bool = False,
              agent: str | None = None) -> Refusal | None:
        """Count one request of ``caller``: ``None`` when it may run, else the refusal.

        ``caller`` is the key's id (never the secret); ``agent`` is only shown in the report.
        """
        budget = self.limits.budget(kind, owner=owner)
        moment = self._clock.now()
        now = moment.timestamp()
        with self._lock:
            state = self._callers.get(caller)
            if state is None:
                state = self._callers[caller] = _Caller(agent, owner)
            if budget is None:
                state.served[kind] += 1
                return None
            bucket = state.buckets.get(kind)
            if bucket is None:
                bucket = state.buckets[kind] = TokenBucket(*budget, now)
            wait = bucket.take(now)
            if wait == 0.0:
                state.served[kind] += 1
                return None
            state.refused[kind] += 1
            state.last_refused = moment
            refusal = Refusal(kind, wait, budget[0] * 60.0, budget[1],
                              min(wait, self.limits.hold_s))
            tell = now - state.logged_at >= _LOG_EVERY_S
            if tell:
                state.logged_at = now
            count = state.refused[kind]
        if tell:  # once a minute per caller: a flood must not flood the log too
            log.warning("key %s%s is over its %s budget (%g a minute, bursts of %d): refused "
                        "for %d s (%d refused so far)", caller,
                        f" (agent {agent!r})" if agent else "", kind, refusal.per_minute,
                        refusal.burst, refusal.retry_after_s, count)
        return refusal

    def report(self) -> dict[str, Any]:
        """The budgets and, per caller, requests served and refused (key ids, never secrets),
        the callers with the most refusals first."""
        with self._lock:
            rows = [(caller, state.agent, state.owner, dict(state.served), dict(state.refused),
                     state.last_refused) for caller, state in self._callers.items()]
        rows.sort(key=lambda r: (-(r[4]["write"] + r[4]["read"]), r[0]))
        callers: dict[str, Any] = {}
        for caller, agent, owner, served, refused, last in rows[:REPORT_CALLERS]:
            entry: dict[str, Any] = {"agent": "any (owner)" if owner else agent,
                                     "writes": served["write"], "reads": served["read"],
                                     "writes_refused": refused["write"],
                                     "reads_refused": refused["read"]}
            if last is not None:
                entry["last_refused"] = last.isoformat(timespec="seconds")
            callers[caller] = entry
        out = self.limits.describe()
        out["refused"] = sum(r[4]["write"] + r[4]["read"] for r in rows)
        out["keys"] = callers
        if len(rows) > REPORT_CALLERS:
            out["keys_not_shown"] = len(rows) - REPORT_CALLERS
        return out
