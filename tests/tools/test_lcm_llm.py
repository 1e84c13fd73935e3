"""The LLM reaches lcm under amem's runtime: one client, per-role models, summaryTimeoutMs.

Real HTTP against the fake OpenAI-compatible server; the stores are opened the way
``amem serve`` and the CLI open them (``tools.runtime``), nothing is injected.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAI, chat, error, slow
from tools.runtime import Runtime

KEY = "agent:main:main"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    yield srv
    srv.close()


def runtime(home: Path, server: FakeOpenAI, **extra: str) -> Runtime:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_LLM_BASE_URL": server.url,
                "AMEM_LLM_MODEL": "note-model", "LCM_FRESH_TAIL_COUNT": "4", "LCM_LOG_FILE_ENABLED": "false"})
    env.update(extra)
    return Runtime.load(env)


def talk(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"step {i}: deployed service-{i} to staging; the health check on port {8000 + i} "
                        f"answered 503 and we rolled back release v{i}.2 after reading the logs."}
            for i in range(n)]


def summaries(store: Any) -> list[tuple[str, str, str]]:
    return [(r["model"], r["status"], r["content"])
            for r in store.db.query("SELECT model, status, content FROM summaries ORDER BY pk")]


def test_compaction_summarizes_with_the_summary_model(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(chat("Deploys of service-0..11 failed health checks (503); releases rolled back."))
    lcm = runtime(tmp_path, server, LCM_SUMMARY_MODEL="tiny-summarizer").lcm
    try:
        lcm.ingest(KEY, talk(24))
        res = lcm.compact(KEY, force=True)
        assert res.ran and res.leaf_summaries and not res.fallback_summaries
        made = summaries(lcm)
        assert made and all(m == "tiny-summarizer" and s == "ok" for m, s, _ in made)
        assert "rolled back" in made[0][2]
        assert server.requests and {r.body["model"] for r in server.requests} == {"tiny-summarizer"}
    finally:
        lcm.close()


def test_expand_query_uses_the_expansion_model(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(lambda req: chat("The rollback came after a 503 [msg_1]."
                                        if "Question:" in req.user else "Deploys failed; rolled back."))
    lcm = runtime(tmp_path, server, LCM_SUMMARY_MODEL="tiny-summarizer",
                  LCM_EXPANSION_MODEL="big-reader").lcm
    try:
        lcm.ingest(KEY, talk(24))
        lcm.compact(KEY, force=True)
        before = len(server.requests)
        out = lcm.expand_query("why was the release rolled back?", query="rolled back", session_key=KEY)
        assert out.method == "llm" and "503" in out.answer
        asked = server.requests[before:]
        assert asked and {r.body["model"] for r in asked} == {"big-reader"}
    finally:
        lcm.close()


def test_unset_role_models_use_llm_model(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(chat("Deploys failed health checks; rolled back."))
    lcm = runtime(tmp_path, server).lcm
    try:
        lcm.ingest(KEY, talk(24))
        lcm.compact(KEY, force=True)
        assert {m for m, _, _ in summaries(lcm)} == {"note-model"}
        assert {r.body["model"] for r in server.requests} == {"note-model"}
    finally:
        lcm.close()


def test_summary_timeout_is_the_deadline_and_the_fallback_is_visible(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(slow(3.0, chat("too late")))
    lcm = runtime(tmp_path, server, LCM_SUMMARY_TIMEOUT_MS="300").lcm
    try:
        lcm.ingest(KEY, talk(24))
        started = time.monotonic()
        res = lcm.compact(KEY, force=True)
        assert time.monotonic() - started < 2.5  # not the 3 s the server takes, nor llm_deadline_s
        assert res.ran and res.fallback_summaries  # the result names the degraded summaries
        assert all(s == "fallback" for _, s, _ in summaries(lcm))
        assert lcm.doctor().checks["fallback_summaries"] == len(summaries(lcm))  # doctor's warning
    finally:
        lcm.close()


def test_one_client_and_one_breaker_for_both_stores(tmp_path: Path, server: FakeOpenAI) -> None:
    server.set_default(error(400))  # not retried: one failure per call, no backoff waits
    s = runtime(tmp_path, server, LCM_SUMMARY_MODEL="tiny-summarizer")
    memory = s.memory
    lcm = s.lcm
    try:
        client = s.llm
        assert client is not None
        assert memory.llm is client
        assert lcm.summarizer.llm.breaker is client.breaker and lcm.recall.llm.breaker is client.breaker
        lcm.ingest(KEY, talk(24))
        lcm.compact(KEY, force=True)  # the shared breaker counts the failures
        assert client.breaker.failures > 0
    finally:
        lcm.close()
        memory.close()
