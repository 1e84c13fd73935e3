"""``lcm_expand_query``'s ``timeoutMs`` is the deadline of the HTTP request itself.

Real HTTP against the fake OpenAI-compatible server, the store opened as ``amem serve`` opens
it: the call returns at ``timeoutMs`` with the ``timeout`` code, and no request is left running
in the background (before, it ran on until ``delegationTimeoutMs``, 120 s by default).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from lcm.recall import ExpansionTimeoutError
from tests.fakes.openai_server import FakeOpenAI, Reply, Request, chat, drip, slow
from tools.facade import ToolFacade

from .test_lcm_llm import KEY, runtime, server, talk

__all__ = ["server"]  # the fixture, imported for pytest

_WORKERS = ("lcm-expand-query", "amem-llm-exchange")


def _answer_late(req: Request) -> Reply:
    # Summaries come at once; the expansion question's reply waits 4 s, or drips for longer.
    if "Question:" not in req.user:
        return chat("Deploys failed; rolled back.")
    return drip(0.02, chat("too late [msg_1]")) if "dripped" in req.user else slow(4.0, chat("too late [msg_1]"))


def _in_flight() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name in _WORKERS and t.is_alive()]


def test_timeout_ms_ends_the_request_and_keeps_the_circuit_closed(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(_answer_late)
    s = runtime(tmp_path, server)
    lcm = s.lcm
    try:
        lcm.ingest(KEY, talk(24))
        assert lcm.compact(KEY, force=True).leaf_summaries
        started = time.monotonic()
        with pytest.raises(ExpansionTimeoutError) as caught:
            lcm.expand_query("why was the release rolled back?", query="rolled back", session_key=KEY,
                             timeout_ms=400)
        took = time.monotonic() - started
        assert caught.value.code == "timeout"
        assert took < 0.4 + 0.6  # timeoutMs and a little slack, not the server's 4 s
        # The request itself is over soon after, not when the server answers (4 s) or at
        # delegationTimeoutMs: nothing is left reading it in the background.
        until = time.monotonic() + 1.0
        while _in_flight() and time.monotonic() < until:
            time.sleep(0.02)
        assert _in_flight() == []
        # A caller's short deadline says nothing about the endpoint: not counted against it.
        client = s.llm
        assert client is not None
        breaker = client.breaker
        assert (breaker.state, breaker.failures) == ("closed", 0)
        # A reply dripped a byte at a time never trips a read timeout; the deadline still ends it.
        started = time.monotonic()
        with pytest.raises(ExpansionTimeoutError):
            lcm.expand_query("dripped: why was the release rolled back?", query="rolled back", session_key=KEY,
                             timeout_ms=400)
        assert time.monotonic() - started < 0.4 + 0.6
        assert (breaker.state, breaker.failures) == ("closed", 0)
        # The tool an agent calls: the same deadline, the error code ``timeout``.
        facade = ToolFacade(None, lcm, agent_id="main", session_key=KEY)
        started = time.monotonic()
        got = facade.call("lcm_expand_query", {"prompt": "why was the release rolled back?", "query": "rolled back",
                                               "timeoutMs": 300})
        assert got["error"]["code"] == "timeout" and time.monotonic() - started < 0.3 + 0.6
    finally:
        lcm.close()
