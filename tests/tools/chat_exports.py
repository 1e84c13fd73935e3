"""Small chat-app exports shaped like the real ones, for the export tests.

``chatgpt_*`` build a ChatGPT ``conversations.json`` item (a ``mapping`` tree with hidden
system nodes, an edited prompt, a regenerated answer, a code-interpreter turn, an uploaded
image); ``claude_*`` a Claude one (attachments with extracted text, an uploaded image, a tool
call split out, thinking). Times are the apps' own: ChatGPT epoch floats, Claude ISO strings.
"""

from __future__ import annotations

from typing import Any

LISBON_ID = "6634f0a2-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
T0 = 1714550400.25  # 2024-05-01T08:00:00.250Z


def gpt_node(nid: str, parent: str | None, children: list[str], role: str | None = None,
             parts: list[Any] | None = None, t: float | None = None, *, content_type: str = "text",
             content: dict[str, Any] | None = None, name: str | None = None, hidden: bool = False,
             attachments: list[dict[str, Any]] | None = None, recipient: str = "all") -> dict[str, Any]:
    """One node of a ChatGPT ``mapping``; ``role`` None is the structural root (no message)."""
    message: dict[str, Any] | None = None
    if role is not None:
        metadata: dict[str, Any] = {}
        if hidden:
            metadata["is_visually_hidden_from_conversation"] = True
        if attachments:
            metadata["attachments"] = attachments
        body: dict[str, Any] = {"content_type": content_type}
        if parts is not None:
            body["parts"] = parts
        body.update(content or {})
        message = {"id": nid, "author": {"role": role, "name": name, "metadata": {}}, "create_time": t,
                   "update_time": None, "content": body, "status": "finished_successfully",
                   "end_turn": role == "assistant", "weight": 1.0, "metadata": metadata,
                   "recipient": recipient, "channel": None}
    return {"id": nid, "message": message, "parent": parent, "children": children}


def chatgpt_lisbon() -> dict[str, Any]:
    """A trip chat: the user edited the second prompt (Porto -> Sintra), then regenerated the
    answer to the edit once; the current node is the second answer. Also a hidden system node,
    custom instructions, an uploaded photo, a code-interpreter call and its output."""
    n = gpt_node
    mapping = {
        "client-root": n("client-root", None, ["sys-1"]),
        "sys-1": n("sys-1", "client-root", ["ctx-1"], "system", [""], None, hidden=True),
        "ctx-1": n("ctx-1", "sys-1", ["u-1"], "user", None, None, content_type="user_editable_context",
                   content={"user_profile": "I live in Berlin.", "user_instructions": "Answer briefly."},
                   hidden=True),
        "u-1": n("u-1", "ctx-1", ["a-1"], "user",
                 ["Plan three days in Lisbon in May",
                  {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-Tram28",
                   "size_bytes": 183211, "width": 1024, "height": 768}], T0,
                 content_type="multimodal_text",
                 attachments=[{"id": "file-Tram28", "name": "tram.jpg", "mime_type": "image/jpeg"},
                              {"id": "file-Budget", "name": "budget.xlsx",
                               "mime_type": "application/vnd.ms-excel"}]),
        "a-1": n("a-1", "u-1", ["think-1"], "assistant", ["Day 1: Alfama. Day 2: Belem. Day 3: LX Factory."],
                 T0 + 10),
        "think-1": n("think-1", "a-1", ["u-2a", "u-2b"], "assistant", None, T0 + 11, content_type="thoughts",
                     content={"thoughts": [{"summary": "Weighing", "content": "Porto or Sintra"}]}),
        # the first version of the second prompt, edited away, and its answer
        "u-2a": n("u-2a", "think-1", ["a-2a"], "user", ["What about a day trip to Porto?"], T0 + 100),
        "a-2a": n("a-2a", "u-2a", [], "assistant", ["Porto is three hours by train."], T0 + 110),
        # the edit, its first answer (regenerated away) and the answer the user kept
        "u-2b": n("u-2b", "think-1", ["a-2b", "code-1"], "user", ["What about a day trip to Sintra?"], T0 + 200),
        "a-2b": n("a-2b", "u-2b", [], "assistant", ["Sintra: Pena Palace, Quinta da Regaleira."], T0 + 210),
        "code-1": n("code-1", "u-2b", ["out-1"], "assistant", None, T0 + 220, content_type="code",
                    content={"language": "python", "text": "print(40 * 60 // 60)"}, recipient="python"),
        "out-1": n("out-1", "code-1", ["a-2c"], "tool", None, T0 + 221, content_type="execution_output",
                   content={"text": "40"}, name="python"),
        "a-2c": n("a-2c", "out-1", [], "assistant", ["Sintra is 40 minutes by train from Rossio."], T0 + 230),
    }
    return {"title": "Lisbon trip", "create_time": T0 - 5, "update_time": T0 + 230, "mapping": mapping,
            "moderation_results": [], "current_node": "a-2c", "plugin_ids": None,
            "conversation_id": LISBON_ID, "conversation_template_id": None, "id": LISBON_ID}


def chatgpt_chain(cid: str, turns: int, *, title: str = "A long chat") -> dict[str, Any]:
    """A conversation of ``turns`` messages in one chain (a tree ``turns`` deep)."""
    mapping = {"root": gpt_node("root", None, ["m0"])}
    for i in range(turns):
        parent = "root" if i == 0 else f"m{i - 1}"
        kids = [f"m{i + 1}"] if i + 1 < turns else []
        mapping[f"m{i}"] = gpt_node(f"m{i}", parent, kids, "user" if i % 2 == 0 else "assistant",
                                    [f"turn {i}: invoice {10_000 + i} is paid"], T0 + i)
    return {"title": title, "create_time": T0, "mapping": mapping, "current_node": f"m{turns - 1}",
            "conversation_id": cid, "id": cid}


CLAUDE_ID = "28d595a3-5db0-492d-a49a-af74f446ad44"


def claude_invoice() -> dict[str, Any]:
    """An invoice chat: a CSV attached (its text extracted), a screenshot uploaded, an answer that
    thought, searched the web and answered after the result, and an empty message."""
    return {
        "uuid": CLAUDE_ID, "name": "Invoice 1042", "created_at": "2024-05-01T10:00:00.000000Z",
        "updated_at": "2024-05-01T10:05:00.000000Z", "account": {"uuid": "acct-1"},
        "chat_messages": [
            {"uuid": "m-1", "sender": "human", "text": "Is invoice 1042 paid?",
             "content": [{"type": "text", "text": "Is invoice 1042 paid?", "start_timestamp": None,
                          "stop_timestamp": None, "citations": []}],
             "created_at": "2024-05-01T10:00:01.123456Z", "updated_at": "2024-05-01T10:00:01.123456Z",
             "attachments": [{"file_name": "ledger.csv", "file_size": 41, "file_type": "text/csv",
                              "extracted_content": "invoice,paid\n1042,yes\n1043,no"}],
             "files": [{"file_name": "bank-screenshot.png"}]},
            {"uuid": "m-2", "sender": "assistant", "text": "Yes, invoice 1042 is paid.",
             "content": [
                 {"type": "thinking", "thinking": "The ledger says yes; confirm with the bank."},
                 {"type": "text", "text": "Let me check the bank's notice."},
                 {"type": "tool_use", "id": "toolu_1", "name": "web_search", "input": {"query": "invoice 1042"}},
                 {"type": "tool_result", "tool_use_id": "toolu_1", "name": "web_search",
                  "content": [{"type": "text", "text": "Payment 1042 received on 30 April"}], "is_error": False},
                 {"type": "text", "text": "Yes, invoice 1042 is paid (received 30 April)."}],
             "created_at": "2024-05-01T10:00:09.000000Z", "updated_at": "2024-05-01T10:00:09.000000Z",
             "attachments": [], "files": []},
            {"uuid": "m-3", "sender": "human", "text": "", "content": [],
             "created_at": "2024-05-01T10:01:00.000000Z", "attachments": [], "files": []},
            {"uuid": "m-4", "sender": "human", "text": "And 1043?",
             "content": [{"type": "text", "text": "And 1043?"}],
             "created_at": "2024-05-01T10:02:00.000000Z", "attachments": [], "files": []},
        ]}


def claude_edited() -> dict[str, Any]:
    """A claude.ai chat with a retried answer and an edited prompt, as the bulk export keeps it:
    every version in ``chat_messages`` with its ``parent_message_uuid``, no current leaf named."""
    root = "00000000-0000-4000-8000-000000000000"

    def msg(uuid: str, parent: str, sender: str, text: str, at: str) -> dict[str, Any]:
        return {"uuid": uuid, "parent_message_uuid": parent, "sender": sender, "text": text,
                "content": [{"type": "text", "text": text}], "created_at": at, "updated_at": at,
                "attachments": [], "files": []}

    return {"uuid": "7e1c-edited", "name": "Deploy window", "created_at": "2024-06-03T09:00:00Z",
            "chat_messages": [
                msg("q-1", root, "human", "When is the deploy window?", "2024-06-03T09:00:01Z"),
                msg("r-1", "q-1", "assistant", "Tuesdays at 14:00.", "2024-06-03T09:00:05Z"),
                msg("r-1b", "q-1", "assistant", "Tuesdays and Thursdays, 14:00 UTC.", "2024-06-03T09:00:40Z"),
                msg("q-2", "r-1b", "human", "And the freeze?", "2024-06-03T09:01:00Z"),
                msg("q-2e", "r-1b", "human", "And the December freeze?", "2024-06-03T09:02:00Z"),
                msg("r-2", "q-2e", "assistant", "From 18 December to 2 January.", "2024-06-03T09:02:06Z"),
            ]}
