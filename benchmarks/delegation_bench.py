"""Delegated recall (``lcm_expand_query``) over many conversations with a model slow for some.

    python -m benchmarks.delegation_bench            # 3 and 20 conversations, ~20 s

Each conversation holds one fact ("the budget code of project-<i> is BC-<i>") among filler.
The model is the fake OpenAI-compatible server of the tests, over real HTTP, acting as the
sub-agent: it calls ``lcm_grep`` once, then answers citing the message; for the "slow"
conversations its answer comes after ``--slow`` seconds, past the shared deadline. Reported
per case: the facts in the answer against the conversations that hold one (completeness), the
buckets answered / failed / skipped, ``truncated``, and the elapsed time against the deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, Reply, Request, chat, slow
from tools.facade import ToolFacade
from tools.runtime import Runtime


def _model(slow_convs: set[int], delay: float) -> Any:
    def reply(req: Request) -> Reply:
        if "Question:" not in req.user:
            return chat("A summary.")
        conv = int(re.search(r"Conversation: (\d+)", req.user).group(1))  # type: ignore[union-attr]
        if "Your call:" not in req.user:
            return chat(json.dumps({"tool": "lcm_grep", "arguments": {"pattern": "budget code"}}))
        found = re.search(r"\[(msg_\d+) user[^\]]*\]\n([^\n]*BC-\d+)", req.user)
        text = f"{found.group(2)} [{found.group(1)}]" if found else "not found in this conversation"
        answer = chat(json.dumps({"answer": text, "citedIds": [found.group(1)] if found else []}))
        return slow(delay, answer) if conv in slow_convs else answer
    return reply


def _open(home: Path, url: str | None, timeout_ms: int) -> Runtime:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "LCM_LOG_FILE_ENABLED": "false",
                "LCM_DELEGATION_TIMEOUT_MS": str(timeout_ms)})
    if url:
        env.update({"AMEM_LLM_BASE_URL": url, "AMEM_LLM_MODEL": "fake"})
    return Runtime.load(env)


def case(n: int, slow_every: int, *, deadline_ms: int, delay: float, with_llm: bool) -> dict[str, Any]:
    server = FakeOpenAI() if with_llm else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rt = _open(Path(tmp), server.url if server else None, deadline_ms)
            lcm = rt.lcm
            try:
                convs = []
                for i in range(n):
                    key = f"agent:main:p{i}"
                    lcm.ingest(key, [{"role": "user", "content": f"the budget code of project-{i} is BC-{i}"},
                                     *({"role": ("assistant", "user")[j % 2], "content": f"filler {i}.{j} lunch"}
                                       for j in range(6))])
                    convs.append(lcm.conversation(key).id)  # type: ignore[union-attr]
                slow_convs = {c for k, c in enumerate(convs) if slow_every and k % slow_every == 1}
                if server:
                    server.set_default(_model(slow_convs, delay))
                facade = ToolFacade(None, lcm, agent_id="main", session_key="agent:main:p0")
                began = time.monotonic()
                out = facade.call("lcm_expand_query", {"prompt": "which budget codes were given?",
                                                       "query": "budget code", "allConversations": True,
                                                       "timeoutMs": deadline_ms})
                took = time.monotonic() - began
            finally:
                rt.close()
    finally:
        if server:
            server.close()
    body = out.get("error", out) if "conversationBreakdown" not in out else out
    rows = body.get("conversationBreakdown", [])
    facts = set(re.findall(r"BC-\d+", out.get("answer", "")))
    return {
        "conversations": n, "model": "fake (HTTP)" if with_llm else "none (extractive)",
        "slow": len(slow_convs) if with_llm else 0, "deadline_ms": deadline_ms, "elapsed_ms": round(took * 1000),
        "facts_found": len(facts), "answered": sum(r["status"] == "success" for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows), "skipped": sum(r["status"] == "skipped" for r in rows),
        "failed_codes": ",".join(sorted({str(r["errorCode"]) for r in rows if r["status"] == "failed"})) or "-",
        "expanded": ",".join(str(r["conversationId"]) for r in rows if r["status"] != "skipped"),
        "truncated": body.get("truncated"), "error": out["error"]["code"] if "error" in out else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--deadline-ms", type=int, default=1500, help="timeoutMs of each call (default 1500)")
    ap.add_argument("--slow", type=float, default=3.0, help="seconds a slow conversation's answer takes")
    ap.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    args = ap.parse_args(argv)
    results = []
    for n in (3, 20):
        for slow_every, llm in ((0, True), (3, True), (0, False)):
            results.append(case(n, slow_every, deadline_ms=args.deadline_ms, delay=args.slow, with_llm=llm))
    if args.json:
        for r in results:
            print(json.dumps(r))
        return 0
    cols = list(results[0])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in results:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
