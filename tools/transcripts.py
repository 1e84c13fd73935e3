"""Host transcript formats ``amem lcm ingest`` reads, each line turned into lcm messages.

* ``jsonl``: one ``{role, content, ...}`` object a line, as ``LcmStore.ingest`` takes it.
* ``claude-code``: Claude Code's session files (``~/.claude/projects/<project>/<session>.jsonl``):
  ``{type: user|assistant, uuid, timestamp, message: {role, content}}``; ``content`` is text or
  blocks (``text``, ``tool_use``, ``tool_result``, ``thinking``). Each line's ``uuid`` is the
  message's event id, so a re-read stores nothing twice.
* ``codex``: Codex CLI rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``):
  ``{timestamp, type: response_item, payload: {type: message|function_call|function_call_output}}``.

Lines that carry no conversation (session metadata, progress, token counts, reasoning) give no
message; ``ingest`` reports how many lines it skipped so.
"""

from __future__ import annotations

import json
from typing import Any

from lcm.normalize import media_placeholder

FORMATS = ("auto", "jsonl", "claude-code", "codex")


def detect(obj: dict[str, Any]) -> str:
    """The format a transcript's first object is written in."""
    if "role" in obj:
        return "jsonl"
    if isinstance(obj.get("payload"), dict) and "timestamp" in obj:
        return "codex"
    if obj.get("type") in ("user", "assistant", "system", "summary", "file-history-snapshot"):
        return "claude-code"  # its first line is often a summary or a snapshot, not a message
    if "uuid" in obj and "sessionId" in obj:
        return "claude-code"
    return "jsonl"


def to_messages(obj: dict[str, Any], fmt: str) -> list[dict[str, Any]]:
    """The lcm messages one transcript line holds (none for a line that is not conversation)."""
    if fmt == "claude-code":
        return _claude_code(obj)
    if fmt == "codex":
        return _codex(obj)
    return [obj]


def _text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        # an image (a screenshot a tool returned, one the user pasted) is said by a short
        # placeholder: dropped, the message lost that it had one; whole, its base64 was the text
        return "\n".join(_block_text(b) for b in blocks)
    return "" if blocks is None else json.dumps(blocks, ensure_ascii=False, sort_keys=True)


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return str(block)
    media = media_placeholder(block)
    return media if media is not None else _text(block.get("text", block.get("content", "")))


def _claude_code(obj: dict[str, Any]) -> list[dict[str, Any]]:
    kind, message = obj.get("type"), obj.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        return []
    base: dict[str, Any] = {}
    if obj.get("timestamp"):
        base["created_at"] = obj["timestamp"]
    uuid = obj.get("uuid")
    content = message.get("content")
    if isinstance(content, str):
        return [{**base, "role": kind, "content": content, **({"event_id": uuid} if uuid else {})}]
    if not isinstance(content, list):
        return []
    out: list[dict[str, Any]] = []
    # the text blocks, and an image or document the user pasted said by a placeholder
    texts = [t for b in content if isinstance(b, dict)
             for t in [b.get("text") if b.get("type") == "text" else media_placeholder(b)]
             if isinstance(t, str) and t]
    calls = [{"id": b.get("id"), "name": b.get("name"), "input": b.get("input")}
             for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    if texts or calls:
        msg: dict[str, Any] = {**base, "role": kind, "content": "\n".join(texts)}
        if calls:
            msg["tool_calls"] = calls
        if uuid:
            msg["event_id"] = uuid
        out.append(msg)
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            out.append({**base, "role": "tool", "content": _text(b.get("content")),
                        "tool_call_id": b.get("tool_use_id") or None})
    return out


def _codex(obj: dict[str, Any]) -> list[dict[str, Any]]:
    payload = obj.get("payload")
    if obj.get("type") != "response_item" or not isinstance(payload, dict):
        return []
    base: dict[str, Any] = {"created_at": obj["timestamp"]} if obj.get("timestamp") else {}
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        role = "system" if role == "developer" else role
        return [{**base, "role": role, "content": _text(payload.get("content"))}]
    if kind == "function_call":
        return [{**base, "role": "assistant", "content": "",
                 "tool_calls": [{"id": payload.get("call_id"), "name": payload.get("name"),
                                 "arguments": payload.get("arguments")}]}]
    if kind == "function_call_output":
        output = payload.get("output")
        return [{**base, "role": "tool", "content": output if isinstance(output, str) else _text(output),
                 "tool_call_id": payload.get("call_id") or None}]
    return []
