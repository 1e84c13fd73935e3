"""One conversation of a Claude data export (``conversations.json``) as lcm messages.

Each conversation is ``{uuid, name, created_at, chat_messages: [...]}``; each message
``{uuid, sender: human|assistant, text, content: [blocks], created_at, attachments, files}``.

What this reader keeps:

1. The line the user last saw, ``human`` as user: claude.ai keeps every edited prompt and
   retried answer in ``chat_messages`` with its ``parent_message_uuid``, so the line is the
   one to ``current_leaf_message_uuid``, else to the newest leaf; the other branches are
   returned apart, as ChatGPT's are, each after a fork marker (an export without parents is
   one line, in its order).
   A message's ``content`` blocks when it has them (``text`` is the whole message flattened,
   tool calls included), else its ``text``.
2. An assistant message that used tools (web search, artifacts, analysis) is split where a
   ``tool_result`` block stands: the assistant's text and calls, then the tool's result as a
   ``tool`` message, then the text after it, each with an id of its own (``<uuid>``,
   ``<uuid>#1``, ...), so the roles say who said what.
3. An attached file's extracted text (``attachments[].extracted_content``, what Claude read)
   after a placeholder naming the file; an uploaded image or file without text as the
   placeholder only (:func:`lcm.normalize.media_placeholder`).
4. The model's ``thinking`` is left out and counted as ``reasoning``, claude.ai's
   ``token_budget`` markers (timestamps only, between a tool result and what follows) as
   ``internal``; a message with nothing left is counted as ``empty``.
5. What this reader does not know never costs the conversation: a block type is kept as its
   text (or JSON), a sender as a ``system`` message named by it, and an item of
   ``chat_messages`` that is not a message is left out as ``unreadable``; each said in a warning.
"""

from __future__ import annotations

import json
import mimetypes
from collections import Counter
from typing import Any

from lcm.normalize import media_placeholder

from .model import BadConversation, ExportedConversation, conversation_fields
from .tree import Tree, with_forks

__all__ = ["convert"]

_SENDERS = {"human": "user", "user": "user", "assistant": "assistant", "system": "system"}
#: the parent claude.ai gives a conversation's first message
_ROOT = "00000000-0000-4000-8000-000000000000"
#: blocks that mark the model's bookkeeping, nothing said: left out as "internal"
_INTERNAL = {"token_budget"}


def convert(index: int, obj: Any) -> ExportedConversation:
    """The conversation ``obj`` (item ``index`` of the export, 1-based) as lcm messages.

    Raises:
        BadConversation: no id, ``chat_messages`` not a list, or a message that is not an
            object or whose sender is neither human nor assistant.
    """
    obj, ident, name, who = conversation_fields(index, obj, ("uuid",), "uuid", "name")
    chat = obj.get("chat_messages")
    if not isinstance(chat, list):
        raise BadConversation(f"{who}: chat_messages is missing or not a list")
    out = ExportedConversation("claude", ident, name, [])
    unknown: Counter[str] = Counter()
    senders: Counter[str] = Counter()
    unreadable: list[int] = []
    by_id: dict[str, tuple[dict[str, Any], str]] = {}
    for i, message in enumerate(chat, 1):
        if not isinstance(message, dict):  # costs that item, said, not the conversation
            out.left_out["unreadable"] += 1
            unreadable.append(i)
            continue
        role = _SENDERS.get(str(message.get("sender")))
        if role is None:  # a sender of a newer export: kept, named by it
            senders[str(message.get("sender"))] += 1
            role = "system"
        mid = message.get("uuid")
        # a message without a uuid is keyed by its place: stable while the export is the same
        base = mid if isinstance(mid, str) and mid else f"{ident}#{i}"
        if base in by_id:
            raise BadConversation(f"{who}: message {i}: uuid {base!r} is also an earlier message's")
        by_id[base] = (message, role)
    tree, line, out.branch_count, rest = _line(who, obj, by_id)
    kept: dict[str, list[dict[str, Any]]] = {}
    for base in (*line, *rest):
        message, role = by_id[base]
        kept[base] = []
        _add(base, message, role, kept[base], unknown, out)
    out.messages = [m for base in line for m in kept[base]]
    if tree is not None:
        out.branches, out.fork_points = with_forks(tree, rest, kept, line)
    out.warnings += [f"{who}: {n} content {'block' if n == 1 else 'blocks'} of type {kind!r}, which this "
                     "reader does not know, kept as their text (or their JSON)"
                     for kind, n in sorted(unknown.items())]
    out.warnings += [f"{who}: {n} {'message' if n == 1 else 'messages'} of sender {sender!r}, which this reader "
                     f"does not know, kept as system messages named {sender!r}"
                     for sender, n in sorted(senders.items())]
    if unreadable:
        out.warnings.append(f"{who}: {len(unreadable)} of chat_messages not a message object, left out (the rest "
                            f"of the conversation is kept): item {', '.join(map(str, unreadable[:5]))}"
                            + (", ..." if len(unreadable) > 5 else ""))
    return out


def _line(who: str, obj: dict[str, Any], by_id: dict[str, tuple[dict[str, Any], str]]
          ) -> tuple[Tree | None, list[str], int, list[str]]:
    """The tree (None without parents), the messages of the line the user last saw, and the
    other branches: how many, their messages.

    claude.ai keeps every edited prompt and every retried answer in ``chat_messages``, each
    naming its ``parent_message_uuid``: the line is the one to ``current_leaf_message_uuid``
    when the export names it, else to the newest leaf (the bulk export does not name it). An
    export without parents is one line, in its order.
    """
    if not any("parent_message_uuid" in message for message, _ in by_id.values()):
        return None, list(by_id), 0, []
    parents: dict[str, str | None] = {}
    for base, (message, _) in by_id.items():
        parent = message.get("parent_message_uuid")
        parents[base] = None if parent is None or parent == _ROOT else str(parent)
    tree = Tree(who, parents)
    leaf = obj.get("current_leaf_message_uuid")
    if not (isinstance(leaf, str) and leaf in parents):
        order = {base: i for i, base in enumerate(by_id)}
        leaf = max(tree.leaves(), key=lambda n: (str(by_id[n][0].get("created_at") or ""), order[n]))
    line = tree.line_to(leaf)
    count, rest = tree.off(line)
    return tree, line, count, rest


def _add(base: str, message: dict[str, Any], role: str, into: list[dict[str, Any]], unknown: Counter[str],
         out: ExportedConversation) -> None:
    """Append message ``base``'s pieces to ``into`` (or count it as empty)."""
    pieces = _pieces(message, role, unknown, out)
    pieces[-1:] = [_with_files(pieces[-1] if pieces else {"role": role, "content": ""}, message, out.placeholders)]
    kept = 0
    for piece in pieces:
        if not piece["content"].strip() and not piece.get("tool_calls"):
            continue
        if role == "system" and message.get("sender") not in _SENDERS:
            piece["name"] = str(message.get("sender"))[:64]
        if piece["role"] == "tool":
            out.kept["tool_output"] += 1
        piece["event_id"] = base if kept == 0 else f"{base}#{kept}"
        if message.get("created_at") is not None:
            piece["created_at"] = message["created_at"]
        into.append(piece)
        kept += 1
    if not kept:
        out.left_out["empty"] += 1


def _pieces(message: dict[str, Any], role: str, unknown: Counter[str],
            out: ExportedConversation) -> list[dict[str, Any]]:
    """The message as lcm messages: split at each tool result (see the module docstring)."""
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        text = message.get("text")
        return [{"role": role, "content": text if isinstance(text, str) else ""}]
    pieces: list[dict[str, Any]] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []

    def flush() -> None:
        if texts or calls:
            piece: dict[str, Any] = {"role": role, "content": "\n".join(texts)}
            if calls:
                piece["tool_calls"] = list(calls)
            pieces.append(piece)
        texts.clear()
        calls.clear()

    for block in blocks:
        if not isinstance(block, dict):
            texts.append(str(block))
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            texts.append(text if isinstance(text, str) else "")
        elif kind in ("thinking", "redacted_thinking"):
            out.left_out["reasoning"] += 1
        elif kind in _INTERNAL:
            out.left_out["internal"] += 1
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "name": block.get("name"), "input": block.get("input")})
        elif kind == "tool_result":
            flush()
            result: dict[str, Any] = {"role": "tool", "content": _result_text(block.get("content"))}
            if isinstance(block.get("name"), str):
                result["name"] = block["name"]
            pieces.append(result)
        elif (media := media_placeholder(block)) is not None:
            out.placeholders[_kind(media)] += 1
            texts.append(media)
        else:  # a block type of a newer export: kept, and said
            unknown[str(kind)] += 1
            text = block.get("text")
            texts.append(text if isinstance(text, str) else json.dumps(block, ensure_ascii=False, sort_keys=True))
    flush()
    return pieces


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "knowledge":  # a web search's hit: its page too
                out.append("\n".join(t for t in (part.get(k) for k in ("title", "url", "text"))
                                     if isinstance(t, str) and t))
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, dict) and (media := media_placeholder(part)) is not None:
                out.append(media)
            else:
                out.append(json.dumps(part, ensure_ascii=False, sort_keys=True))
        return "\n".join(out)
    return "" if content is None else json.dumps(content, ensure_ascii=False, sort_keys=True)


def _with_files(piece: dict[str, Any], message: dict[str, Any], media: Counter[str]) -> dict[str, Any]:
    """``piece`` with the message's attachments and files after its text: a placeholder for
    each, and an attachment's extracted text (what Claude read of it) under its placeholder.

    claude.ai lists an upload in ``files`` (``file_uuid``, ``file_name``) and again in
    ``files_v2`` (with ``file_kind``): one placeholder per ``file_uuid``, the kind from
    ``file_kind`` or else the name's extension. An older export's ``files`` entry names the
    upload alone (no uuid): its placeholder is the same line as its ``files_v2`` one, stored
    once, so the report's count is of the distinct lines stored, not of the entries read."""
    said: dict[str, str] = {}  # each line stored -> its kind, first seen kept
    for item in message.get("attachments") or []:
        if not isinstance(item, dict):
            continue
        head = media_placeholder({"type": "file", **_named(item)}) or "[file]"
        body = item.get("extracted_content")
        said.setdefault(f"{head}\n{body}" if isinstance(body, str) and body.strip() else head, "file")
    files: dict[object, dict[str, Any]] = {}
    for item in [*(message.get("files_v2") or []), *(message.get("files") or [])]:
        if isinstance(item, dict):
            files.setdefault(item.get("file_uuid") or id(item), item)  # files_v2 first: it says the kind
    for item in files.values():
        guessed = mimetypes.guess_type(str(item.get("file_name") or ""))[0] or ""
        kind = "image" if item.get("file_kind") == "image" or guessed.startswith("image/") else "file"
        said.setdefault(media_placeholder({"type": kind, **_named(item)}) or f"[{kind}]", kind)
    if not said:
        return piece
    media.update(said.values())
    text = "\n".join(t for t in (piece["content"], *said) if t)
    return {**piece, "content": text}


def _kind(placeholder: str) -> str:
    """``image`` of ``[image: ...]``."""
    return placeholder[1:].split(":", 1)[0].split("]", 1)[0]


def _named(item: dict[str, Any]) -> dict[str, str]:
    """The file's name and type in the keys ``media_placeholder`` reads."""
    out = {}
    if isinstance(item.get("file_name"), str) and item["file_name"]:
        out["filename"] = item["file_name"]
    if isinstance(item.get("file_type"), str) and item["file_type"]:
        out["mime_type"] = item["file_type"]
    return out
