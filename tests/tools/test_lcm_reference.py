"""The lcm tools as lossless-claw's agents call them: its argument names, defaults and shapes.

Each test is one row of issue 15's "tool surface" list; every one of them failed on the
snake_case tools (unknown field, wrong default mode, no file search, no cap, silent fallback).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from amem import MemoryStore
from lcm import LcmStore
from lcm.config import load_config
from tests.lcm.conftest import ScriptedLLM, chat
from tools import ToolFacade
from tools.errors import is_error

ALICE, MALLORY = "agent:alice:main", "agent:mallory:main"
#: one line deep in a stored file, past the 4,000 characters describe shows first
NEEDLE = "needle-7f3a the rollback token is RB-2291"


def _open(llm: Any = None, **env: str) -> LcmStore:
    cfg = load_config(env={"LCM_LOG_FILE_ENABLED": "false", **env}, overrides={
        "leafChunkTokens": 1500, "freshTailCount": 8, "maxSweepIterations": 100,
        "condensedMinFanout": 2, "largeFileThresholdTokens": 1000})
    return LcmStore(":memory:", cfg, llm=llm)


def _big_file_text() -> str:
    lines = [f"line {i}: ordinary log output with nothing to see" for i in range(1, 400)]
    lines[299] = NEEDLE  # line 300
    return "\n".join(lines)


@pytest.fixture
def lcm() -> Iterator[LcmStore]:
    store = _open()
    store.ingest(ALICE, [{"role": "user", "content": "My flight to Lisbon is TP1234 on May 3rd"}])
    store.ingest(ALICE, [{"role": "tool", "content": _big_file_text()}])
    store.ingest(ALICE, chat(120))
    store.compact(ALICE, force=True)
    store.ingest("agent:alice:cron:nightly", [{"role": "user", "content": "nightly backup went to bucket amber-42"}])
    store.ingest(MALLORY, [{"role": "user", "content": "Mallory's bucket amber-99 and flight TP7777"}])
    store.ingest("agent:alice2:main", [{"role": "user", "content": "alice2's bucket amber-77"}])
    yield store
    store.close()


def _facade(memory: MemoryStore, lcm: LcmStore, agent: str) -> ToolFacade:
    return ToolFacade(memory, lcm, agent_id=agent)


def _file_id(lcm: LcmStore, key: str = ALICE) -> str:
    conv = lcm.conversation(key)
    assert conv is not None
    return str(lcm.db.scalar("SELECT file_id FROM large_files WHERE conversation_id = ?", (conv.id,)))


def _top_summary(lcm: LcmStore, key: str = ALICE) -> str:
    """The deepest summary of ``key``'s conversation (a condensed one, with sources below it)."""
    conv = lcm.conversation(key)
    assert conv is not None
    return str(lcm.db.scalar("SELECT summary_id FROM summaries WHERE conversation_id = ? "
                             "ORDER BY depth DESC LIMIT 1", (conv.id,)))


def test_reference_argument_names_are_accepted(memory: MemoryStore, lcm: LcmStore) -> None:
    alice = _facade(memory, lcm, "alice")
    top = _top_summary(lcm)
    conv = lcm.conversation(ALICE)
    assert conv is not None
    calls: list[tuple[str, dict[str, Any]]] = [
        # the reference's documented examples, verbatim in shape
        ("lcm_expand_query", {"prompt": "What is the flight number?", "query": "flight",
                              "timeoutMs": 150000}),
        ("lcm_expand_query", {"summaryIds": [top], "prompt": "which bug was fixed?",
                              "timeoutMs": 150000, "maxTokens": 500, "tokenCap": 2000,
                              "conversationId": conv.id}),
        ("lcm_expand_query", {"prompt": "bucket?", "query": "bucket", "allConversations": True,
                              "timeoutMs": 150000}),
        ("lcm_expand", {"summaryIds": [top], "maxDepth": 2, "tokenCap": 500}),
        ("lcm_describe", {"id": top, "conversationId": conv.id}),
        ("lcm_grep", {"pattern": "TP1234", "conversationId": conv.id, "limit": 5}),
        ("lcm_grep", {"pattern": "amber", "allConversations": True}),
    ]
    for name, args in calls:
        out = alice.call(name, args)
        assert not is_error(out), (name, args, out)
    # One naming style: no snake_case argument is left in any lcm schema.
    for tool in alice.list_tools():
        if tool["name"].startswith("lcm_"):
            assert not [p for p in tool["input_schema"]["properties"] if "_" in p], tool["name"]


def test_grep_defaults_to_regex_and_names_hit_fields_as_the_reference(
        memory: MemoryStore, lcm: LcmStore) -> None:
    alice = _facade(memory, lcm, "alice")
    out = alice.call("lcm_grep", {"pattern": r"TP\d{4}"})  # a regex with no mode given
    assert out["mode"] == "regex" and [h["snippet"] for h in out["hits"]][0].startswith("My flight")
    hit = out["hits"][0]
    assert {"type", "id", "conversationId", "createdAt", "snippet"} <= set(hit)
    assert hit["type"] == "message" and hit["role"] == "user" and "kind" not in hit
    summaries = alice.call("lcm_grep", {"pattern": "bug", "scope": "summaries"})["hits"]
    assert summaries and {h["type"] for h in summaries} == {"summary"}
    assert {h["kind"] for h in summaries} <= {"leaf", "condensed"} and "leaf" in {h["kind"] for h in summaries}


def test_all_conversations_covers_only_the_callers_own_sessions(
        memory: MemoryStore, lcm: LcmStore) -> None:
    alice, mallory = _facade(memory, lcm, "alice"), _facade(memory, lcm, "mallory")
    own = alice.call("lcm_grep", {"pattern": "amber"})["hits"]
    assert own == []  # the cron session is another family of alice's
    every = alice.call("lcm_grep", {"pattern": "amber-\\d+", "allConversations": True})["hits"]
    assert [h["snippet"] for h in every] == ["nightly backup went to bucket amber-42"]
    theirs = mallory.call("lcm_grep", {"pattern": "amber", "allConversations": True})["hits"]
    assert [h["snippet"] for h in theirs] == ["Mallory's bucket amber-99 and flight TP7777"]
    # The expansion tools read the same set and nothing more.
    answer = alice.call("lcm_expand_query", {"prompt": "which bucket?", "query": "bucket",
                                             "allConversations": True})
    assert "amber-42" in answer["answer"] and "amber-99" not in answer["answer"]
    assert "amber-77" not in answer["answer"]
    cron = lcm.conversation("agent:alice:cron:nightly")
    assert cron is not None and answer["sourceConversationIds"] == [cron.id]


def test_grep_files_gives_line_and_byte_offset(memory: MemoryStore, lcm: LcmStore) -> None:
    alice, mallory = _facade(memory, lcm, "alice"), _facade(memory, lcm, "mallory")
    fid = _file_id(lcm)
    for args in ({"pattern": "rollback token", "mode": "full_text", "scope": "files"},
                 {"pattern": r"RB-\d+", "scope": "files", "fileIds": [fid]}):
        out = alice.call("lcm_grep", args)
        assert [(h["type"], h["id"], h["line"]) for h in out["hits"]] == [("file", fid, 300)], out
        hit = out["hits"][0]
        raw = lcm.files.resolve(str(lcm.db.scalar(
            "SELECT storage_path FROM large_files WHERE file_id = ?", (fid,)))).read_bytes()
        assert raw[hit["byteOffset"]:].startswith(NEEDLE.encode()) or \
            raw[hit["byteOffset"]:].startswith(b"rollback token") or \
            raw[hit["byteOffset"]:].startswith(b"RB-2291")
    # Another agent can neither find nor name it.
    assert mallory.call("lcm_grep", {"pattern": "rollback", "scope": "files"})["hits"] == []
    assert mallory.call("lcm_grep", {"pattern": "x", "scope": "files", "fileIds": [fid]})[
        "error"]["code"] == "not_found"
    bad = alice.call("lcm_grep", {"pattern": "x", "fileIds": [fid]})  # fileIds needs scope files
    assert bad["error"]["code"] == "invalid_argument" and bad["error"]["field"] == "fileIds"


def test_describe_lists_file_ids_and_pages_a_file(memory: MemoryStore, lcm: LcmStore) -> None:
    alice = _facade(memory, lcm, "alice")
    fid = _file_id(lcm)
    msg = int(lcm.db.scalar("SELECT id FROM messages WHERE file_id = ?", (fid,)))
    leaf = str(lcm.db.scalar("SELECT summary_id FROM summary_messages WHERE message_id = ?", (msg,)))
    assert alice.call("lcm_describe", {"id": leaf})["fileIds"] == [fid]
    first = alice.call("lcm_describe", {"id": fid})
    assert first["type"] == "file" and first["storageName"].startswith(fid)
    assert NEEDLE not in first["sliceText"] and first["sliceTruncated"]
    at = _big_file_text().index(NEEDLE)
    later = alice.call("lcm_describe", {"id": fid, "offset": at, "limit": 200})
    assert later["sliceText"].startswith(NEEDLE) and later["sliceOffset"] == at


def test_max_expand_tokens_caps_the_tools(memory: MemoryStore) -> None:
    with _open(LCM_MAX_EXPAND_TOKENS="100") as lcm:
        lcm.ingest(ALICE, chat(120))
        lcm.compact(ALICE, force=True)
        alice = _facade(memory, lcm, "alice")
        top = str(lcm.db.scalar("SELECT summary_id FROM summaries ORDER BY depth DESC LIMIT 1"))
        for args in ({"summaryIds": [top]}, {"summaryIds": [top], "tokenCap": 50000},
                     {"query": "bug"}):
            out = alice.call("lcm_expand", args)
            assert out["totalTokens"] <= 100 and out["truncated"], (args, out["totalTokens"])
        answer = alice.call("lcm_expand_query", {"prompt": "which bug?", "summaryIds": [top]})
        assert answer["totalSourceTokens"] <= 100


def test_expand_query_marks_no_llm_and_fails_with_a_code(memory: MemoryStore) -> None:
    with _open() as plain:
        plain.ingest(ALICE, [{"role": "user", "content": "the wifi password is hunter2"}])
        out = _facade(memory, plain, "alice").call(
            "lcm_expand_query", {"prompt": "wifi password?", "query": "wifi"})
        assert out["method"] == "extractive" and any("no LLM" in w for w in out["warnings"])

    def slow(system: str, user: str) -> str:
        time.sleep(1.5)
        return "hunter2 [msg_1]"

    for script, code in (([RuntimeError("provider down")], "expansion_failed"),
                         ([slow], "timeout")):
        with _open(llm=ScriptedLLM(script)) as lcm:
            lcm.ingest(ALICE, [{"role": "user", "content": "the wifi password is hunter2"}])
            start = time.monotonic()
            out = _facade(memory, lcm, "alice").call(
                "lcm_expand_query", {"prompt": "wifi password?", "query": "wifi", "timeoutMs": 200})
            assert is_error(out) and out["error"]["code"] == code, out
            assert time.monotonic() - start < 1.0  # the deadline, not the model's pace
    with _open(llm=ScriptedLLM(["It is hunter2 [msg_1]."])) as lcm:
        lcm.ingest(ALICE, [{"role": "user", "content": "the wifi password is hunter2"}])
        out = _facade(memory, lcm, "alice").call(
            "lcm_expand_query", {"prompt": "wifi password?", "query": "wifi", "timeoutMs": 150000})
        assert out["method"] == "llm" and out["citedIds"] == ["msg_1"]
        assert out["sourceConversationIds"] == [lcm.conversation(ALICE).id]  # type: ignore[union-attr]


def test_describe_names_lineage_and_files_as_the_reference(memory: MemoryStore, lcm: LcmStore) -> None:
    # issue 26: the reference's parentIds are the summaries a condensed one was made from (what
    # recall walks down); ours said "children" for those. Files: fileName, mimeType, byteSize.
    alice = _facade(memory, lcm, "alice")
    top = _top_summary(lcm)
    out = alice.call("lcm_describe", {"id": top})
    assert out["parentIds"] and out["childIds"] == [] and "children" not in out and "parents" not in out
    below = alice.call("lcm_describe", {"id": out["parentIds"][0]})
    assert top in below["childIds"] and below["summary"]["depth"] < out["summary"]["depth"]
    walked = alice.call("lcm_expand", {"summaryIds": [top], "maxDepth": 1})
    assert out["parentIds"][0] in {s["id"] for s in walked["summaries"]}
    fid = _file_id(lcm)
    size = len(_big_file_text().encode())
    meta = alice.call("lcm_describe", {"id": fid})
    assert (meta["fileName"], meta["mimeType"], meta["byteSize"]) == (meta["fileName"], "text/plain", size)
    assert meta["fileName"] and "content" not in meta and "contentTruncated" not in meta


def test_expand_file_inlines_the_file_up_to_its_cap(memory: MemoryStore, lcm: LcmStore) -> None:
    alice = _facade(memory, lcm, "alice")
    fid, text = _file_id(lcm), _big_file_text()
    whole = alice.call("lcm_describe", {"id": fid, "expandFile": True})
    assert (whole["content"], whole["contentTruncated"]) == (text, False)  # 20 kB under the 32 KiB default
    cut = alice.call("lcm_describe", {"id": fid, "expandFile": True, "expandFileMaxBytes": 1024})
    assert cut["contentTruncated"] is True and text.startswith(cut["content"])
    assert 1000 < len(cut["content"].encode()) <= 1024
    bad = alice.call("lcm_describe", {"id": fid, "expandFile": True, "expandFileMaxBytes": 10})
    assert bad["error"]["code"] == "invalid_argument"
    # the server's cap is the lossless-claw key expandFileMaxBytes (it made such a config fail to load)
    small = _open(LCM_EXPAND_FILE_MAX_BYTES="2048")
    assert load_config(overrides={"expandFileMaxBytes": 4096}).expand_file_max_bytes == 4096
    small.ingest(ALICE, [{"role": "tool", "content": text}])
    own = str(small.db.scalar("SELECT file_id FROM large_files"))
    described = small.describe(own, expand_file=True)
    assert described.content_truncated and len((described.content or "").encode()) <= 2048  # type: ignore[union-attr]
    small.close()


def test_a_cut_inside_a_character_leaves_it_out_whole(tmp_path: Any) -> None:
    from lcm.largefiles import LargeFileStore

    files = LargeFileStore(tmp_path)
    stored = files.store(1, "é" * 700, "accents.txt")  # 2 bytes each
    text, more = files.read_head(stored.file_id, stored.storage_path, 1025)
    assert more and text == "é" * 512


def test_grep_hits_carry_summary_ids_and_the_matched_file_text(memory: MemoryStore, lcm: LcmStore) -> None:
    alice = _facade(memory, lcm, "alice")
    summaries = alice.call("lcm_grep", {"pattern": "bug", "scope": "summaries"})["hits"]
    assert summaries and all(h["summaryId"] == h["id"] for h in summaries)
    messages = alice.call("lcm_grep", {"pattern": "TP1234", "scope": "messages"})["hits"]
    assert messages and all("summaryId" not in h for h in messages)
    fid = _file_id(lcm)
    for args, matched in (({"pattern": r"RB-\d+", "scope": "files", "fileIds": [fid]}, "RB-2291"),
                          ({"pattern": "token rollback", "mode": "full_text", "scope": "files"}, "rollback token")):
        (hit,) = alice.call("lcm_grep", args)["hits"]
        assert (hit["matchText"], hit["line"]) == (matched, 300)
        raw = _big_file_text().encode()
        assert raw[hit["byteOffset"]:].startswith(matched.encode())
