"""``amem lcm browse|rewrite|repair|dissolve|transplant|backfill|prompts`` end to end (in process).

The repair is proven against the fake OpenAI-compatible server: summaries written while no LLM
was configured are upgraded once one is, through the runtime ``amem`` itself builds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import FakeOpenAI, Request, chat
from tools.cli.main import main

SMALL = {"LCM_LEAF_CHUNK_TOKENS": "150", "LCM_FRESH_TAIL_COUNT": "4", "LCM_LEAF_MIN_FANOUT": "2",
         "LCM_CONDENSED_MIN_FANOUT": "2", "LCM_SWEEP_MAX_DEPTH": "-1", "LCM_LOG_FILE_ENABLED": "false"}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    counter = iter(range(1, 10_000))
    srv.set_default(lambda req: chat(f"LLM summary {next(counter)}: {len(req.user)} chars of history"))
    yield srv
    srv.close()


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", **SMALL, **extra})
    return env


def run(capsys: pytest.CaptureFixture[str], env: dict[str, str], *args: str, code: int = 0) -> str:
    got = main(list(args), env=env)
    out, err = capsys.readouterr()
    assert got == code, (args, got, out, err)
    return out if code == 0 else err


def run_json(capsys: pytest.CaptureFixture[str], env: dict[str, str], *args: str) -> Any:
    return json.loads(run(capsys, env, *args, "--json"))


def transcript(path: Path, n: int, prefix: str = "old") -> Path:
    lines = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"{prefix} {i}: deployed service-{i}; port {8000 + i} answered 503, rolled back v{i}.2"}
             for i in range(n)]
    path.write_text("".join(json.dumps(m) + "\n" for m in lines), encoding="utf-8")
    return path


def test_backfill_then_repair_with_the_llm_once_one_is_configured(
        tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    plain = env_for(tmp_path / "home")
    file = transcript(tmp_path / "t.jsonl", 40)
    dry = run_json(capsys, plain, "lcm", "backfill", str(file), "--session-id", "s1")
    assert dry["applied"] is False and dry["message_count"] == 40
    assert run_json(capsys, plain, "lcm", "browse", "conversations")["conversations"] == []
    done = run_json(capsys, plain, "lcm", "backfill", str(file), "--session-id", "s1", "--apply")
    conv = done["conversation_id"]
    assert done["imported"] == 40 and done["summaries_made"] >= 3
    tree = run_json(capsys, plain, "lcm", "browse", "tree", str(conv))
    assert tree["roots"] and tree["by_depth"]["2"] == 1

    def models() -> set[str]:
        t = run_json(capsys, plain, "lcm", "browse", "tree", str(conv))
        out: set[str] = set()
        stack = list(t["roots"])
        while stack:
            n = stack.pop()
            out.add(n["model"])
            stack += n["sources"]
        return out

    assert models() == {"extractive"}
    err = run(capsys, plain, "lcm", "repair", "--all", code=1)
    assert "none is configured" in err

    llm = env_for(tmp_path / "home", AMEM_LLM_BASE_URL=server.url, AMEM_LLM_MODEL="note-model",
                  LCM_SUMMARY_MODEL="tiny-summarizer")
    plan = run_json(capsys, llm, "lcm", "repair", "--conversation", str(conv))
    assert plan["applied"] is False and len(plan["rewrites"]) == tree["summary_count"] and not plan["skipped"]
    assert models() == {"extractive"}  # the dry run wrote nothing
    text = run(capsys, llm, "lcm", "repair", "--conversation", str(conv), "--apply", "--diff")
    assert "+LLM summary" in text and "written" in text
    assert models() == {"tiny-summarizer"}
    assert {r.body["model"] for r in server.requests} == {"tiny-summarizer"}
    # the leaves were asked with the leaf prompt, the depth-2 node with the d2 one
    systems = [r.system for r in server.requests if isinstance(r, Request)]
    shown = run_json(capsys, llm, "lcm", "prompts", "show", "d2")
    assert shown["origin"] == "built-in" and shown["template"] in systems
    assert run_json(capsys, llm, "lcm", "repair", "--all")["rewrites"] == []  # nothing left to repair
    assert run_json(capsys, llm, "lcm", "doctor")["ok"] is True


def test_browse_rewrite_dissolve_and_transplant_from_the_command_line(
        tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    env = env_for(tmp_path / "home", AMEM_LLM_BASE_URL=server.url, AMEM_LLM_MODEL="m")
    conv = run_json(capsys, env, "lcm", "backfill", str(transcript(tmp_path / "t.jsonl", 40)), "--session-id", "s",
                    "--apply")["conversation_id"]
    run(capsys, env, "lcm", "ingest", str(transcript(tmp_path / "live.jsonl", 4, "live")), "--session-key", "agent:x:main")
    convs = run_json(capsys, env, "lcm", "browse", "conversations")["conversations"]
    live = next(c["id"] for c in convs if c["session_key"] == "agent:x:main")
    assert next(c for c in convs if c["id"] == conv)["message_count"] == 40
    window = run_json(capsys, env, "lcm", "browse", "messages", str(conv), "--limit", "10", "--newest")
    assert len(window["messages"]) == 10 and window["prev_before_seq"] is not None
    # the window before hands out the boundary message's id, which a merge's renumbering leaves alone
    said = run(capsys, env, "lcm", "browse", "messages", str(conv), "--limit", "10", "--newest")
    assert f"earlier: --before msg_{window['prev_before_id']}" in said
    before = run_json(capsys, env, "lcm", "browse", "messages", str(conv), "--limit", "10", "--before",
                      f"msg_{window['prev_before_id']}")
    assert before["messages"][-1]["seq"] == window["messages"][0]["seq"] - 1
    assert [m["id"] for m in run_json(capsys, env, "lcm", "browse", "messages", str(conv), "--limit", "10",
                                      "--before", str(window["prev_before_seq"]))["messages"]] == \
        [m["id"] for m in before["messages"]]  # a bare number is still a position
    assert "msg_999999" in run(capsys, env, "lcm", "browse", "messages", str(conv), "--after", "msg_999999", code=3)
    assert "--after" in run(capsys, env, "lcm", "browse", "messages", str(conv), "--after", "msg_x", code=2)
    ctx = run_json(capsys, env, "lcm", "browse", "context", str(conv), "--budget", "100000")
    root = ctx["items"][0]["id"]
    assert ctx["summary_count"] == 1 and ctx["tail_count"] == 4
    assert "0 files" in run(capsys, env, "lcm", "browse", "files")

    top = run_json(capsys, env, "lcm", "browse", "tree", str(conv))["roots"][0]
    assert top["id"] == root and top["kind"] == "condensed"
    level = {1: "d1", 2: "d2"}.get(top["depth"], "d3+")
    rewrite = run(capsys, env, "lcm", "rewrite", "--summary", root, "--diff")
    assert f"({level} prompt)" in rewrite and "dry run" in rewrite and "@@" in rewrite
    assert run(capsys, env, "lcm", "rewrite", "--all", code=2).strip().endswith("--depth and --all need --conversation ID")
    applied = run_json(capsys, env, "lcm", "rewrite", "--depth", "0", "--conversation", str(conv), "--apply")
    assert applied["applied"] is True and {r["depth"] for r in applied["rewrites"]} == {0}

    plan = run_json(capsys, env, "lcm", "dissolve", root)
    assert plan["applied"] is False and [r["summary_id"] for r in plan["restored"]] == [x["id"] for x in top["sources"]]
    run(capsys, env, "lcm", "dissolve", root, "--apply")
    after = run_json(capsys, env, "lcm", "browse", "context", str(conv), "--budget", "100000")
    assert [i["id"] for i in after["items"][:len(plan["restored"])]] == [r["summary_id"] for r in plan["restored"]]
    assert f"no summary {root}" in run(capsys, env, "lcm", "dissolve", root, code=3)  # purged

    moved = run_json(capsys, env, "lcm", "transplant", str(conv), str(live), "--apply")
    assert moved["applied"] is True and moved["root_ids"] == [r["summary_id"] for r in plan["restored"]]
    live_ctx = run_json(capsys, env, "lcm", "browse", "context", str(live), "--budget", "100000")
    assert [i["id"] for i in live_ctx["items"][:len(moved["root_ids"])]] == [moved["id_map"][r] for r in moved["root_ids"]]
    again = run(capsys, env, "lcm", "transplant", str(conv), str(live))
    assert "duplicate:" in again and "refused on --apply" in again
    assert "already holds" in run(capsys, env, "lcm", "transplant", str(conv), str(live), "--apply", code=2)


def test_prompts_export_edit_diff_and_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = env_for(tmp_path / "home")
    listed = run(capsys, env, "lcm", "prompts", "list")
    assert all(f"{lv} " in listed for lv in ("leaf", "d1", "d2", "d3+")) and "built-in" in listed
    folder = tmp_path / "prompts"
    assert len(run_json(capsys, env, "lcm", "prompts", "export", str(folder))["written"]) == 4
    assert "already exist" in run(capsys, env, "lcm", "prompts", "export", str(folder), code=2)
    (folder / "d1.txt").write_text("Merge the leaves; keep every id.\n")
    diff = run(capsys, env, "lcm", "prompts", "diff", str(folder))
    assert "+Merge the leaves; keep every id." in diff and "d1 (" in diff
    configured = env_for(tmp_path / "home", LCM_SUMMARY_PROMPTS_DIR=str(folder))
    assert run_json(capsys, configured, "lcm", "prompts", "show", "d1")["template"] == "Merge the leaves; keep every id."
    assert "+Merge the leaves" in run(capsys, configured, "lcm", "prompts", "diff")
    bad = env_for(tmp_path / "home", LCM_SUMMARY_PROMPTS_DIR=str(tmp_path / "missing"))
    assert "summaryPromptsDir" in run(capsys, bad, "lcm", "prompts", "list", code=2)


def test_rotate_then_restore_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = env_for(tmp_path / "home")
    key = "agent:main:main"
    run(capsys, env, "lcm", "ingest", str(transcript(tmp_path / "t.jsonl", 30)), "--session-key", key)
    text = run(capsys, env, "lcm", "rotate", "--session-key", key)
    assert "to compact: 26 messages" in text and "dry run" in text
    done = run_json(capsys, env, "lcm", "rotate", "--session-key", key, "--apply")
    backup = Path(done["backup"]["path"])
    assert done["applied"] and done["token_delta"] < 0 and backup.parent == tmp_path / "home" / "lcm-rotate-backups"
    restored = run_json(capsys, env, "lcm", "rotate", "--restore", str(backup), "--session-key", "restored:one",
                        "--apply")  # fmt: skip
    assert restored["applied"] and restored["conversation_id"] != done["conversation_id"]
    assert restored["counts"]["messages"] == 30
    assert "needs --session-key" in run(capsys, env, "lcm", "rotate", code=2)
    assert "no backup file" in run(capsys, env, "lcm", "rotate", "--restore", str(tmp_path / "nope.gz"), code=2)


def test_backfill_single_root_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = env_for(tmp_path / "home")
    file = transcript(tmp_path / "t.jsonl", 30)
    done = run_json(capsys, env, "lcm", "backfill", str(file), "--session-id", "s1", "--single-root", "--apply")
    assert done["single_root"] and done["root_summary_id"]
    tree = run_json(capsys, env, "lcm", "browse", "tree", str(done["conversation_id"]))
    assert [r["id"] for r in tree["roots"]] == [done["root_summary_id"]]
    text = run(capsys, env, "lcm", "backfill", str(file), "--session-id", "s1", "--single-root", "--apply")
    assert f"condensed to one root summary {done['root_summary_id']}" in text
