"""Chat exports in the shapes real ones have, read in-process (``tests/fixtures/chat_exports``).

The fixtures are written for these tests (no copied text, no personal data) in the shapes found
in public repositories that parse real exports (the findings of the "chat3" work list them):
ChatGPT's voice turns, web-search tool traffic, citation markers, DALL-E output, hidden context
and app content; claude.ai's ``files``/``files_v2`` pairs, ``knowledge`` search hits,
``token_budget`` markers and a tool call the user stopped. Each test asserts what a user would
miss: a visible message's text, a count in the report, a shape that must not cost the rest.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore
from tools.chats import chatgpt, claude
from tools.chats import StreamError
from tools.chats.load import ExportLimits, ExportRejected, load_export, session_key, sniff

from .chat_exports import chatgpt_chain

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_exports"
GPT = FIXTURES / "chatgpt_real_shapes.json"
CLAUDE = FIXTURES / "claude_real_shapes.json"


def items(path: Path) -> list[Any]:
    return list(json.loads(path.read_text(encoding="utf-8")))


def by_id(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["event_id"]: m for m in messages}


def test_every_message_a_chatgpt_user_saw_keeps_its_text() -> None:
    conv = chatgpt.convert(1, items(GPT)[0])
    got = by_id(conv.messages + conv.branches)
    seen = {  # node -> the words the app shows (or the tool gave the model)
        "u1": "Which of these two routes to the office is shorter, the canal or the park?",
        "a1": "The canal route is shorter: 7.2 km against 8.0 km",
        "u2": "And which one is better when it rains?",  # a voice turn: its transcript
        "a2": "In the rain take the park route: it has tree cover.",
        "q1": "The canal path is 7.2 km with two traffic lights.",
        "sw1": "The park route is 8.0 km and closes at dusk.",
        "out1": "0.8", "err1": "The map tool timed out.",
        "u3": "Draw both routes as a little map.", "a3": "Here is the map; the canal is the blue line.",
        "a3x": "I could not draw the map.",  # regenerated away: in the branches
        "app1": "2024-12-01 park 24 min", "ctx0": "Keep answers under five sentences.",
        "t1": "7.2 km along the canal",  # a search's hit, kept in the tool message's metadata
    }
    for node, words in seen.items():
        assert words in got[node]["content"], node
    assert [m["event_id"] for m in conv.messages][-1] == "a3"
    assert "https://cycling.example/park" in got["sw1"]["content"]  # a page the search opened: its address
    assert got["app1"]["content"].startswith("Terminal - bike-log")


def test_chatgpt_voice_parts_and_citation_markers_are_no_noise() -> None:
    conv = chatgpt.convert(1, items(GPT)[0])
    texts = [m["content"] for m in conv.messages]
    # a voice turn's recording was stored as its JSON (expiry, timestamps) in the user's words
    assert not any("audio_asset_pointer" in t or "expiry_datetime" in t for t in texts)
    got = by_id(conv.messages)
    assert got["u2"]["content"] == ("And which one is better when it rains?\n"
                                    "[audio: wav, sediment://file_00000000b7c8d9e0f1a2b3c4]")
    # the marker (private-use characters around "cite turn0search0") becomes the source it names
    assert not any(ch in t for t in texts for ch in "\ue200\ue201\ue202")
    assert got["a1"]["content"] == ("The canal route is shorter: 7.2 km against 8.0 km "
                                    "([cycling.example](https://cycling.example/canal)).")


def test_chatgpt_counts_what_it_left_out_and_what_it_kept_by_kind() -> None:
    conv = chatgpt.convert(1, items(GPT)[0])
    # empty: the blank system node, the empty memory note, a file search's spinner
    assert conv.left_out == {"empty": 3, "reasoning": 2}
    assert conv.kept == {"hidden": 1, "tool_output": 6}
    # the photo, the generated map; the voice recording, the spoken answer (the attached photo is
    # the image part itself: counted once)
    assert conv.placeholders == {"image": 2, "audio": 2}
    assert conv.warnings == []  # every type in it is known


def test_a_chatgpt_shape_this_reader_does_not_know_costs_only_itself() -> None:
    conv = chatgpt.convert(2, items(GPT)[1])
    got = by_id(conv.messages)
    assert list(got) == ["o1", "o2", "o3", "o5"]
    assert (got["o2"]["role"], got["o2"]["name"]) == ("system", "critic")  # an unknown role, named
    assert got["o3"]["content"] == '{"frames": [{"caption": "4.5 bar front"}]}'  # an unknown type, as JSON
    assert got["o5"]["content"] == "4.5 bar front and 5 bar rear."
    assert conv.left_out == {"unreadable": 1}
    who = "conversation 2 ('Tyre pressure', id 6751a3c2-7d10-800c-9e1f-3b2a1c0d9e90)"
    assert conv.warnings == [
        f"{who}: 1 message of content type 'hologram_text', which this reader does not know, kept as their "
        "text (or their JSON)",
        f"{who}: 1 message of author role 'critic', which this reader does not know, kept as system messages "
        "named 'critic'",
        f"{who}: 1 message that could not be read, left out (the rest of the conversation is kept): node 'o4' "
        "(its content is not an object)"]


def test_claude_keeps_uploads_once_search_hits_whole_and_drops_budget_markers() -> None:
    conv = claude.convert(1, items(CLAUDE)[0])
    got = by_id(conv.messages)
    # the upload is in files and again in files_v2: one placeholder, an image by its kind
    assert got["c-1"]["content"] == ("What does the attached ledger say about March?\n"
                                     "[file: text/csv, ledger-2025.csv]\nmonth,spent\nFebruary,410\nMarch,388\n"
                                     "[image: receipt-march.jpg]")
    assert got["c-2#1"]["content"] == ("Monthly rates\nhttps://rates.example/2025-03\n"
                                       "March 2025 average: 1.08 USD per EUR.")
    # the token_budget block between the result and the answer was stored as its JSON
    assert got["c-2#2"]["content"] == "March was 388 EUR, about 419 USD."
    # the call the user stopped (no id, no result, a hollow text) is kept as the call
    assert got["c-4"]["tool_calls"][0]["name"] == "web_fetch" and got["c-4"]["content"] == ""
    assert "Summarise March in one line please." in got["c-5"]["content"]  # a block type it does not know
    assert conv.left_out == {"reasoning": 1, "internal": 1}
    assert conv.kept == {"tool_output": 1}
    assert conv.placeholders == {"file": 1, "image": 1}
    assert conv.warnings == ["conversation 1 (id 3f1e2d4c-5b6a-4789-9abc-def012345678): 1 content block of type "
                             "'voice_note', which this reader does not know, kept as their text (or their JSON)"]


def test_a_claude_sender_or_item_it_does_not_know_costs_only_itself() -> None:
    export = items(CLAUDE)[0]
    export["chat_messages"][4]["sender"] = "narrator"
    export["chat_messages"].insert(2, "not a message")
    conv = claude.convert(1, export)
    got = by_id(conv.messages)
    assert (got["c-5"]["role"], got["c-5"]["name"]) == ("system", "narrator")
    assert got["c-6"]["content"] == "March: 388 EUR spent, 22 less than February."
    assert conv.left_out["unreadable"] == 1
    assert any("1 of chat_messages not a message object, left out" in w and "item 3" in w for w in conv.warnings)
    assert any("sender 'narrator'" in w for w in conv.warnings)


def test_both_real_shape_exports_load_and_the_report_says_what_it_did() -> None:
    with LcmStore(":memory:") as lcm:
        gpt = load_export(lcm, GPT, "chatgpt", "alice")
        again = load_export(lcm, GPT, "chatgpt", "alice")
        cl = load_export(lcm, CLAUDE, "claude", "alice")
        hits = lcm.grep("tree cover", mode="full_text", session_key=session_key(
            "alice", "chatgpt", "6751a3c2-7d10-800c-9e1f-3b2a1c0d9e8f")).hits
    assert (gpt.conversations, gpt.conversations_stored, gpt.invalid) == (2, 2, 0)
    assert gpt.to_dict()["left_out"] == {"empty": 3, "reasoning": 2, "unreadable": 1}
    assert gpt.to_dict()["kept"] == {"hidden": 1, "tool_output": 6}
    assert gpt.to_dict()["placeholders"] == {"audio": 2, "image": 2}
    assert gpt.warning_count == 3
    assert (again.stored, again.skipped_duplicates) == (0, gpt.stored)  # the second import stores nothing
    assert (cl.stored, cl.to_dict()["left_out"]) == (8, {"internal": 1, "reasoning": 1})
    assert len(hits) == 1  # the spoken answer is found by its words


def test_a_sharded_chatgpt_zip_loads_every_shard_in_order(tmp_path: Path) -> None:
    # exports since 2026 split conversations.json into conversations-000.json, ... (listed in
    # export_manifest.json); a zip of shards held "no conversations.json" for this reader
    gpt = items(GPT)
    bundle = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("export_manifest.json", json.dumps({"version": 1, "logical_files": {"conversations.json": {
            "files": ["conversations-000.json", "conversations-010.json", "conversations-002.json"],
            "sharded": True}}}))
        z.writestr("conversations-010.json", json.dumps([chatgpt_chain("c-late", 2)]))
        z.writestr("conversations-000.json", json.dumps(gpt[:1]))
        z.writestr("conversations-002.json", json.dumps(gpt[1:]))
        z.writestr("chat.html", "<html></html>")
    assert sniff(bundle) == "chatgpt"
    with LcmStore(":memory:") as lcm:
        report = load_export(lcm, bundle, "chatgpt", "alice")
        order = [str(c.session_key) for c in lcm.conversations()]
    assert (report.conversations, report.conversations_stored, report.invalid) == (3, 3, 0)
    assert order[0].endswith("6751a3c2-7d10-800c-9e1f-3b2a1c0d9e8f") and order[-1].endswith("c-late")
    # a bad conversation is named by its shard, and numbered in the whole export
    broken = chatgpt_chain("c-bad", 2)
    broken["current_node"] = "nope"
    with zipfile.ZipFile(bundle, "a") as z:
        z.writestr("conversations-011.json", json.dumps([broken]))
    with LcmStore(":memory:") as lcm, pytest.raises(ExportRejected) as refused:
        load_export(lcm, bundle, "chatgpt", "alice")
    assert f"{bundle}:conversations-011.json:1: conversation 4 ('A long chat', id c-bad)" in str(refused.value)


def test_an_export_inside_an_object_is_read_as_the_array_it_wraps(tmp_path: Path) -> None:
    # {"conversations": [...]} (what some tools save, and the unofficial export specification
    # says some exports are) was refused with a jq line that unwrapped it: it is read directly now
    wrapped = tmp_path / "export.json"
    wrapped.write_text(json.dumps({"account": {"uuid": "acct-0000"}, "conversations": items(CLAUDE),
                                   "exported_at": "2025-10-02"}, indent=1), encoding="utf-8")
    assert sniff(wrapped) == "claude"
    with LcmStore(":memory:") as lcm:
        got = load_export(lcm, wrapped, "claude", "alice")
        bare = load_export(lcm, CLAUDE, "claude", "alice")  # the same conversations, unwrapped
    assert (got.conversations, got.conversations_stored, got.stored, got.invalid) == (1, 1, 8, 0)
    assert (bare.stored, bare.skipped_duplicates) == (0, 8)  # the same ids: one conversation, stored once
    # a bad conversation inside is named by its line in the file, as in a bare array
    gpt = items(GPT)
    gpt[1]["current_node"] = "nope"
    wrapped.write_text(json.dumps({"conversations": gpt}, indent=1), encoding="utf-8")
    line = 1 + wrapped.read_text(encoding="utf-8").splitlines().index("  {", 3)
    with LcmStore(":memory:") as lcm, pytest.raises(ExportRejected, match=rf"export\.json:{line}: conversation 2 "):
        load_export(lcm, wrapped, "chatgpt", "alice")
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"conversations": [{"role": "user", "content": "hi"}]}), encoding="utf-8")
    assert sniff(other) is None  # not an export: the transcript reader says what it is


def test_a_wrapped_export_piped_in_is_told_to_be_saved_as_a_bare_one_is() -> None:
    # was "line 1: the message.role: None is not one of ...": the object read as one message
    from tools.cli.lcm_host import read_transcript
    from tools.cli.output import CliError

    text = json.dumps({"conversations": items(CLAUDE)})
    with pytest.raises(CliError, match=r"stdin is a Claude export \(conversations.json\) wrapped as "
                                       r"\{\"conversations\": \[\.\.\.\]\}; save it to a file and give "
                                       r"that: amem lcm ingest conversations.json"):
        read_transcript("-", text)
    one = json.dumps({"role": "user", "content": "a transcript of one line"})
    assert [m for _, _, m in read_transcript("-", one)[0]] == [json.loads(one)]


def test_a_wrapper_member_past_the_limit_is_refused_not_held(tmp_path: Path) -> None:
    # the object's other members are read whole (its metadata): one that never closes is refused
    # at the limit a conversation has, before a conversation is stored
    wrapped = tmp_path / "export.json"
    wrapped.write_text('{"conversations": ' + json.dumps(items(GPT)) + ', "account": "' + "x" * 5000,
                       encoding="utf-8")
    with LcmStore(":memory:") as lcm, pytest.raises(StreamError, match=r"a value is over 4000 characters"):
        load_export(lcm, wrapped, "chatgpt", "alice", limits=ExportLimits(max_conversation_chars=4000))
    wrapped.write_text('{"account": "' + "x" * 5000, encoding="utf-8")  # before the conversations too
    with LcmStore(":memory:") as lcm, pytest.raises(StreamError, match=r"'account' is over 4000 characters"):
        load_export(lcm, wrapped, "chatgpt", "alice", limits=ExportLimits(max_conversation_chars=4000))
    # a wrapped export cut short in its first conversation is still one, so the load names its line
    wrapped.write_text('{"conversations": [{"title": "Cut", "mapping": {"m1": {"id"', encoding="utf-8")
    assert sniff(wrapped) == "chatgpt"
    with LcmStore(":memory:") as lcm, pytest.raises(StreamError, match=r"export\.json:1: item 1 is not valid JSON"):
        load_export(lcm, wrapped, "chatgpt", "alice")


def test_every_kind_of_chatgpt_marker_becomes_what_the_app_shows_in_its_place() -> None:
    entity = '\ue200entity\ue202["people", "Ada Lovelace", "mathematician"]\ue201'
    page, file = "\ue200cite\ue202turn0search1\ue201", "\ue200cite\ue202turn0file0\ue201"
    export = chatgpt_chain("c-cite", 2)
    message = export["mapping"]["m1"]["message"]
    message["content"]["parts"] = [f"About {entity} today {page}. From {file}. Gone \ue200cite\ue202turn9\ue201. "
                                   "Stray\ue203."]
    message["metadata"]["content_references"] = [
        {"matched_text": page, "type": "webpage_extended", "url": "https://ext.example/page"},
        {"matched_text": file, "type": "file", "name": "report.pdf"},
        {"matched_text": " ", "type": "sources_footnote", "sources": []}]  # a footnote: no marker
    got = chatgpt.convert(1, export).messages[-1]["content"]
    assert got == "About Ada Lovelace today (https://ext.example/page). From report.pdf. Gone . Stray."


def test_claude_counts_an_upload_without_its_uuid_once_as_it_is_stored_once() -> None:
    """An export whose ``files`` entries name the upload alone (no ``file_uuid``, as older
    claude.ai exports give them) beside the same upload in ``files_v2``: the two placeholders
    were one line of the stored text but two images in the report ("2 images" for one)."""
    conv = claude.convert(1, {"uuid": "cl-1", "name": "Bread", "chat_messages": [
        {"uuid": "m1", "sender": "human", "created_at": "2025-10-01T10:00:00Z",
         "content": [{"type": "text", "text": "Is this loaf proofed?"}],
         "files": [{"file_name": "loaf.jpg"}],
         "files_v2": [{"file_name": "loaf.jpg", "file_kind": "image"}]},
        {"uuid": "m2", "sender": "human", "created_at": "2025-10-01T10:01:00Z",
         "content": [{"type": "text", "text": "And these two?"}],
         "files_v2": [{"file_uuid": "f-1", "file_name": "a.jpg", "file_kind": "image"},
                      {"file_uuid": "f-2", "file_name": "b.png", "file_kind": "image"}]}]})
    got = by_id(conv.messages)
    assert got["m1"]["content"] == "Is this loaf proofed?\n[image: loaf.jpg]"
    assert got["m2"]["content"] == "And these two?\n[image: a.jpg]\n[image: b.png]"
    assert conv.placeholders == {"image": 3}  # was 4: loaf.jpg counted twice
