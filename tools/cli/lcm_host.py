"""A way in for hosts: ``amem lcm ingest FILE`` and ``amem lcm assemble``.

Over MCP the conversation store is read-only (the model must not write its own history). A host
that is not the model feeds its transcript in with ``ingest`` and asks for the context to send
with ``assemble``. Ingest is idempotent: each line without an id of its own gets one from its
line number and text, so feeding the same (or a grown) file again stores only the new lines; the
store's replay guard still refuses floods of identical messages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..transcripts import FORMATS, detect, to_messages
from .common import Cmd, runtime
from .output import CliError, emit, usage_error

if TYPE_CHECKING:
    from .common import Subparsers

#: messages per ``LcmStore.ingest`` call (one transaction each)
BATCH = 500


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register ``lcm ingest`` and ``lcm assemble`` under ``amem lcm``."""
    p = cmd("ingest", cmd_lcm_ingest, "store a JSONL transcript ({role, content, ...} per line)", into=lsub)
    p.add_argument("file", help="JSONL file, '-' for stdin")
    p.add_argument("--session-key", required=True, help="the session the messages belong to")
    p.add_argument("--session-id", help="the host's id of this run of the session")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="jsonl ({role, content} lines), claude-code, codex (default: detected)")
    p = cmd("assemble", cmd_lcm_assemble, "print the context to send the model for a session", into=lsub)
    p.add_argument("--session-key", required=True, help="the session to assemble")
    p.add_argument("--budget", type=int, required=True, help="token budget of the context")
    p.add_argument("--prompt", help="the next prompt (prompt-aware eviction)")
    p.add_argument("--model", help="the host's model (contextThresholdOverrides match it)")
    p.add_argument("--context-window", type=int, help="the model's context window in tokens")


def read_transcript(path: str, stdin_text: str | None = None, fmt: str = "auto"
                    ) -> tuple[list[tuple[str, str, dict[str, Any]]], str, int]:
    """The messages of a JSONL transcript, its format, and the lines that held none.

    Each message comes with a position (``line`` or ``line.k`` when a line holds several) and
    its line's text, for its key. A bad line raises naming its number (nothing stored).
    """
    if path == "-":
        text = stdin_text or ""
    else:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except FileNotFoundError:
            # a usage error (exit 2), as `amem import` of a missing file: exit 3 is for an id
            # the store does not have
            raise usage_error(f"no such file: {path}", "file") from None
    messages: list[tuple[str, str, dict[str, Any]]] = []
    empty = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as exc:
            raise usage_error(f"line {number}: not JSON ({exc})", f"line {number}") from None
        if not isinstance(msg, dict):
            raise usage_error(f"line {number}: expected an object with role and content",
                              f"line {number}")
        if fmt == "auto":
            fmt = detect(msg)
        found = to_messages(msg, fmt)
        empty += not found
        messages += [(f"{number}" if len(found) == 1 else f"{number}.{k}", line, m) for k, m in enumerate(found)]
    return messages, "jsonl" if fmt == "auto" else fmt, empty


def _keyed(lines: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Validate every message first, then give each one without a host id a stable one."""
    from lcm.errors import LcmValidationError
    from lcm.ingest import normalize_messages

    messages = [msg for _, _, msg in lines]
    try:
        normalized = normalize_messages(messages, "1970-01-01T00:00:00.000Z")
    except LcmValidationError as exc:
        # "messages[i].role" -> the file's line number, which is what the user can find
        found = re.match(r"messages\[(\d+)\]", exc.field or "")
        if found is None:
            raise
        number = lines[int(found.group(1))][0].split(".")[0]
        raise LcmValidationError(f"line {number}: {exc}", field=f"line {number}") from None
    for norm, (number, line, msg) in zip(normalized, lines):
        if norm.stable_event_key is None:
            msg["event_id"] = f"line:{number}:{hashlib.sha256(line.encode()).hexdigest()[:16]}"
    return messages


def cmd_lcm_ingest(args: argparse.Namespace) -> int:
    import sys

    lines, fmt, empty = read_transcript(args.file, sys.stdin.read() if args.file == "-" else None, args.format)
    messages = _keyed(lines)
    stored = skipped = 0
    conversation = None
    with runtime(args) as rt:
        store = rt.lcm
        for start in range(0, len(messages), BATCH):
            res = store.ingest(args.session_key, messages[start:start + BATCH], session_id=args.session_id)
            stored += res.stored
            skipped += res.skipped_duplicates
            conversation = res.conversation_id if res.conversation_id is not None else conversation
    data = {"format": fmt, "read": len(messages), "stored": stored, "skipped_duplicates": skipped,
            "lines_without_messages": empty, "conversation_id": conversation}
    emit(args, data, lambda: f"read {len(messages)} ({fmt}): stored {stored}, already there {skipped}"
         + (f", {empty} lines held no message" if empty else "")
         + (f" (conversation {conversation})" if conversation is not None else ""))
    return 0


def cmd_lcm_assemble(args: argparse.Namespace) -> int:
    with runtime(args) as rt:
        ctx = rt.lcm.assemble(args.session_key, args.budget, prompt=args.prompt, model=args.model,
                              context_window=args.context_window)
    data = ctx.to_dict()

    def text() -> str:
        lines = [f"[{it['role']}{' summary ' + it['id'] if it['type'] == 'summary' else ''}] {it['content']}"
                 for it in data["items"]]
        lines.append(f"-- {data['total_tokens']} of {data['token_budget']} tokens, {data['summary_count']} "
                     f"summaries, {data['tail_count']} recent messages")
        lines += [f"warning: {w}" for w in data["warnings"]]
        return "\n".join(lines)

    emit(args, data, text)
    return 0
