"""The LLM merge: the model's unified text through LLMClient, and the offline fallback."""

from __future__ import annotations

import json
from typing import Any

import httpx

from amem import MemoryStore
from amem.kernel.clock import ManualClock
from amem.errors import LLMError
from amem.llm import LLMClient, LLMConfig

from .conftest import TableEmbedder, angle_vector, link_problems, open_store, put


def seed(store: MemoryStore) -> None:
    put(store, "s", "Frank's dentist appointment is on May 4 at 10am", vector=angle_vector(0),
        keywords=["dentist"], retrieval_count=1, links=["o"])
    put(store, "l", "Frank sees the dentist May 4", vector=angle_vector(10), tags=["health"],
        retrieval_count=4)
    put(store, "o", "Other note", vector=angle_vector(0, axis=3), links=["l", "s"])


def client(replies: list[Any], seen: list[dict[str, Any]]) -> LLMClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        item = replies.pop(0)
        if isinstance(item, int):
            return httpx.Response(item, json={"error": {"message": "boom"}})
        body = {"choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": json.dumps(item)}}]}
        return httpx.Response(200, json=body)

    config = LLMConfig(base_url="http://llm.test/v1", model="merge-model", max_retries=0)
    return LLMClient(config, http=httpx.Client(transport=httpx.MockTransport(handler)),
                     sleep=lambda _: None)


def test_llm_merge_writes_the_models_unified_note(table: TableEmbedder, clock: ManualClock) -> None:
    seen: list[dict[str, Any]] = []
    reply = {"content": "Frank's dentist appointment: May 4, 10am.", "context": "Frank's health",
             "keywords": ["appointment"], "tags": ["calendar"]}
    llm = client([reply], seen)
    with open_store("edge", table, clock, llm=llm) as store:
        seed(store)
        report = store.consolidate()
        assert report.to_dict()["llm_merges"] == 1 and report.warnings == []
        note = store.get("s")
        assert note.content == "Frank's dentist appointment: May 4, 10am."
        assert note.context == "Frank's health"
        assert note.keywords == ["appointment", "dentist"] and note.tags == ["calendar", "health"]
        assert note.retrieval_count == 5 and note.enriched_by == "llm:merge-model"
        entry = note.evolution_history[-1]
        assert entry["merged_by"] == "llm:merge-model"
        assert entry["old_content"] == "Frank's dentist appointment is on May 4 at 10am"
        assert entry["merged_text"] == "Frank sees the dentist May 4"
        # both originals stay findable by exact dedup
        loser = store.get("l", include_inactive=True)
        assert loser.hash in note.folded_hashes
        assert "Frank sees the dentist May 4" in seen[0]["messages"][1]["content"]
        assert link_problems(store) == []
        assert store.consolidate().merges == 0  # the merged note is not merged again


def test_llm_failure_falls_back_to_offline_and_says_so(table: TableEmbedder, clock: ManualClock) -> None:
    llm = client([500], [])
    with open_store("edge", table, clock, llm=llm) as store:
        seed(store)
        report = store.consolidate()
        data = report.to_dict()
        assert data["merges"] == 1 and data["llm_fallbacks"] == 1 and data["llm_merges"] == 0
        assert "merged offline" in report.warnings[0]
        note = store.get("s")
        # the offline merge keeps the loser's sentence where search reads it: it says "sees",
        # a term the survivor lacks (amem.consolidate.merge.merged_text)
        assert note.content == "Frank's dentist appointment is on May 4 at 10am\n\nFrank sees the dentist May 4"
        entry = note.evolution_history[-1]
        assert entry["merged_by"] == "offline" and "LLMError" in entry["llm_error"]
        assert entry["old_content"] == "Frank's dentist appointment is on May 4 at 10am"


class ScriptedLLM:
    """The one-method LLM seam, answering from a list (an LLMError item is raised)."""

    model = "scripted"

    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.calls = 0

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        self.calls += 1
        item = self.replies.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def test_unusable_reply_is_refused_and_merged_offline(table: TableEmbedder, clock: ManualClock) -> None:
    llm = ScriptedLLM([{"content": "  ", "context": "", "keywords": [], "tags": []}])
    with open_store("qdrant-local", table, clock, llm=llm) as store:
        seed(store)
        report = store.consolidate()
        assert report.to_dict()["llm_fallbacks"] == 1
        assert "LLMResponseError" in store.get("s").evolution_history[-1]["llm_error"]


def test_scripted_error_falls_back(table: TableEmbedder, clock: ManualClock) -> None:
    llm = ScriptedLLM([LLMError("circuit open")])
    with open_store("qdrant-local", table, clock, llm=llm) as store:
        seed(store)
        assert store.consolidate().to_dict()["llm_fallbacks"] == 1 and llm.calls == 1


def test_an_llm_merge_is_separated_back_to_both_notes(table: TableEmbedder,
                                                      clock: ManualClock) -> None:
    """The model rewrote the survivor's text whole: separating gives it its own text, context,
    lists and enrichment mark back (``old_content``, recorded by the merge), and the loser
    comes back as it was (before 2026-12-06 a merge had no undo)."""
    reply = {"content": "Frank's dentist appointment: May 4, 10am.", "context": "Frank's health",
             "keywords": ["appointment"], "tags": ["calendar"]}
    with open_store("edge", table, clock, llm=client([reply], [])) as store:
        seed(store)
        before = store.get("s", record_usage=False)
        assert store.consolidate().to_dict()["llm_merges"] == 1
        result = store.separate("s", "l")
        assert result.text_restored and result.note == "l" and not result.warnings
        s, loser = store.get("s", record_usage=False), store.get("l", record_usage=False)
        assert (s.content, s.context, s.keywords, s.tags, s.enriched_by) == (
            before.content, before.context, before.keywords, before.tags, before.enriched_by)
        assert loser.content == "Frank sees the dentist May 4" and loser.tags == ["health"]
        assert store.consolidate().merges == 0  # kept apart: no second LLM call either
