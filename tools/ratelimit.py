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

**A request costs what it writes** (``tools.ratecost``): an ingest of 500 messages takes 500
write tokens, a note's add one, a read one. A cost is capped at the bucket's burst: uncapped, a
request larger than the burst could never gather its tokens and would be refused forever;
capped, the largest legal request is served from a full bucket, and its caller then waits for
the whole bucket to refill (15 s at the defaults) before its next write. The items past the
burst are free, but only one such batch passes per refill, the batch size is bounded by its
route (5,000 messages an ingest), and a batch costs the server less per item than separate
requests do (one lock, one transaction).

**Requests without a valid key have one budget, shared** (``failed_auth_*``): every local
client comes from 127.0.0.1, so there is nothing else to key it by. A flood of bad or missing
keys (a misconfigured client, or key guessing) is then refused with 429, held like any refusal,
instead of answered at full speed. A valid key is always checked and charged to its own
buckets, so the flood never refuses it; only requests that fail are charged here.

**What the owner is told** (``report``, ``warnings``): per caller, requests served and refused,
and those refused in the last ``WARN_WINDOW_S``; a caller refused ``WARN_REFUSALS`` times in
that window is a warning of ``amem doctor`` and ``amem status`` (its key id, never a secret,
and what to do). ``report_of`` gives one key's own counts (an agent's health page: its own,
never another key's).

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
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from amem.errors import ConfigError
from amem.kernel.clock import Clock, SystemClock
from amem.kernel.settings import Section, setting

log = logging.getLogger(__name__)

__all__ = ["RateLimits", "TokenBucket", "RateLimiter", "Refusal", "SECTION", "Kind",
           "FAILED_AUTH", "WARN_REFUSALS", "WARN_WINDOW_S"]

#: the budgets: a caller's two, and the one all requests without a valid key share
Kind = Literal["write", "read", "auth"]
#: the caller that requests without a valid key are counted as (no key id looks like it)
FAILED_AUTH = "without-a-valid-key"
#: callers shown by name in the report (each issued key is one; more is a report too long to read)
REPORT_CALLERS = 50
#: a caller refused again within this many seconds is not logged again
_LOG_EVERY_S = 60.0
#: a caller refused this many times within ``WARN_WINDOW_S`` is a doctor finding: a client
#: that waits the Retry-After it is told is refused about once per wait, one that loops on
#: refusals (held a second each) about once a second per connection
WARN_REFUSALS = 100
WARN_WINDOW_S = 600.0


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
        failed_auth_per_minute, failed_auth_burst: requests without a valid key (401), all
            callers together; past them such requests are refused with 429. 0: unlimited.
    """

    enabled: bool = setting(True, key="rate_limit", env="AMEM_SERVE_RATE_LIMIT")
    writes_per_minute: float = setting(120.0, at_least=0)
    write_burst: int = setting(30, at_least=1)
    reads_per_minute: float = setting(600.0, at_least=0)
    read_burst: int = setting(60, at_least=1)
    owner_factor: float = setting(10.0, at_least=0)
    hold_s: float = setting(1.0, at_least=0, at_most=10)
    failed_auth_per_minute: float = setting(60.0, at_least=0)
    failed_auth_burst: int = setting(20, at_least=1)

    def __post_init__(self) -> None:
        SECTION.validate(self)

    def budget(self, kind: Kind, *, owner: bool) -> tuple[float, int] | None:
        """``(tokens a second, burst)`` of a caller's ``kind`` of request; ``None``: unlimited."""
        if not self.enabled or (owner and self.owner_factor == 0):
            return None
        per_minute, burst = {"write": (self.writes_per_minute, self.write_burst),
                             "read": (self.reads_per_minute, self.read_burst),
                             "auth": (self.failed_auth_per_minute, self.failed_auth_burst)}[kind]
        if per_minute == 0:
            return None
        factor = self.owner_factor if owner and kind != "auth" else 1.0
        return per_minute * factor / 60.0, max(1, round(burst * factor))

    def describe(self) -> dict[str, Any]:
        """The budgets in words, for ``amem status``."""
        if not self.enabled:
            return {"on": False}

        def words(per_minute: float, burst: int) -> str:
            return "unlimited" if per_minute == 0 else f"{per_minute:g} a minute, bursts of {burst}"

        return {"on": True, "writes": words(self.writes_per_minute, self.write_burst),
                "reads": words(self.reads_per_minute, self.read_burst),
                "without_key": words(self.failed_auth_per_minute, self.failed_auth_burst)
                + ", all callers together",
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

    def take(self, now: float, cost: int = 1) -> float:
        """Take ``cost`` tokens (at most ``burst``: a request larger than the bucket takes all
        of it, never waits forever): 0.0 when taken, else the seconds until they are there
        (none taken)."""
        need = float(min(max(1, cost), self.burst))
        self.tokens = self.level(now)
        self._last = now
        if self.tokens >= need:
            self.tokens -= need
            return 0.0
        return (need - self.tokens) / self.rate

    def level(self, now: float) -> float:
        """The tokens there are at ``now`` (none taken)."""
        # a clock set back refills nothing, and counts on from its new reading
        return min(float(self.burst), self.tokens + max(0.0, now - self._last) * self.rate)


@dataclass(frozen=True)
class Refusal:
    """A request over its caller's budget: which budget, when a token is there, and how long
    the answer is held back (the wait, at most ``RateLimits.hold_s``)."""

    kind: Kind
    retry_after: float
    per_minute: float
    burst: int
    hold: float = 0.0
    #: the tokens the request would have taken (its cost, capped at the burst)
    cost: int = 1

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
    served: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    #: refusals per minute (the minute's number since the epoch), the last ``WARN_WINDOW_S``
    #: only: a flood adds to a count, never a row per request
    recent: dict[int, int] = field(default_factory=dict)
    last_refused: datetime | None = None
    logged_at: float = -math.inf

    def refused_since(self, now: float) -> int:
        first = math.floor((now - WARN_WINDOW_S) / 60.0) + 1
        for minute in [m for m in self.recent if m < first]:
            del self.recent[minute]
        return sum(self.recent.values())


class RateLimiter:
    """The buckets of every caller, and what they refused (``report``, for ``amem status``).

    One per server; ``check`` runs on the event loop and ``report`` in a worker thread, so
    both hold a lock (a dictionary update, never I/O). Only callers the guard admitted reach
    it (an unknown key is counted as the one ``FAILED_AUTH`` caller), so its table grows with
    the issued keys, never with the requests.
    """

    def __init__(self, limits: RateLimits, clock: Clock | None = None) -> None:
        self.limits = limits
        self._clock = clock or SystemClock()
        self._callers: dict[str, _Caller] = {}
        self._lock = threading.Lock()

    def check(self, caller: str, kind: Kind, *, cost: int = 1, owner: bool = False,
              agent: str | None = None) -> Refusal | None:
        """Charge one request of ``caller`` its ``cost`` in tokens (``tools.ratecost``):
        ``None`` when it may run, else the refusal.

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
            wait = bucket.take(now, cost)
            if wait == 0.0:
                state.served[kind] += 1
                return None
            state.refused[kind] += 1
            state.last_refused = moment
            minute = math.floor(now / 60.0)
            state.recent[minute] = state.recent.get(minute, 0) + 1
            refusal = Refusal(kind, wait, budget[0] * 60.0, budget[1],
                              min(wait, self.limits.hold_s), min(max(1, cost), budget[1]))
            tell = now - state.logged_at >= _LOG_EVERY_S
            if tell:
                state.logged_at = now
            count = state.refused[kind]
        if tell:  # once a minute per caller: a flood must not flood the log too
            who = ("requests without a valid key" if caller == FAILED_AUTH else f"key {caller}"
                   + (f" (agent {agent!r})" if agent else ""))
            log.warning("%s went over the %s budget (%g a minute, bursts of %d): refused for %d s "
                        "(%d refused so far)", who, kind, refusal.per_minute, refusal.burst,
                        refusal.retry_after_s, count)
        return refusal

    def failed_auth(self) -> Refusal | None:
        """Charge a request that brought no valid key to the budget they all share: ``None``
        when it may be answered 401, else the refusal (429)."""
        return self.check(FAILED_AUTH, "auth")

    # ------------------------------------------------------------------ what they refused

    def report(self) -> dict[str, Any]:
        """The budgets and, per caller, requests served and refused (key ids, never secrets),
        the callers with the most refusals first; ``without_key``: the requests without a valid
        key; ``warnings``: the callers refused often in the last window."""
        now = self._clock.now().timestamp()
        with self._lock:
            rows = [(caller, self._entry(state, now), state) for caller, state
                    in self._callers.items() if caller != FAILED_AUTH]
            failed = self._callers.get(FAILED_AUTH) or _Caller(None, False)
            without = self._without_key(failed, now)
        rows.sort(key=lambda r: (-(r[1]["writes_refused"] + r[1]["reads_refused"]), r[0]))
        out = self.limits.describe()
        out["refused"] = sum(r[1]["writes_refused"] + r[1]["reads_refused"] for r in rows)
        out["keys"] = {caller: entry for caller, entry, _ in rows[:REPORT_CALLERS]}
        if len(rows) > REPORT_CALLERS:
            out["keys_not_shown"] = len(rows) - REPORT_CALLERS
        if "without_key" in out:  # the budget's words, and what it answered and refused
            out["without_key"] = {"budget": out["without_key"], **without}
        out["warnings"] = self._warnings([(c, e) for c, e, _ in rows], without)
        return out

    def report_of(self, caller: str) -> dict[str, Any]:
        """One caller's own counts and budgets (an agent's health page): no other caller's."""
        now = self._clock.now().timestamp()
        with self._lock:
            state = self._callers.get(caller)
            entry = self._entry(state, now) if state is not None else None
        budgets = self.limits.describe()
        out: dict[str, Any] = {"key": caller, "on": budgets["on"]}
        if budgets["on"]:  # its own two budgets: the owners' and the shared one are not its own
            out["budgets"] = {"writes": budgets["writes"], "reads": budgets["reads"]}
        out.update(entry or {"writes": 0, "reads": 0, "writes_refused": 0, "reads_refused": 0,
                             "refused_recently": 0})
        out.pop("agent", None)  # the page names its agent already
        return out

    def warnings(self) -> list[str]:
        """The doctor's findings: each caller refused ``WARN_REFUSALS`` times or more in the
        last ``WARN_WINDOW_S``, with what to do."""
        return list(self.report()["warnings"])

    @staticmethod
    def _entry(state: _Caller, now: float) -> dict[str, Any]:
        entry: dict[str, Any] = {"agent": "any (owner)" if state.owner else state.agent,
                                 "writes": state.served["write"], "reads": state.served["read"],
                                 "writes_refused": state.refused["write"],
                                 "reads_refused": state.refused["read"],
                                 "refused_recently": state.refused_since(now)}
        if state.last_refused is not None:
            entry["last_refused"] = state.last_refused.isoformat(timespec="seconds")
        return entry

    @staticmethod
    def _without_key(state: _Caller, now: float) -> dict[str, Any]:
        entry: dict[str, Any] = {"answered_401": state.served["auth"],
                                 "refused": state.refused["auth"],
                                 "refused_recently": state.refused_since(now)}
        if state.last_refused is not None:
            entry["last_refused"] = state.last_refused.isoformat(timespec="seconds")
        return entry

    def _warnings(self, rows: list[tuple[str, dict[str, Any]]],
                  without: dict[str, Any]) -> list[str]:
        window = f"{WARN_WINDOW_S / 60:g} minutes"
        said = []
        for caller, entry in rows:
            count = entry["refused_recently"]
            if count < WARN_REFUSALS:
                continue
            who = f"key {caller}" + (f" (agent {entry['agent']!r})" if entry["agent"] else "")
            said.append(
                f"{who} was refused {count} requests in the last {window} (over its request "
                f"budget: {entry['writes_refused']} writes and {entry['reads_refused']} reads "
                f"refused since the server started): its client sends more than its budget. "
                f"A client should wait the Retry-After it is told; if its work needs more, "
                f"raise the budget in the [serve] table (writes_per_minute, write_burst, "
                f"reads_per_minute, read_burst; AMEM_SERVE_*); if the key is not in use by "
                f"anything you run, it may have leaked: `amem keys revoke {caller}`")
        if without["refused_recently"] >= WARN_REFUSALS:
            said.append(
                f"{without['refused_recently']} requests without a valid key were refused in "
                f"the last {window} (past the budget all such requests share; "
                f"{without['answered_401']} were answered 401 since the server started): a "
                f"local client sends a missing, wrong or revoked key, or is guessing keys. "
                f"Find the client and give it a key (`amem keys list`, `amem keys add --agent "
                f"ID`); valid keys are served meanwhile")
        return said
