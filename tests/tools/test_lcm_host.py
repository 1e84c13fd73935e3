"""A way in for hosts, and a lossless-claw environment, through the real ``amem`` console script.

``amem lcm ingest FILE`` (idempotent, replay-guarded, a bad line names its number and stores
nothing), ``amem lcm assemble``, ``amem --version``, and ``amem lcm status`` under the
reference's variables for keys that do not apply here (they used to stop the CLI with exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[2]
KEY = "agent:host:main"

pytestmark = pytest.mark.slow


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def amem(env: dict[str, str], *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(AMEM), *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def amem_json(env: dict[str, str], *args: str, code: int = 0) -> Any:
    return json.loads(amem(env, *args, "--json", code=code).stdout)


def write(path: Path, messages: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


def turns(start: int, n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: the invoice {1000 + i} is paid"}
            for i in range(start, start + n)]


def stored_messages(env: dict[str, str]) -> int:
    status = amem_json(env, "lcm", "status")
    return int(status["messages"])


def test_ingest_is_idempotent_and_assemble_prints_the_context(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    src = write(tmp_path / "t.jsonl", turns(0, 30))
    first = amem_json(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert (first["read"], first["stored"]) == (30, 30)
    again = amem_json(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert (again["stored"], again["skipped_duplicates"]) == (0, 30)
    write(src, turns(0, 32))  # the host's transcript grew by two lines
    grown = amem_json(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert (grown["stored"], grown["skipped_duplicates"]) == (2, 30)
    assert stored_messages(env) == 32

    ctx = amem_json(env, "lcm", "assemble", "--session-key", KEY, "--budget", "100000")
    assert [it["content"] for it in ctx["items"]][-1] == "turn 31: the invoice 1031 is paid"
    assert ctx["total_tokens"] > 0 and ctx["conversation_id"] == first["conversation_id"]
    text = amem(env, "lcm", "assemble", "--session-key", KEY, "--budget", "100000").stdout
    assert "[assistant] turn 31: the invoice 1031 is paid" in text and "of 100000 tokens" in text


def test_a_bad_line_is_named_and_nothing_is_stored(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    bad = turns(0, 4)
    bad[2]["role"] = "robot"
    done = amem(env, "lcm", "ingest", str(write(tmp_path / "bad.jsonl", bad)), "--session-key", KEY, code=2)
    assert "line 3" in done.stderr and "robot" in done.stderr
    src = tmp_path / "broken.jsonl"
    src.write_text(json.dumps(turns(0, 1)[0]) + "\n{not json\n", encoding="utf-8")
    done = amem(env, "lcm", "ingest", str(src), "--session-key", KEY, code=2)
    assert "line 2" in done.stderr
    assert stored_messages(env) == 0


def test_a_replay_flood_is_refused(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    flood = [{"role": "user", "content": "again", "created_at": "2025-01-01T00:00:00Z"}] * 10
    done = amem(env, "lcm", "ingest", str(write(tmp_path / "f.jsonl", flood)), "--session-key", KEY, code=2)
    assert "replay" in done.stderr and "Nothing was stored" in done.stderr
    assert stored_messages(env) == 0


def test_a_transcript_that_repeats_itself_is_stored_whole(tmp_path: Path) -> None:
    # A user who says "continue" four times and an assistant that says "Done." forty times:
    # lines without times all take the ingest's second, but each is keyed by its line, so
    # none of them is a replay (they were refused whole as a flood).
    env = env_for(tmp_path / "home")
    said = [{"role": "user", "content": "continue"}, {"role": "assistant", "content": "Done."}] * 40
    done = amem_json(env, "lcm", "ingest", str(write(tmp_path / "t.jsonl", said)), "--session-key", KEY)
    assert (done["read"], done["stored"], done["skipped_duplicates"]) == (80, 80, 0)
    again = amem_json(env, "lcm", "ingest", str(tmp_path / "t.jsonl"), "--session-key", KEY)
    assert (again["stored"], again["skipped_duplicates"]) == (0, 80)  # still idempotent
    assert stored_messages(env) == 80


def test_a_refusal_after_a_stored_batch_says_what_is_kept(tmp_path: Path) -> None:
    # The file goes in 500 messages a transaction: a later batch refused leaves the earlier
    # ones stored, and the error must say so (it said "Nothing was stored").
    env = env_for(tmp_path / "home")
    first = [{"role": "user", "content": f"distinct {i}", "created_at": f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}Z"}
             for i in range(500)]
    flood = [{"role": "user", "content": "ping", "created_at": "2025-01-01T09:00:00Z", "event_id": f"p{i}"}
             for i in range(10)]
    src = write(tmp_path / "mid.jsonl", first + flood)
    done = amem(env, "lcm", "ingest", str(src), "--session-key", KEY, code=2)
    assert "Nothing was stored" not in done.stderr
    assert "from line 501 on was refused" in done.stderr and "500 messages before it are kept" in done.stderr
    assert stored_messages(env) == 500
    write(src, first + flood[:3])  # fixed: fed again, the kept lines are already there
    again = amem_json(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert (again["stored"], again["skipped_duplicates"]) == (3, 500)


def test_stdin_runs_keep_their_repeats_and_a_skip_is_said(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    line = json.dumps({"role": "user", "content": "continue"}) + "\n"

    def pipe(*extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(AMEM), "lcm", "ingest", "-", "--session-key", KEY, "--json", *extra], input=line,
                              env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return done

    # one turn a call, each run with its own id: three runs, three messages (two were lost)
    for run in ("run1", "run2", "run3"):
        assert json.loads(pipe("--session-id", run).stdout)["stored"] == 1
    assert stored_messages(env) == 3
    # the same run's line 1 again is taken as stored, and the result says why
    again = json.loads(pipe("--session-id", "run3").stdout)
    assert again["stored"] == 0 and again["skipped_duplicates"] == 1
    assert len(again["warnings"]) == 1 and "--session-id" in again["warnings"][0]
    plain = subprocess.run([str(AMEM), "lcm", "ingest", "-", "--session-key", KEY, "--session-id", "run3"],
                           input=line, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert plain.returncode == 0 and "amem: warning: 1 line was taken as already stored" in plain.stderr


def test_a_transcript_that_is_not_utf8_is_named_by_line(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    src = tmp_path / "bad.jsonl"
    src.write_bytes(json.dumps(turns(0, 1)[0]).encode() + b"\n\xff\xfe not text\n")
    done = amem(env, "lcm", "ingest", str(src), "--session-key", KEY, code=2)
    assert f"{src}:2: not UTF-8 text (byte 0xff)" in done.stderr
    assert stored_messages(env) == 0


def test_version_and_a_lossless_claw_environment(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home", LCM_ENABLE_SUMMARY_THINKING="true", LCM_STUB_LARGE_TOOL_PAYLOADS="false",
                  LCM_CRITICAL_BUDGET_PRESSURE_RATIO="0.9", LCM_INCREMENTAL_MAX_DEPTH="2")
    assert amem(env, "--version").stdout.strip().startswith("amem 0.")
    status = amem_json(env, "lcm", "status")
    assert "ignoredKeys" not in status  # one spelling, the status's own
    assert status["ignored_keys"] == ["LCM_CRITICAL_BUDGET_PRESSURE_RATIO", "LCM_ENABLE_SUMMARY_THINKING",
                                     "LCM_STUB_LARGE_TOOL_PAYLOADS"]
    assert status["llm"] is None  # no llm_base_url: summaries are extractive, and status says so
    with_llm = amem_json({**env, "AMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "AMEM_LLM_MODEL": "main-model",
                          "LCM_SUMMARY_MODEL": "small-model"}, "lcm", "status")
    assert with_llm["llm"] == {"summaryModel": "small-model", "expansionModel": "main-model", "circuit": "closed"}


CLAUDE_CODE: list[dict[str, Any]] = [
    {"type": "summary", "summary": "Fixing the deploy", "leafUuid": "u0"},
    {"type": "user", "uuid": "u1", "sessionId": "s1", "timestamp": "2025-03-01T10:00:00Z",
     "message": {"role": "user", "content": "why does the deploy fail with exit 137?"}},
    {"type": "assistant", "uuid": "u2", "sessionId": "s1", "timestamp": "2025-03-01T10:00:05Z",
     "message": {"role": "assistant", "model": "m", "content": [
         {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Let me read the pod log."},
         {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "kubectl logs api"}}]}},
    {"type": "user", "uuid": "u3", "sessionId": "s1", "timestamp": "2025-03-01T10:00:09Z",
     "message": {"role": "user", "content": [
         {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "OOMKilled"}]}]}},
    {"type": "system", "uuid": "u4", "sessionId": "s1", "subtype": "stop_hook_summary"},
]
CODEX: list[dict[str, Any]] = [
    {"timestamp": "2025-03-01T10:00:00Z", "type": "session_meta", "payload": {"id": "t1", "cwd": "/w"}},
    {"timestamp": "2025-03-01T10:00:01Z", "type": "response_item",
     "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the tests"}]}},
    {"timestamp": "2025-03-01T10:00:02Z", "type": "response_item",
     "payload": {"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"pytest\"}", "call_id": "c1"}},
    {"timestamp": "2025-03-01T10:00:04Z", "type": "response_item",
     "payload": {"type": "function_call_output", "call_id": "c1", "output": "3 failed, 40 passed"}},
    {"timestamp": "2025-03-01T10:00:05Z", "type": "event_msg", "payload": {"type": "token_count"}},
    {"timestamp": "2025-03-01T10:00:06Z", "type": "response_item",
     "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "3 tests fail"}]}},
]


def test_transcript_formats_are_read_into_messages() -> None:
    from tools.transcripts import detect, to_messages

    assert detect(CLAUDE_CODE[0]) == "claude-code" and detect(CODEX[0]) == "codex"
    assert detect({"role": "user", "content": "x"}) == "jsonl"
    claude = [m for obj in CLAUDE_CODE for m in to_messages(obj, "claude-code")]
    assert [(m["role"], m["content"]) for m in claude] == [
        ("user", "why does the deploy fail with exit 137?"), ("assistant", "Let me read the pod log."),
        ("tool", "OOMKilled")]
    assert claude[1]["tool_calls"][0]["name"] == "Bash" and claude[2]["tool_call_id"] == "toolu_1"
    assert claude[0]["event_id"] == "u1" and claude[0]["created_at"] == "2025-03-01T10:00:00Z"
    codex = [m for obj in CODEX for m in to_messages(obj, "codex")]
    assert [(m["role"], m["content"]) for m in codex] == [
        ("user", "run the tests"), ("assistant", ""), ("tool", "3 failed, 40 passed"), ("assistant", "3 tests fail")]
    assert codex[1]["tool_calls"][0]["id"] == "c1" and codex[2]["tool_call_id"] == "c1"


def test_host_transcripts_ingest_once(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    claude = amem_json(env, "lcm", "ingest", str(write(tmp_path / "s1.jsonl", CLAUDE_CODE)), "--session-key", KEY)
    assert (claude["format"], claude["stored"], claude["lines_without_messages"]) == ("claude-code", 3, 2)
    codex = amem_json(env, "lcm", "ingest", str(write(tmp_path / "rollout.jsonl", CODEX)),
                      "--session-key", "agent:host:codex")
    assert (codex["format"], codex["stored"]) == ("codex", 4)
    again = amem_json(env, "lcm", "ingest", str(tmp_path / "s1.jsonl"), "--session-key", KEY)
    assert (again["stored"], again["skipped_duplicates"]) == (0, 3)
    hits = amem_json(env, "lcm", "grep", "OOMKilled", "--session-key", KEY)
    assert hits["hits"]


def test_raw_line_and_paragraph_separators_inside_a_string_stay_in_their_line(tmp_path: Path) -> None:
    # JSON allows U+2028, U+2029 and U+0085 raw in a string (Node's JSON.stringify leaves the
    # first two): split on them, the line was refused as "not valid JSON". CRLF lines still read.
    env = env_for(tmp_path / "home")
    said = ["a\u2028b", "c\u2029d", "e\u0085f", "g\x1ch\x1di\x1ej\x0bk\x0cl"]
    src = tmp_path / "sep.jsonl"
    src.write_text("".join(json.dumps({"role": "user", "content": c}, ensure_ascii=False) + "\r\n" for c in said),
                   encoding="utf-8", newline="")  # fmt: skip
    done = amem_json(env, "lcm", "ingest", str(src), "--session-key", KEY)
    assert (done["read"], done["stored"]) == (4, 4)
    ctx = amem_json(env, "lcm", "assemble", "--session-key", KEY, "--budget", "100000")
    assert [it["content"] for it in ctx["items"]] == said
