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
   notes): they were part of what the model read (counted as ``kept["hidden"]``). Nodes with
   no text (the empty system node every conversation opens with, the assistant's blank turn
   before a tool call) are left out and counted as ``empty``; the model's reasoning
   (``thoughts``, ``reasoning_recap``) is left out and counted as ``reasoning``, as the Claude
   Code and Codex readers leave it out.
4. Images, audio and files as the placeholder of :func:`lcm.normalize.media_placeholder`
   (``[image: file-service://file-...]``), never their bytes (the export has none anyway),
   counted by kind (``placeholders``); a voice turn is its transcript and an audio placeholder.
   A web search's hits, which the app keeps in the tool message's metadata, are its text.
5. An answer's citation markers (private-use characters around ``cite``/``turn0search0``)
   become the sources its ``content_references`` name, so no stray marker is stored.
6. What this reader does not know never costs the conversation: a content type is kept as its
   text or JSON, an author role as a ``system`` message named by that role, and a message it
   cannot read at all (no content object) is left out as ``unreadable``; each is said in a
   warning naming the kind and how many.

The tree is checked and walked by :class:`tools.chats.tree.Tree` (iteratively).
"""

from __future__ import annotations

import json
import re
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
                "real_time_video_frame_asset_pointer": "image", "video_container_asset_pointer": "video"}
#: a voice-mode turn's recording: a part holding the audio (and the camera's frames, if on)
_VOICE_PART = "real_time_user_audio_video_asset_pointer"
#: what ChatGPT wraps a citation marker in (U+E200 opens, U+E202 separates, U+E201 closes)
_MARKER = re.compile("\ue200[^\ue200\ue201]*\ue201")
_MARKER_CHARS = re.compile("[\ue200-\ue203]")


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
    odd = _Odd()
    out.branch_count, rest = tree.off(line)
    kept: dict[str, list[dict[str, Any]]] = {}
    for node in (*line, *rest):
        kept[node] = []
        _add(who, node, mapping[node], times.get(node), kept[node], out, odd)
    out.messages = [m for node in line for m in kept[node]]
    out.branches, out.fork_points = with_forks(tree, rest, kept, line)
    out.warnings += odd.said(who)
    return out


class _Odd:
    """What one conversation held that this reader does not know, said once per kind."""

    def __init__(self) -> None:
        self.types: Counter[str] = Counter()
        self.roles: Counter[str] = Counter()
        self.unreadable: list[str] = []

    def said(self, who: str) -> list[str]:
        out = [f"{who}: {_n(n, 'message')} of content type {kind!r}, which this reader does not know, kept "
               "as their text (or their JSON)" for kind, n in sorted(self.types.items())]
        out += [f"{who}: {_n(n, 'message')} of author role {role!r}, which this reader does not know, kept as "
                f"system messages named {role!r}" for role, n in sorted(self.roles.items())]
        if self.unreadable:
            shown = ", ".join(self.unreadable[:5]) + (", ..." if len(self.unreadable) > 5 else "")
            out.append(f"{who}: {_n(len(self.unreadable), 'message')} that could not be read, left out "
                       f"(the rest of the conversation is kept): {shown}")
        return out


def _n(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"


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
         out: ExportedConversation, odd: _Odd) -> None:
    """Append node ``nid``'s message to ``into`` (or count why it is left out)."""
    message = node.get("message")
    if message is None:
        return  # a tree's structural root: no message, nothing said
    content = message.get("content") if isinstance(message, dict) else None
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(message, dict) or not isinstance(content, dict) or not (parts is None or isinstance(parts, list)):
        # one message this reader cannot read costs that message, said, not the conversation
        out.left_out["unreadable"] += 1
        what = ("its message is not an object" if not isinstance(message, dict) else
                "its content is not an object" if not isinstance(content, dict) else "content.parts is not a list")
        odd.unreadable.append(f"node {nid!r} ({what})")
        return
    author = message.get("author")
    raw_role = author.get("role") if isinstance(author, dict) else None
    role = _ROLES.get(str(raw_role))
    if role is None:  # a role of a newer export: kept, as the app's role names the speaker
        odd.roles[str(raw_role or "none")] += 1
    kind = content.get("content_type")
    if kind in _REASONING:
        out.left_out["reasoning"] += 1
        return
    text = _cited(_content_text(content, odd.types, out.placeholders), message.get("metadata"))
    if not text.strip() and role == "tool":
        text = _search_hits(message.get("metadata"))
    attached = _attachments(message, text, out.placeholders)
    text = "\n".join(t for t in (text, *attached) if t)
    if not text.strip():
        out.left_out["empty"] += 1
        return
    msg: dict[str, Any] = {"role": role or "system", "content": text, "event_id": nid}
    if role is None:
        msg["name"] = str(raw_role or "none")[:64]
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        out.kept["hidden"] += 1  # the app did not show it; the model read it (custom instructions, memory)
    if role == "tool":
        out.kept["tool_output"] += 1
    if at is not None:
        msg["created_at"] = at
        own = message.get("create_time")
        if not own:  # a time taken from the parent or the conversation (see _times)
            out.borrowed_times.add(nid)
    name = author.get("name") if isinstance(author, dict) else None
    if role == "tool" and isinstance(name, str) and name:
        msg["name"] = name  # which tool spoke: python, browser, dalle.text2im
    into.append(msg)


def _content_text(content: dict[str, Any], unknown: Counter[str], media: Counter[str]) -> str:
    kind = content.get("content_type")
    parts = content.get("parts")
    if kind in ("text", "multimodal_text"):
        return "\n".join(t for t in (_part_text(p, media) for p in parts or []) if t)
    if kind in ("code", "execution_output", "system_error"):
        return _str(content.get("text"))
    if kind == "tether_quote":
        return "\n".join(t for t in (_str(content.get(k)) for k in ("title", "url", "text")) if t)
    if kind == "tether_browsing_display":
        return "\n".join(t for t in (_str(content.get(k)) for k in ("summary", "result")) if t)
    if kind == "sonic_webpage":  # a page the search tool opened
        return "\n".join(t for t in (_str(content.get(k)) for k in ("title", "url", "text")) if t)
    if kind == "app_pairing_content":  # what the user shared from another app (a terminal, an editor)
        said = [" - ".join(t for t in (_str(w.get("app_name")), _str(w.get("title"))) if t)
                for w in content.get("workspaces") or [] if isinstance(w, dict)]
        said += [_str(c.get("text")) for c in content.get("context_parts") or [] if isinstance(c, dict)]
        return "\n".join(t for t in said if t)
    if kind == "user_editable_context":  # the user's custom instructions, which the model read
        return "\n".join(t for t in (_str(content.get(k)) for k in ("user_profile", "user_instructions")) if t)
    if kind == "model_editable_context":  # the model's memory of the user ("bio" notes)
        return _str(content.get("model_set_context"))
    # a content type of a newer export: kept, never dropped, and said in a warning
    unknown[str(kind)] += 1
    if parts:
        return "\n".join(t for t in (_part_text(p, media) for p in parts) if t)
    if isinstance(content.get("text"), str):
        return str(content["text"])
    rest = {k: v for k, v in content.items() if k != "content_type" and v not in (None, "", [], {})}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True) if rest else ""


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _part_text(part: Any, media: Counter[str]) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return "" if part is None else json.dumps(part, ensure_ascii=False)
    kind = part.get("content_type")
    if isinstance(part.get("text"), str):  # audio_transcription, a text part spelled as an object
        return str(part["text"])
    if kind == _VOICE_PART:  # its recording (and video), each a placeholder: the transcript is its own part
        held = [part.get("audio_asset_pointer"), part.get("video_container_asset_pointer"),
                *(part.get("frames_asset_pointers") or [])]
        return "\n".join(_part_text(p, media) for p in held if isinstance(p, dict))
    kind_of = _MEDIA_PARTS.get(str(kind))
    if kind_of is not None:
        media[kind_of] += 1
        pointer = part.get("asset_pointer")
        said = {"type": "file" if kind_of == "video" else kind_of,
                **({"url": pointer} if isinstance(pointer, str) else {}),
                **{k: part[k] for k in ("mime_type", "format") if isinstance(part.get(k), str)}}
        placeholder = media_placeholder(said) or ""
        return placeholder.replace("[file", "[video", 1) if kind_of == "video" else placeholder
    return json.dumps(part, ensure_ascii=False, sort_keys=True)


def _search_hits(metadata: Any) -> str:
    """The hits a web search gave the model, which ChatGPT keeps in the tool message's
    ``metadata.search_result_groups`` (its text is empty): each hit's title, address and
    snippet, as Claude's export gives a search's results."""
    groups = metadata.get("search_result_groups") if isinstance(metadata, dict) else None
    hits = [entry for group in groups if isinstance(group, dict) for entry in group.get("entries") or []
            if isinstance(entry, dict)] if isinstance(groups, list) else []
    return "\n\n".join("\n".join(t for t in (_str(e.get(k)) for k in ("title", "url", "snippet")) if t)
                       for e in hits).strip()


def _cited(text: str, metadata: Any) -> str:
    """``text`` with ChatGPT's citation markers replaced by the sources they stand for.

    A marker is private-use characters around words (``\\ue200cite\\ue202turn0search0\\ue201``)
    that the app draws as a link; stored raw it is noise in search. Its ``content_references``
    entry gives the link as the app drew it (``alt``, Markdown), else its items' addresses, else
    its ``url`` or ``name`` (an entity's, a file's). A marker with no entry is dropped, but for
    an entity's (``\\ue200entity\\ue202["people", "Ada Lovelace", ...]\\ue201``), whose name is
    what the app shows in its place.
    """
    if "\ue200" not in text and "\ue201" not in text:
        return text
    refs = metadata.get("content_references") if isinstance(metadata, dict) else None
    for ref in refs if isinstance(refs, list) else []:
        matched = ref.get("matched_text") if isinstance(ref, dict) else None
        if not isinstance(matched, str) or not matched.strip() or matched not in text:
            continue
        alt = ref.get("alt")
        if not isinstance(alt, str) or not alt.strip():
            urls = [i["url"] for i in ref.get("items") or [] if isinstance(i, dict) and isinstance(i.get("url"), str)]
            urls += [ref["url"]] if isinstance(ref.get("url"), str) and ref["url"] else []
            alt = (f"({', '.join(dict.fromkeys(urls))})" if urls
                   else ref["name"] if isinstance(ref.get("name"), str) else "")
        text = text.replace(matched, alt)
    return _MARKER_CHARS.sub("", _MARKER.sub(_unreferenced, text))


def _unreferenced(marker: re.Match[str]) -> str:
    """What stands for a marker no reference names: an entity's name, else nothing."""
    kind, _, rest = marker.group(0)[1:-1].partition("\ue202")
    if kind == "entity":
        try:
            said = json.loads(rest)
        except ValueError:
            return ""
        if isinstance(said, list) and len(said) > 1 and isinstance(said[1], str):
            return said[1]
    return ""


def _attachments(message: dict[str, Any], text: str, media: Counter[str]) -> list[str]:
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
        media[kind] += 1
        said = media_placeholder({"type": kind, **{k: f[k] for k in ("mime_type",) if isinstance(f.get(k), str)},
                                  **({"filename": f["name"]} if isinstance(f.get("name"), str) else {})})
        if said:
            out.append(said)
    return out
