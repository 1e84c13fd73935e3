"""One conversation of a ChatGPT data export (``conversations.json``) as lcm messages.

ChatGPT keeps a conversation as a tree: ``mapping`` holds every node (``id``, ``message``,
``parent``, ``children``), and ``current_node`` is the leaf the user last looked at. Editing a
prompt or regenerating an answer starts a sibling branch, so the tree holds every version.

What this reader keeps:

1. The line from the root to ``current_node``, in order: the conversation as the user last
   saw it, stored as the conversation itself.
2. Every other branch (the earlier versions of edited prompts, the answers regenerated away),
   each in order, returned apart (``branches``): lcm promises to lose nothing, and a user
   looking for "what it said the first time" finds it there, while the conversation's own
   context stays what the user saw. The caller stores them as a sibling conversation; each
   branch opens with a fork marker naming the message it follows (:func:`tools.chats.tree.with_forks`).
3. Hidden nodes that carry text (custom instructions, a tool's output, the model's memory
   notes): they were part of what the model read. Nodes with no text (the empty system node
   every conversation opens with, the assistant's blank turn before a tool call) are left out
   and counted as ``empty``; the model's reasoning (``thoughts``, ``reasoning_recap``) is left
   out and counted as ``reasoning``, as the Claude Code and Codex readers leave it out.
4. Images, audio and files as the placeholder of :func:`lcm.normalize.media_placeholder`
   (``[image: file-service://file-...]``), never their bytes (the export has none anyway).

The tree is checked and walked by :class:`tools.chats.tree.Tree` (iteratively).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from lcm.normalize import media_placeholder

from .model import BadConversation, ExportedConversation, conversation_fields
from .tree import Tree, with_forks

__all__ = ["convert"]

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
#: the model's reasoning, left out (counted)
_REASONING = {"thoughts", "reasoning_recap"}
#: part types of multimodal messages that stand for an image, a sound or a video frame
_MEDIA_PARTS = {"image_asset_pointer": "image", "audio_asset_pointer": "audio",
                "real_time_video_frame_asset_pointer": "image", "video_container_asset_pointer": "file"}


def convert(index: int, obj: Any) -> ExportedConversation:
    """The conversation ``obj`` (item ``index`` of the export, 1-based) as lcm messages.

    Raises:
        BadConversation: it is not a conversation (no id, no mapping), its tree is broken (a
            parent or ``current_node`` that is not in it, a cycle), or a message is malformed.
    """
    obj, ident, title, who = conversation_fields(index, obj, ("conversation_id", "id"),
                                                 "id (conversation_id)", "title")
    mapping = obj.get("mapping")
    if not isinstance(mapping, dict):
        raise BadConversation(f"{who}: its mapping (the tree of messages) is missing or not an object")
    tree = _tree(who, mapping)
    try:
        times = _times(obj, mapping, tree)
    except BadConversation as exc:
        raise BadConversation(f"{who}: {exc}") from None
    line = _current_line(who, obj, mapping, tree, times)
    out = ExportedConversation("chatgpt", ident, title, [])
    seen_types: Counter[str] = Counter()
    out.branch_count, rest = tree.off(line)
    kept: dict[str, list[dict[str, Any]]] = {}
    for node in (*line, *rest):
        kept[node] = []
        _add(who, node, mapping[node], times.get(node), kept[node], out, seen_types)
    out.messages = [m for node in line for m in kept[node]]
    out.branches, out.fork_points = with_forks(tree, rest, kept, line)
    out.warnings += [f"{who}: {n} {'message' if n == 1 else 'messages'} of content type {kind!r}, which "
                     "this reader does not know, kept as their text (or their JSON)"
                     for kind, n in sorted(seen_types.items())]
    return out


def _tree(who: str, mapping: dict[str, Any]) -> Tree:
    """The mapping's tree, checked, siblings in the app's own order (its ``children`` lists)."""
    parents: dict[str, str | None] = {}
    for nid, node in mapping.items():
        if not isinstance(node, dict):
            raise BadConversation(f"{who}: node {nid!r} is not an object")
        parent = node.get("parent")
        parents[nid] = parent if parent is None or isinstance(parent, str) else repr(parent)
    tree = Tree(who, parents)
    for parent, kids in tree.children.items():
        listed = mapping[parent].get("children")
        if isinstance(listed, list) and len(kids) > 1:
            rank = {c: i for i, c in enumerate(listed) if isinstance(c, str)}
            kids.sort(key=lambda c: rank.get(c, len(rank)))
    return tree


def _times(obj: dict[str, Any], mapping: dict[str, Any], tree: Tree) -> dict[str, float]:
    """Each node's time: its message's ``create_time``, else its parent's (a node the app did
    not time, such as a hidden system message, sits where it was said), else the conversation's."""
    start = _time(obj.get("create_time"), "the conversation")
    out: dict[str, float] = {}
    for root in tree.roots:
        for node in tree.preorder(root):
            message = mapping[node].get("message")
            own = _time(message.get("create_time"), f"node {node!r}") if isinstance(message, dict) else None
            parent = tree.parents[node]
            if own is not None:
                out[node] = own
            elif parent is not None and parent in out:
                out[node] = out[parent]
            elif start is not None:
                out[node] = start
    return out


def _time(value: Any, where: str) -> float | None:
    """An epoch time the app set (it writes null, and 0 in some old exports, for none)."""
    if value is None or value == 0:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise BadConversation(f"{where}: create_time {str(value)[:40]!r} is not a time (seconds since 1970)")


def _current_line(who: str, obj: dict[str, Any], mapping: dict[str, Any], tree: Tree,
                  times: dict[str, float]) -> list[str]:
    """Root to ``current_node``; without one (an old export), root to the newest leaf."""
    current = obj.get("current_node")
    if current is None:
        leaves = tree.leaves()
        return tree.line_to(max(leaves, key=lambda n: times.get(n, 0.0))) if leaves else []
    if not isinstance(current, str) or current not in mapping:
        raise BadConversation(f"{who}: its current_node {current!r} is not in the conversation (a broken tree)")
    return tree.line_to(current)


def _add(who: str, nid: str, node: dict[str, Any], at: float | None, into: list[dict[str, Any]],
         out: ExportedConversation, unknown: Counter[str]) -> None:
    """Append node ``nid``'s message to ``into`` (or count why it is left out)."""
    message = node.get("message")
    if message is None:
        return  # a tree's structural root: no message, nothing said
    if not isinstance(message, dict):
        raise BadConversation(f"{who}: node {nid!r}: its message is not an object")
    author = message.get("author")
    raw_role = author.get("role") if isinstance(author, dict) else None
    role = _ROLES.get(str(raw_role))
    if role is None:
        raise BadConversation(f"{who}: node {nid!r}: author role {raw_role!r} is not one of user, assistant, "
                              "system, tool")
    content = message.get("content")
    if not isinstance(content, dict):
        raise BadConversation(f"{who}: node {nid!r}: its content is not an object")
    kind = content.get("content_type")
    if kind in _REASONING:
        out.left_out["reasoning"] += 1
        return
    text = _content_text(who, nid, content, unknown)
    attached = _attachments(message, text)
    text = "\n".join(t for t in (text, *attached) if t)
    if not text.strip():
        out.left_out["empty"] += 1
        return
    msg: dict[str, Any] = {"role": role, "content": text, "event_id": nid}
    if at is not None:
        msg["created_at"] = at
        own = message.get("create_time")
        if not own:  # a time taken from the parent or the conversation (see _times)
            out.borrowed_times.add(nid)
    name = author.get("name") if isinstance(author, dict) else None
    if role == "tool" and isinstance(name, str) and name:
        msg["name"] = name  # which tool spoke: python, browser, dalle.text2im
    into.append(msg)


def _content_text(who: str, nid: str, content: dict[str, Any], unknown: Counter[str]) -> str:
    kind = content.get("content_type")
    parts = content.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise BadConversation(f"{who}: node {nid!r}: content.parts is not a list")
    if kind in ("text", "multimodal_text"):
        return "\n".join(t for t in (_part_text(p) for p in parts or []) if t)
    if kind in ("code", "execution_output", "system_error"):
        return _str(content.get("text"))
    if kind == "tether_quote":
        return "\n".join(t for t in (_str(content.get(k)) for k in ("title", "url", "text")) if t)
    if kind == "tether_browsing_display":
        return "\n".join(t for t in (_str(content.get(k)) for k in ("summary", "result")) if t)
    if kind == "user_editable_context":  # the user's custom instructions, which the model read
        return "\n".join(t for t in (_str(content.get(k)) for k in ("user_profile", "user_instructions")) if t)
    if kind == "model_editable_context":  # the model's memory of the user ("bio" notes)
        return _str(content.get("model_set_context"))
    # a content type of a newer export: kept, never dropped, and said in a warning
    unknown[str(kind)] += 1
    if parts:
        return "\n".join(t for t in (_part_text(p) for p in parts) if t)
    if isinstance(content.get("text"), str):
        return str(content["text"])
    rest = {k: v for k, v in content.items() if k != "content_type" and v not in (None, "", [], {})}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True) if rest else ""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return "" if part is None else json.dumps(part, ensure_ascii=False)
    kind = part.get("content_type")
    if isinstance(part.get("text"), str):  # audio_transcription, a text part spelled as an object
        return str(part["text"])
    media = _MEDIA_PARTS.get(str(kind))
    if media is not None:
        pointer = part.get("asset_pointer")
        return media_placeholder({"type": media, **({"url": pointer} if isinstance(pointer, str) else {}),
                                  **({"mime_type": part["mime_type"]} if isinstance(part.get("mime_type"), str)
                                     else {})}) or ""
    return json.dumps(part, ensure_ascii=False, sort_keys=True)


def _attachments(message: dict[str, Any], text: str) -> list[str]:
    """Placeholders for the files the user attached (``metadata.attachments``) that the text
    does not already show as an image part."""
    metadata = message.get("metadata")
    files = metadata.get("attachments") if isinstance(metadata, dict) else None
    if not isinstance(files, list):
        return []
    out = []
    for f in files:
        if not isinstance(f, dict):
            continue
        fid = f.get("id")
        if isinstance(fid, str) and fid and fid in text:
            continue  # an uploaded image is also an image part pointing at the same file
        kind = "image" if str(f.get("mime_type") or f.get("mimeType") or "").startswith("image/") else "file"
        said = media_placeholder({"type": kind, **{k: f[k] for k in ("mime_type",) if isinstance(f.get(k), str)},
                                  **({"filename": f["name"]} if isinstance(f.get("name"), str) else {})})
        if said:
            out.append(said)
    return out
