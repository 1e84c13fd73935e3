"""The readers of chat-app exports (``tools.chats``): the streamed array, ChatGPT's tree, Claude's list."""

from __future__ import annotations

import io
import json
import sys
import time

import pytest

from tests.fakes.reads import LargestRead
from tools.chats import BadConversation, StreamError, array_items, chatgpt, claude, detect

from .chat_exports import (CLAUDE_ID, LISBON_ID, T0, chatgpt_chain, chatgpt_lisbon, claude_edited, claude_invoice,
                           gpt_node)


def items(text: str, chunk: int) -> list[object]:
    return [it.value for it in array_items(io.StringIO(text), chunk=chunk)]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_the_array_is_read_item_by_item_across_any_chunk_boundary(chunk: int) -> None:
    values = [{"a": "x" * 50, "n": [1, 2.5, None, True]}, {"b": "\u00e9\u4e2d\\\""}, 12345, "s", [], {}]
    for text in (json.dumps(values), json.dumps(values, indent=2), " \n" + json.dumps(values) + "\n"):
        assert items(text, chunk) == values
    assert items("[]", chunk) == [] and items(" [ ] ", chunk) == []


@pytest.mark.parametrize("chunk", [5, 1 << 20])
def test_each_item_says_the_line_it_starts_on(chunk: int) -> None:
    text = json.dumps([{"a": 1, "b": [1, 2]}, {"c": "x\ny"}, {"d": {"e": 1}}], indent=2)
    starts = [n for n, ln in enumerate(text.split("\n"), 1) if ln == "  {"]
    assert [it.line for it in array_items(io.StringIO(text), chunk=chunk)] == starts == [2, 9, 12]


def test_many_small_items_are_read_in_linear_time() -> None:
    # lines counted from the buffer's start for each item made this quadratic in the chunk
    text = "[\n" + ",\n".join('{"i": %d}' % i for i in range(200_000)) + "\n]"
    started = time.perf_counter()
    last = None
    for last in array_items(io.StringIO(text)):
        pass
    assert last is not None and (last.index, last.line) == (200_000, 200_001)
    assert time.perf_counter() - started < 10


def test_a_broken_array_names_its_line_after_yielding_what_came_before() -> None:
    text = '[\n  {"id": 1},\n  {"id": 2,, "x": 1},\n  {"id": 3}\n]'
    got = []
    with pytest.raises(StreamError) as caught:
        for it in array_items(io.StringIO(text), name="conversations.json", chunk=4):
            got.append(it.value)
    assert got == [{"id": 1}] and caught.value.line == 3
    assert str(caught.value).startswith("conversations.json:3: item 2 is not valid JSON")
    for bad, why in (('[{"id": 1} {"id": 2}]', "expected ',' or ']' after item 1"),
                     ('[{"id": 1}] trailing', "text after the array's closing ']'"),
                     ('[{"id": 1}', "ends after item 1, before the array's closing ']'"),
                     ('[{"id": 1}, {"id"', "item 2 is not valid JSON")):
        with pytest.raises(StreamError, match=why):
            list(array_items(io.StringIO(bad), chunk=2))


def test_the_buffer_holds_an_item_and_a_chunk_not_the_file() -> None:
    big = json.dumps([{"id": i, "text": "y" * 1000} for i in range(2000)])  # ~2 MB
    source = LargestRead(big)
    assert sum(1 for _ in array_items(source, chunk=4096)) == 2000
    assert source.most <= 8192  # never the whole file in one read


def test_detect_tells_the_apps_apart() -> None:
    assert detect(chatgpt_lisbon()) == "chatgpt" and detect(claude_invoice()) == "claude"
    assert detect({"role": "user", "content": "hi"}) is None and detect([1]) is None


def test_chatgpt_follows_the_current_node_and_keeps_the_other_branches_apart() -> None:
    conv = chatgpt.convert(1, chatgpt_lisbon())
    assert (conv.source, conv.export_id, conv.title) == ("chatgpt", LISBON_ID, "Lisbon trip")
    line = [(m["event_id"], m["role"], m.get("name")) for m in conv.messages]
    assert line == [("ctx-1", "user", None), ("u-1", "user", None), ("a-1", "assistant", None),
                    ("u-2b", "user", None), ("code-1", "assistant", None), ("out-1", "tool", "python"),
                    ("a-2c", "assistant", None)]
    texts = {m["event_id"]: m["content"] for m in conv.messages}
    assert texts["ctx-1"] == "I live in Berlin.\nAnswer briefly."  # custom instructions: the model read them
    # the uploaded photo is its image part's placeholder once; the spreadsheet only an attachment
    assert texts["u-1"] == ("Plan three days in Lisbon in May\n[image: file-service://file-Tram28]\n"
                            "[file: application/vnd.ms-excel, budget.xlsx]")
    assert texts["code-1"] == "print(40 * 60 // 60)" and texts["out-1"] == "40"
    # the edited-away prompt with its answer, and the regenerated-away answer: two branches
    assert conv.branch_count == 2
    # each branch opens with where it left the line: the message before it (the reasoning
    # between is left out, so the answer before that), its id, role and the start of its text
    assert [m["event_id"] for m in conv.branches] == ["fork:u-2a", "u-2a", "a-2a", "fork:a-2b", "a-2b"]
    forks = {m["event_id"]: m for m in conv.branches if m["event_id"].startswith("fork:")}
    assert forks["fork:u-2a"]["content"] == ('[branch after a-1 (assistant, on the main line): '
                                             '"Day 1: Alfama. Day 2: Belem. Day 3: LX Factory."; it opens with u-2a]')
    assert forks["fork:a-2b"]["content"] == ('[branch after u-2b (user, on the main line): '
                                             '"What about a day trip to Sintra?"; it opens with a-2b]')
    assert forks["fork:u-2a"]["role"] == "system" and forks["fork:u-2a"]["created_at"] == T0 + 10
    assert conv.fork_points == 2
    assert conv.left_out == {"empty": 1, "reasoning": 1}  # the blank system node; the thoughts
    # each message its own time; the hidden context node, which has none, its parent's (the conversation's)
    times = {m["event_id"]: m.get("created_at") for m in conv.messages}
    assert times["u-1"] == T0 and times["a-2c"] == T0 + 230 and times["ctx-1"] == T0 - 5
    assert conv.warnings == []


def test_a_branch_inside_a_branch_names_its_own_fork_and_a_long_text_is_cut() -> None:
    export = chatgpt_lisbon()
    mapping = export["mapping"]
    # the edited-away prompt's answer was regenerated too: a fork inside the branch
    mapping["u-2a"]["children"].append("a-2a2")
    mapping["a-2a2"] = gpt_node("a-2a2", "u-2a", [], "assistant", ["Porto: take the Alfa Pendular."], T0 + 120)
    mapping["u-2b"]["message"]["content"]["parts"] = ["Sintra? " + "and then some " * 30]
    conv = chatgpt.convert(1, export)
    assert [m["event_id"] for m in conv.branches] == ["fork:u-2a", "u-2a", "a-2a", "fork:a-2a2", "a-2a2",
                                                      "fork:a-2b", "a-2b"]
    forks = {m["event_id"]: m["content"] for m in conv.branches if m["event_id"].startswith("fork:")}
    assert forks["fork:a-2a2"] == ('[branch after u-2a (user, in this branch conversation): '
                                   '"What about a day trip to Porto?"; it opens with a-2a2]')
    assert forks["fork:a-2b"].startswith('[branch after u-2b (user, on the main line): "Sintra? and then some')
    assert forks["fork:a-2b"].endswith('..."; it opens with a-2b]') and len(forks["fork:a-2b"]) < 220


def test_chatgpt_without_a_current_node_follows_the_newest_leaf() -> None:
    export = chatgpt_lisbon()
    export["current_node"] = None
    conv = chatgpt.convert(1, export)
    assert conv.messages[-1]["event_id"] == "a-2c" and conv.branch_count == 2


def test_a_ten_thousand_deep_tree_reads_without_recursion() -> None:
    limit = sys.getrecursionlimit()
    conv = chatgpt.convert(1, chatgpt_chain("deep", 10_000))
    assert len(conv.messages) == 10_000 and conv.messages[-1]["event_id"] == "m9999"
    assert sys.getrecursionlimit() == limit
    # a cycle deep in it is found and said, not walked forever
    broken = chatgpt_chain("deep", 10_000)
    broken["mapping"]["m0"]["parent"] = "m9999"
    broken["mapping"]["root"]["children"] = []
    with pytest.raises(BadConversation, match=r"a cycle in parent \('m\d+' -> .* -> 'm\d+'\): 10000 nodes"):
        chatgpt.convert(1, broken)


@pytest.mark.parametrize(("change", "said"), [
    (lambda c: c["mapping"]["a-1"].update(parent="gone"), "node 'a-1' names the parent 'gone', which is not in"),
    (lambda c: c["mapping"]["u-1"].update(parent="a-2c"), "a cycle in parent ("),
    (lambda c: c["mapping"]["a-1"].update(parent="a-1"), "node 'a-1' is its own parent"),
    (lambda c: c.update(current_node="nope"), "its current_node 'nope' is not in the conversation"),
    (lambda c: c.pop("mapping"), "its mapping (the tree of messages) is missing"),
    (lambda c: [c.pop("id"), c.pop("conversation_id")], "has no id"),
])
def test_a_broken_chatgpt_conversation_is_named(change: object, said: str) -> None:
    export = chatgpt_lisbon()
    change(export)  # type: ignore[operator]
    with pytest.raises(BadConversation) as caught:
        chatgpt.convert(3, export)
    assert said in str(caught.value)
    assert str(caught.value).startswith("conversation 3 ('Lisbon trip'")


def test_an_unknown_chatgpt_content_type_is_kept_as_text_and_said() -> None:
    export = chatgpt_chain("c", 2)
    export["mapping"]["m1"] = gpt_node("m1", "m0", [], "tool", None, T0 + 1, content_type="computer_output",
                                       content={"screenshot": {"asset_pointer": "file-x"}, "state": "done"},
                                       name="computer")
    conv = chatgpt.convert(1, export)
    assert conv.messages[-1]["content"] == '{"screenshot": {"asset_pointer": "file-x"}, "state": "done"}'
    assert conv.warnings == ["conversation 1 ('A long chat', id c): 1 message of content type "
                             "'computer_output', which this reader does not know, kept as their text "
                             "(or their JSON)"]


def test_claude_keeps_attachments_splits_tool_results_and_leaves_out_thinking() -> None:
    conv = claude.convert(1, claude_invoice())
    assert (conv.source, conv.export_id, conv.title) == ("claude", CLAUDE_ID, "Invoice 1042")
    got = [(m["event_id"], m["role"], m["content"], m["created_at"]) for m in conv.messages]
    assert got == [
        ("m-1", "user", "Is invoice 1042 paid?\n[file: text/csv, ledger.csv]\ninvoice,paid\n1042,yes\n1043,no\n"
                        "[image: bank-screenshot.png]", "2024-05-01T10:00:01.123456Z"),
        ("m-2", "assistant", "Let me check the bank's notice.", "2024-05-01T10:00:09.000000Z"),
        ("m-2#1", "tool", "Payment 1042 received on 30 April", "2024-05-01T10:00:09.000000Z"),
        ("m-2#2", "assistant", "Yes, invoice 1042 is paid (received 30 April).", "2024-05-01T10:00:09.000000Z"),
        ("m-4", "user", "And 1043?", "2024-05-01T10:02:00.000000Z")]
    assert conv.messages[1]["tool_calls"] == [{"id": "toolu_1", "name": "web_search",
                                               "input": {"query": "invoice 1042"}}]
    assert conv.messages[2]["name"] == "web_search"
    assert conv.left_out == {"empty": 1, "reasoning": 1}


@pytest.mark.parametrize(("change", "said"), [
    (lambda c: c.pop("uuid"), "has no uuid"),
    (lambda c: c.update(chat_messages={"m": 1}), "chat_messages is missing or not a list"),
    (lambda c: c["chat_messages"][1].update(uuid="m-1"), "message 2: uuid 'm-1' is also an earlier message's"),
])
def test_a_broken_claude_conversation_is_named(change: object, said: str) -> None:
    export = claude_invoice()
    change(export)  # type: ignore[operator]
    with pytest.raises(BadConversation, match="^conversation 2 ") as caught:
        claude.convert(2, export)
    assert said in str(caught.value)


def test_claude_follows_the_newest_leaf_and_keeps_the_edits_and_retries_apart() -> None:
    conv = claude.convert(1, claude_edited())
    assert [m["event_id"] for m in conv.messages] == ["q-1", "r-1b", "q-2e", "r-2"]
    assert [m["event_id"] for m in conv.branches] == ["fork:r-1", "r-1", "fork:q-2", "q-2"]
    assert conv.branch_count == 2
    assert conv.branches[0]["content"] == ('[branch after q-1 (user, on the main line): "When is the deploy window?"; '
                                           'it opens with r-1]')
    # the line the export names wins over the newest leaf
    named = claude_edited()
    named["current_leaf_message_uuid"] = "q-2"
    conv = claude.convert(1, named)
    assert [m["event_id"] for m in conv.messages] == ["q-1", "r-1b", "q-2"]
    assert [m["event_id"] for m in conv.branches] == ["fork:r-1", "r-1", "fork:q-2e", "q-2e", "r-2"]
    broken = claude_edited()
    broken["chat_messages"][0]["parent_message_uuid"] = "r-2"
    with pytest.raises(BadConversation, match=r"a cycle in parent \('q-1' -> 'r-2' -> 'q-2e' -> 'r-1b' -> 'q-1'\)"):
        claude.convert(1, broken)


def test_a_chatgpt_message_whose_parts_are_not_a_list_costs_only_itself() -> None:
    export = chatgpt_lisbon()
    export["mapping"]["a-1"]["message"]["content"]["parts"] = "text"
    conv = chatgpt.convert(3, export)
    assert "a-1" not in [m["event_id"] for m in conv.messages]
    assert [m["event_id"] for m in conv.messages][-1] == "a-2c"
    assert conv.left_out["unreadable"] == 1
    assert conv.warnings == ["conversation 3 ('Lisbon trip', id 6634f0a2-1c2d-4e5f-8a9b-0c1d2e3f4a5b): 1 message "
                             "that could not be read, left out (the rest of the conversation is kept): node 'a-1' "
                             "(content.parts is not a list)"]
