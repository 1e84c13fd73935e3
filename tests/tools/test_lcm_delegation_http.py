"""Delegated recall against a real (fake) OpenAI endpoint, as ``amem serve`` opens the stores.

The fake model acts as the sub-agent: it calls ``lcm_grep`` first, then answers citing the
message it was shown, and for one conversation answers too late. Over MCP, the tool's own
``timeoutMs`` is the server's deadline for the call, not the fixed one.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from tests.fakes.openai_server import FakeOpenAI, Reply, Request, chat, slow
from tools.facade import ToolFacade
from tools.lcm_tools import expand_query_deadline
from tools.mcp_server import build_server
from tools.runner import CallLimits, CallRunner

from .test_lcm_llm import runtime, server

__all__ = ["server"]  # the fixture, imported for pytest

KEYS = [f"agent:main:k{i}" for i in range(3)]


def _sub_agent(slow_conv: int | None, delay: float = 3.0) -> Any:
    def reply(req: Request) -> Reply:
        if "Question:" not in req.user:
            return chat("A summary.")
        conv = int(re.search(r"Conversation: (\d+)", req.user).group(1))  # type: ignore[union-attr]
        if "Your call:" not in req.user:  # the first turn: a tool call, as a sub-agent would
            return chat(json.dumps({"tool": "lcm_grep", "arguments": {"pattern": "invoice"}}))
        cite = re.search(r"\[(msg_\d+) user", req.user).group(1)  # type: ignore[union-attr]
        answer = chat(json.dumps({"answer": f"invoice of conversation {conv} [{cite}]", "citedIds": [cite]}))
        return slow(delay, answer) if conv == slow_conv else answer
    return reply


def _fill(lcm: Any) -> list[int]:
    ids = []
    for n, key in enumerate(KEYS):
        lcm.ingest(key, [{"role": "user", "content": f"the invoice number is INV-{n}00 for client {n}"},
                         {"role": "assistant", "content": "noted"}])
        ids.append(lcm.conversation(key).id)
    return ids


def test_a_slow_conversation_times_out_the_others_answer(tmp_path: Path, server: FakeOpenAI) -> None:
    s = runtime(tmp_path, server)
    lcm = s.lcm
    try:
        convs = _fill(lcm)
        server.set_default(_sub_agent(convs[1]))
        facade = ToolFacade(None, lcm, agent_id="main", session_key=KEYS[0])
        began = time.monotonic()
        out = facade.call("lcm_expand_query", {"prompt": "which invoice number?", "query": "invoice",
                                               "allConversations": True, "timeoutMs": 1200})
        took = time.monotonic() - began
        assert "error" not in out, out
        assert took < 1.2 + 0.8
        rows = {r["conversationId"]: r for r in out["conversationBreakdown"]}
        assert rows[convs[1]]["status"] == "failed" and rows[convs[1]]["errorCode"] == "timeout"
        assert rows[convs[1]]["phase"] == "answer"
        assert [rows[c]["status"] for c in (convs[0], convs[2])] == ["success", "success"]
        assert out["truncated"] is True and sorted(out["sourceConversationIds"]) == [convs[0], convs[2]]
        assert f"invoice of conversation {convs[1]}" not in out["answer"]
        assert f"invoice of conversation {convs[0]}" in out["answer"]
        # every bucket late: a timeout error that still carries errorCode and the breakdown
        server.set_default(lambda req: slow(3.0, chat("late")))
        bad = facade.call("lcm_expand_query", {"prompt": "which invoice?", "query": "invoice",
                                               "allConversations": True, "timeoutMs": 300})
        err = bad["error"]
        assert err["code"] == "timeout" and err["errorCode"] == "timeout" and err["totalSourceTokens"] == 0
        assert len(err["conversationBreakdown"]) == 3
        assert {r["errorCode"] for r in err["conversationBreakdown"]} == {"timeout"}
    finally:
        lcm.close()


def test_the_tool_declares_its_own_deadline_to_the_server(tmp_path: Path, server: FakeOpenAI) -> None:
    s = runtime(tmp_path, server, LCM_DELEGATION_TIMEOUT_MS="4000")
    lcm = s.lcm
    try:
        convs = _fill(lcm)
        facade = ToolFacade(None, lcm, agent_id="main", session_key=KEYS[0])
        # the default timeoutMs is delegationTimeoutMs + 30 s; a given one is taken as is
        assert expand_query_deadline(facade, {}) == 34.0
        assert expand_query_deadline(facade, {"timeoutMs": 2500}) == 2.5
        runner = CallRunner(CallLimits(timeout=0.5, max_timeout=10, grace=0.5))
        assert runner.deadline_for(facade, "lcm_expand_query", {"timeoutMs": 2500}) == 3.0
        assert runner.deadline_for(facade, "lcm_expand_query", {}) == 10  # the server's maximum
        assert runner.deadline_for(facade, "lcm_grep", {"pattern": "x"}) == 0.5
        # Over MCP: the model takes 1 s, the server's fixed deadline is 0.5 s; before, the call
        # was cut at 0.5 s with ``timeout`` whatever timeoutMs said.
        server.set_default(lambda req: slow(1.0, chat("INV-000 [msg_1]")))

        async def main() -> Any:
            async with Client(build_server(facade, limits=CallLimits(timeout=0.5, max_timeout=10,
                                                                     grace=0.5))) as client:
                res = await client.call_tool("lcm_expand_query", {"prompt": "which invoice?", "query": "invoice",
                                                                  "timeoutMs": 3000})
                return res.structured_content

        out = anyio.run(main)
        assert "error" not in out, out
        assert "INV-000" in out["answer"] and out["method"] == "llm"
    finally:
        lcm.close()
