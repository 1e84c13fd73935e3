"""A way in for hosts: ``amem lcm ingest FILE`` and ``amem lcm assemble``.

(A ChatGPT or Claude ``conversations.json`` given to ``ingest`` goes to
:mod:`tools.cli.lcm_chats`: many conversations, each with its own key.)

Over MCP the conversation store is read-only (the model must not write its own history). A host
that is not the model feeds its transcript in with ``ingest`` and asks for the context to send
with ``assemble``. Ingest is idempotent: each line without an id of its own gets one from its
line number and text (and the run's ``--session-id``), so feeding the same (or a grown) file
again stores only the new lines. Those keys prove each line its own event, so the store's
replay guard counts only lines with times of their own; a flood among them is refused, and a
refusal after earlier batches were committed says what is kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amem.kernel import safejson
from amem.kernel.encoding import encoding_of
from amem.kernel.errors import InvalidArgumentError

from ..transcripts import FORMATS, detect, to_messages
from .common import Cmd, runtime
from .output import CODE_EXITS, EXIT_ERROR, CliError, emit, printable, usage_error

if TYPE_CHECKING:
    from .common import Subparsers

#: messages per ``LcmStore.ingest`` call (one transaction each)
BATCH = 500


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register ``lcm ingest`` and ``lcm assemble`` under ``amem lcm``."""
    p = cmd("ingest", cmd_lcm_ingest, "store a JSONL transcript ({role, content, ...} per line), or every "
            "conversation of a ChatGPT or Claude export (conversations.json)", into=lsub)
    p.add_argument("file", help="JSONL file, '-' for stdin, or a ChatGPT / Claude conversations.json, "
                   "the export's zip, or the folder it was unzipped into")
    p.add_argument("--session-key", help="the session the messages belong to (required for a transcript; an "
                   "export's conversations each get their own, agent:<agent>:chatgpt|claude:<id>)")
    p.add_argument("--session-id", help="the host's id of this run of the session")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="jsonl ({role, content} lines), claude-code, codex (default: detected, and a "
                   "ChatGPT or Claude export too)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="an export: store the conversations that can be read and name the rest (exit 1), "
                   "instead of refusing the file")
    p = cmd("assemble", cmd_lcm_assemble, "print the context to send the model for a session", into=lsub)
    p.add_argument("--session-key", required=True, help="the session to assemble")
    p.add_argument("--budget", type=int, required=True, help="token budget of the context")
    p.add_argument("--prompt", help="the next prompt (prompt-aware eviction)")
    p.add_argument("--model", help="the host's model (contextThresholdOverrides match it)")
    p.add_argument("--context-window", type=int, help="the model's context window in tokens")


def read_transcript(path: str, stdin_text: str | None = None, fmt: str = "auto", *,
                    unfinished: list[str] | None = None
                    ) -> tuple[list[tuple[str, str, dict[str, Any]]], str, int]:
    """The messages of a JSONL transcript, its format, and the lines that held none.

    Each message comes with a position (``line`` or ``line.k`` when a line holds several) and
    its line's text, for its key. A bad line raises naming its number (nothing stored).

    With ``unfinished`` (a list), a last line that has no line end and is not JSON is left
    out and said there instead of refusing the file: a host's session file read while the
    host is still writing it (or after it was killed mid-line). Its key is its number and
    text, so the next feed stores it once it is whole.
    """
    if path == "-":
        text = (stdin_text or "").removeprefix("\ufeff")  # a byte-order mark piped in
    else:
        try:
            raw = Path(path).expanduser().read_bytes()
        except FileNotFoundError:
            # a usage error (exit 2), as `amem import` of a missing file: exit 3 is for an id
            # the store does not have
            raise usage_error(f"no such file: {path}", "file") from None
        try:
            # a UTF-8 byte-order mark is dropped (it made line 1 "not valid JSON"), and one of
            # UTF-16 or UTF-32 (PowerShell's `>`) says the file is in that encoding
            text = raw.decode(encoding_of(raw[:4]))
        except UnicodeDecodeError as exc:
            # invalid input, named by line as a bad JSON line is (exit 2, nothing stored)
            number = raw.count(b"\n", 0, exc.start) + 1
            raise usage_error(f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
                              "a transcript is UTF-8 JSON lines", f"line {number}") from None
    if text.lstrip().startswith("["):
        array = _json_array(text, path)
        if array is not None:
            return array, "jsonl", 0
    elif path == "-" and text.lstrip().startswith("{"):
        _refuse_wrapped_export(text)
    messages: list[tuple[str, str, dict[str, Any]]] = []
    empty = 0
    # split on "\n" only (a "\r" before it dropped): str.splitlines() also breaks at U+2028,
    # U+2029, U+0085 and other separators, which JSON allows raw inside a string (Node's
    # JSON.stringify, which writes Claude Code's session files, leaves U+2028/2029 as they are)
    rows = text.split("\n")
    for number, line in enumerate((ln.removesuffix("\r") for ln in rows), 1):
        if not line.strip():
            continue
        try:  # bad JSON, deep nesting, lone surrogates: one rule (amem.kernel.safejson)
            msg = safejson.loads(line, root=f"line {number}")
        except InvalidArgumentError as exc:
            if unfinished is not None and number == len(rows) and _cut_short(line):
                unfinished.append(f"{path}:{number}: the last line has no line end and is not "
                                  f"JSON ({exc}); left for the next feed, which stores it once "
                                  "its writer has finished it")
                break
            raise usage_error(f"{path}:{number}: {exc}", f"line {number}") from None
        if not isinstance(msg, dict):
            raise usage_error(f"{path}:{number}: expected an object with role and content",
                              f"line {number}")
        if fmt == "auto":
            fmt = detect(msg)
        found = to_messages(msg, fmt)
        empty += not found
        messages += [(f"{number}" if len(found) == 1 else f"{number}.{k}", line, m) for k, m in enumerate(found)]
    return messages, "jsonl" if fmt == "auto" else fmt, empty


#: what a file of one JSON array is, by the keys of its first object
_EXPORTS = (("mapping", "a ChatGPT export (conversations.json: each conversation a tree of "
                        "messages)"),
            ("chat_messages", "a Claude export (conversations.json)"))


def _json_array(text: str, path: str) -> list[tuple[str, str, dict[str, Any]]] | None:
    """The messages of a file that is one JSON array of ``{role, content}`` objects (an OpenAI
    ``messages`` list, saved whole), each keyed as line ``i`` (its place, 1-based) by its JSON;
    None when the text is no JSON array (then it is read as lines, and named by line).

    An array of anything else (a ChatGPT or Claude export of many conversations) is refused
    naming what it is: it was "line 1: expected an object", or a JSON error on line 1 of a
    pretty-printed file.
    """
    try:
        items = safejson.loads(text, root="the file")
    except InvalidArgumentError:
        return None
    if not isinstance(items, list):
        return None
    if items and all(isinstance(m, dict) and "role" in m for m in items):
        return [(f"{i}", json.dumps(m, ensure_ascii=False, sort_keys=True), m)
                for i, m in enumerate(items, 1)]
    first = items[0] if items else None
    kind = next((what for key, what in _EXPORTS if isinstance(first, dict) and key in first),
                "a JSON array that is not a list of {role, content} messages")
    if path == "-" and first is not None and any(isinstance(first, dict) and key in first for key, _ in _EXPORTS):
        # an export is read twice (checked whole, then stored) and streamed: from a file only
        raise usage_error(f"stdin is {kind} ({len(items)} {'item' if len(items) == 1 else 'items'}); "
                          "save it to a file and give that: amem lcm ingest conversations.json", "file")
    raise usage_error(
        f"{path} is {kind} ({len(items)} {'item' if len(items) == 1 else 'items'}); amem lcm "
        "ingest reads one session's transcript: JSON lines of {role, content} messages (or "
        "one JSON array of them), a Claude Code session file or a Codex CLI rollout, or every "
        "conversation of a ChatGPT or Claude export", "file")


#: an export wrapped as {"conversations": [...]}, by its opening: the key only its
#: conversations have (tools.chats.source reads such a file given by name)
_WRAPPED = re.compile(r'^\s*\{.*?"conversations"\s*:\s*\[\s*\{.*?"(mapping|chat_messages)"\s*:', re.DOTALL)


def _refuse_wrapped_export(text: str) -> None:
    """Refuse an export wrapped as ``{"conversations": [...]}`` piped in, as a bare one is (a
    file is read by ``amem lcm ingest FILE``, which takes either); it was read as one JSON line,
    a message without a role. Told by its first 64 KiB: a transcript's lines are not parsed twice."""
    found = _WRAPPED.match(text[:1 << 16])
    if found is not None:
        kind = next(what for key, what in _EXPORTS if key == found.group(1))
        raise usage_error(f"stdin is {kind} wrapped as {{\"conversations\": [...]}}; save it to a file and give "
                          "that: amem lcm ingest conversations.json", "file")


def _cut_short(line: str) -> bool:
    """Whether ``line`` (not JSON) reads as the start of a JSON line cut short: JSON that
    ends too early, not a line of something else."""
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        # the text ran out: inside a string (its error is said where the string starts), or
        # where more JSON was due
        ran_out = exc.msg.startswith("Unterminated string") or exc.pos >= len(line.rstrip())
        return line.lstrip().startswith(("{", "[")) and ran_out
    return False


def _keyed(lines: list[tuple[str, str, dict[str, Any]]], session_id: str | None = None
           ) -> list[dict[str, Any]]:
    """Validate every message first, then give each one without a host id a stable one.

    The key is the line's number and text, and the run's ``--session-id`` when given: a line
    is a position in one run's transcript (``lcm.ingest`` rule 2), so another run's line 1
    saying the same "continue" is another message, and the same run fed again (a grown
    file) keys its old lines as before."""
    from lcm.errors import LcmValidationError
    from lcm.normalize import normalize_messages

    messages = [msg for _, _, msg in lines]
    try:
        normalized = normalize_messages(messages, "1970-01-01T00:00:00.000Z")
    except LcmValidationError as exc:
        raise _at_line(exc, lines, 0) from None
    for norm, (number, line, msg) in zip(normalized, lines):
        if norm.stable_event_key is None:
            digest = hashlib.sha256(line.encode()).hexdigest()[:16]
            # without a session id the key keeps the form stores already hold for those lines
            msg["event_id"] = (f"line:{number}:{digest}" if session_id is None
                               else f"line:{session_id}:{number}:{digest}")
    return messages


def cmd_lcm_ingest(args: argparse.Namespace) -> int:
    import sys

    if args.file != "-" and args.format == "auto":
        from .lcm_chats import cmd_lcm_ingest_export, sniff_export

        path = Path(args.file).expanduser()
        if not path.exists():
            # said before anything else: a missing export was asked for its --session-key
            raise usage_error(f"no such file: {args.file}", "file")
        app = sniff_export(path)
        if app is not None:
            return cmd_lcm_ingest_export(args, path, app)
    if args.skip_invalid:
        raise usage_error("--skip-invalid is for a ChatGPT or Claude export (conversations.json); a "
                          "transcript is checked whole and a bad line named", "skip_invalid")
    unfinished: list[str] = []
    # read before the key is asked for: what the input is (an export piped in, which is read
    # from a file only) is the first thing to fix, and was hidden behind "--session-key is
    # required", whose fix only led to that refusal
    lines, fmt, empty = read_transcript(args.file, sys.stdin.read() if args.file == "-" else None,
                                        args.format, unfinished=unfinished)
    if not args.session_key:
        raise usage_error("--session-key is required for a transcript (the session its messages belong "
                          "to, such as agent:<agent>:main)", "session_key")
    messages = _keyed(lines, args.session_id)
    stored = skipped = 0
    conversation = None
    with runtime(args) as rt:
        store = rt.lcm
        for start in range(0, len(messages), BATCH):
            try:
                res = store.ingest(args.session_key, messages[start:start + BATCH], session_id=args.session_id)
            except Exception as exc:
                said = _at_line(exc, lines, start)  # a refused message named by its line, not its place in the batch
                if start == 0:
                    raise said from (None if said is exc else exc)
                raise _partly_stored(said, lines[start][0], start, stored, skipped) from exc
            stored += res.stored
            skipped += res.skipped_duplicates
            conversation = res.conversation_id if res.conversation_id is not None else conversation
    warnings = list(unfinished)
    if args.file == "-" and skipped:
        # stdin has no file to grow: its lines are keyed by number like a file's, so a host
        # piping one turn a call would see a repeated turn taken for a line already stored
        warnings.append(f"{skipped} {'line was' if skipped == 1 else 'lines were'} taken as "
                        "already stored by their line number "
                        "and text; stdin is keyed like a file fed again, so a host that pipes "
                        "one turn a call gives each run its --session-id, or each message an "
                        "event_id or created_at")
    data = {"format": fmt, "read": len(messages), "stored": stored, "skipped_duplicates": skipped,
            "lines_without_messages": empty, "conversation_id": conversation, "warnings": warnings}
    for warning in warnings if not args.json else []:
        print(printable(f"amem: warning: {warning}"), file=sys.stderr)
    emit(args, data, lambda: f"read {len(messages)} ({fmt}): stored {stored}, already there {skipped}"
         + (f", {empty} lines held no message" if empty else "")
         + (f" (conversation {conversation})" if conversation is not None else ""))
    return 0


def _at_line(exc: Exception, lines: list[tuple[str, str, dict[str, Any]]], start: int) -> Exception:
    """``exc`` naming the file's line where it names ``messages[i]`` of a batch starting at
    message ``start``: the line is what the user can find (a 500-message batch's index is not)."""
    from lcm.errors import LargeFilesDirMissingError, LcmValidationError

    field = getattr(exc, "field", None) or ""
    found = re.match(r"messages\[(\d+)\]", field)
    if found is None or start + int(found.group(1)) >= len(lines):
        return exc
    number = lines[start + int(found.group(1))][0].split(".")[0]
    text = f"line {number}: " + str(exc).replace(found.group(0), "the message", 1)
    if isinstance(exc, LargeFilesDirMissingError):
        return LargeFilesDirMissingError(text, field=f"line {number}")
    if isinstance(exc, LcmValidationError):
        return LcmValidationError(text, field=f"line {number}")
    return exc


#: how a store's refusal says that nothing of its batch was stored (dropped once earlier batches were)
_NOTHING_STORED = re.compile(r"[;,.]?\s*nothing (?:of it |of this batch )?was stored\.?", re.IGNORECASE)


def _partly_stored(exc: Exception, line: str, start: int, stored: int, skipped: int) -> Exception:
    """A refusal after earlier batches were committed, said as such: what is stored stays
    stored (each batch is one transaction), and feeding the file again resumes, since the
    stored lines are keyed and taken as already there. The store's own "nothing was stored"
    is dropped: it speaks of the batch, and here earlier batches are kept."""
    from lcm.errors import LcmValidationError

    code = getattr(exc, "code", None)
    code = code if isinstance(code, str) else "error"
    said = _NOTHING_STORED.sub("", str(exc)).rstrip(" .;") + "."
    # a refused line must be fixed first; a lost server or a busy store only needs the rerun
    redo = ("fix that line and feed the file again" if isinstance(exc, LcmValidationError)
            else "feed the file again once the store answers")  # fmt: skip
    return CliError(f"{said} The batch from line {line} on was refused whole; the {start} "
                    f"messages before it are kept ({stored} stored now, {skipped} already "
                    f"there): {redo} to store the rest (the kept lines are taken as already there).",
                    code=code, exit_code=CODE_EXITS.get(code, EXIT_ERROR),
                    field=getattr(exc, "field", None))


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
