"""How the MCP server runs tool calls: in worker threads, each under a deadline.

A tool call is synchronous (the stores block), so the server hands it to a worker thread and
awaits it with a deadline. When the deadline passes the caller gets a ``timeout`` error at
once and the server goes on serving everyone else; a thread cannot be stopped, so the call
finishes in the background and its result is dropped. Two bounds keep abandoned calls from
piling up:

* ``workers``: calls running at once, server-wide. A call that timed out keeps its worker
  until it really ends, so this also bounds the threads a burst of slow calls can hold.
* ``per_agent``: calls of one agent running or waiting at once, lower than ``workers``, so
  one agent's slow calls cannot take every worker from the others.

A call waits for its turn inside its own deadline, and a call whose deadline passes before
it started never runs. The stores are safe to share between the workers: the note store
serialises engine access and writes with its own locks, lcm uses one connection behind a
lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import error_result

if TYPE_CHECKING:
    import anyio

    from .facade import ToolFacade

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallLimits:
    """The server's bounds on tool calls.

    Args:
        timeout: Seconds a caller waits for one call (queueing included) before ``timeout``.
        workers: Calls running at once, server-wide.
        per_agent: Calls of one agent running or waiting at once (at most ``workers``).
        max_timeout: The longest deadline a tool may declare for itself (``Tool.deadline``:
            ``lcm_expand_query``'s ``timeoutMs``); such a call waits its own deadline plus
            ``grace``, at least ``timeout``, at most this.
        grace: Seconds added to a declared deadline, so the tool's own answer at its deadline
            (partial results, its ``timeout`` with a breakdown) reaches the caller first.
    """

    timeout: float = 60.0
    workers: int = 8
    per_agent: int = 3
    max_timeout: float = 600.0
    grace: float = 5.0

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        if not self.max_timeout >= self.timeout or self.grace < 0:
            raise ValueError(f"need max_timeout >= timeout and grace >= 0, got max_timeout="
                             f"{self.max_timeout!r}, timeout={self.timeout!r}, grace={self.grace!r}")
        if self.workers < 1 or not 1 <= self.per_agent <= self.workers:
            raise ValueError(f"need workers >= 1 and 1 <= per_agent <= workers, got "
                             f"workers={self.workers}, per_agent={self.per_agent}")


@dataclass
class _Ticket:
    """One call's hand-over between the waiting caller and its worker thread."""

    started: bool = False
    dropped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Loop:
    """The primitives of one event loop (anyio's belong to the loop that made them)."""

    def __init__(self, limits: CallLimits) -> None:
        import anyio
        import anyio.lowlevel

        self.limits = limits
        self.token = anyio.lowlevel.current_token()
        self.slots = anyio.Semaphore(limits.workers)
        self.threads = anyio.CapacityLimiter(limits.workers)
        #: per agent: its semaphore and how many calls hold or wait for it
        self.gates: dict[str, tuple[anyio.Semaphore, int]] = {}

    def gate(self, agent: str) -> "anyio.Semaphore":
        import anyio

        sem, users = self.gates.get(agent, (None, 0))
        if sem is None:
            sem = anyio.Semaphore(self.limits.per_agent)
        self.gates[agent] = (sem, users + 1)
        return sem

    def leave(self, agent: str) -> None:
        # An idle agent's gate is dropped, so agent ids made up per request cannot grow it.
        sem, users = self.gates[agent]
        if users <= 1:
            del self.gates[agent]
        else:
            self.gates[agent] = (sem, users - 1)


class CallRunner:
    """Runs ``facade.call`` in worker threads under ``limits`` (one per server)."""

    def __init__(self, limits: CallLimits | None = None) -> None:
        self.limits = limits or CallLimits()
        self._loops: dict[object, _Loop] = {}

    def _loop(self) -> _Loop:
        from anyio.lowlevel import current_token

        key = current_token().native_token
        if key not in self._loops:
            self._loops = {key: _Loop(self.limits)}  # a server runs on one loop at a time
        return self._loops[key]

    async def call(self, facade: "ToolFacade", name: Any, arguments: Any) -> dict[str, Any]:
        """``facade.call(name, arguments)`` in a worker, or a ``timeout`` error at the deadline
        (the tool's own, when it declares one: :meth:`deadline_for`)."""
        return await self.run(facade.agent_id, name, lambda: facade.call(name, arguments),
                              timeout=self.deadline_for(facade, name, arguments))

    def deadline_for(self, facade: "ToolFacade", name: Any, arguments: Any) -> float:
        """Seconds the server waits for this call: ``limits.timeout``, or for a tool that
        declares its own deadline that deadline plus ``grace``, within ``[timeout, max_timeout]``."""
        tool = facade.registry.get(name) if isinstance(name, str) else None
        if tool is None or tool.deadline is None:
            return self.limits.timeout
        try:
            own = tool.deadline(facade, arguments)
        except Exception:  # a bad argument is the handler's to refuse; wait the usual time
            log.debug("deadline of %s not computed", name, exc_info=True)
            own = None
        if own is None or not own > 0:
            return self.limits.timeout
        return min(self.limits.max_timeout, max(self.limits.timeout, own + self.limits.grace))

    async def run(self, agent: str, name: Any, work: Callable[[], dict[str, Any]], *,
                  timeout: float | None = None) -> dict[str, Any]:
        """``work()`` of ``agent`` in a worker under the same bounds as a tool call (``name``
        labels it in errors and logs): the host routes of ``tools.host_http`` run this way.
        ``timeout``: this call's deadline in seconds (default ``limits.timeout``)."""
        import anyio

        limit = self.limits.timeout if timeout is None else timeout
        loop, ticket = self._loop(), _Ticket()
        gate = loop.gate(agent)
        held: list[anyio.Semaphore] = []
        try:
            with anyio.fail_after(limit):
                for sem in (gate, loop.slots):
                    await sem.acquire()
                    held.append(sem)
                return await anyio.to_thread.run_sync(
                    self._work, ticket, work, name, loop, agent, limit,
                    abandon_on_cancel=True, limiter=loop.threads)
        except TimeoutError:
            log.warning("tool %s of agent %s passed its %g s deadline", name, agent, limit)
            return error_result("timeout", f"{str(name)[:80]} did not finish within "
                                f"{limit:g} s, so the server stopped waiting; "
                                "a write may still complete, check before retrying")
        finally:
            with ticket.lock:
                mine = not ticket.started
                ticket.dropped = mine
            if mine:  # the worker never started: the slots are still ours to give back
                for sem in held:
                    sem.release()
                loop.leave(agent)

    def _work(self, ticket: _Ticket, work: Callable[[], dict[str, Any]], name: Any,
              loop: _Loop, agent: str, limit: float) -> dict[str, Any]:
        with ticket.lock:
            if ticket.dropped:  # the caller gave up before this call started
                return error_result("timeout", "the call was not started")
            ticket.started = True
        began = time.monotonic()
        try:
            return work()
        finally:
            elapsed = time.monotonic() - began
            if elapsed > limit:
                log.warning("tool %s of agent %s took %.1f s (deadline %g s)", name, agent,
                            elapsed, limit)
            self._give_back(loop, agent)

    def _give_back(self, loop: _Loop, agent: str) -> None:
        def release() -> None:
            loop.slots.release()
            gate, _ = loop.gates[agent]
            gate.release()
            loop.leave(agent)

        # Hand the release to the loop without waiting for it: a worker must never block on
        # a loop that is shutting down (it would then keep the process from exiting).
        native = loop.token.native_token
        try:
            if isinstance(native, asyncio.AbstractEventLoop):
                native.call_soon_threadsafe(release)
            else:  # another anyio backend: its own way back to the loop
                from anyio import from_thread

                from_thread.run_sync(release, token=loop.token)
        except RuntimeError:  # the server's loop has ended: nobody is left to wait
            pass
