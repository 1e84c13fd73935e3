"""What the ``amem`` command writes: results on stdout, errors and JSON-line logs on stderr.

It imports nothing of ours, so every command module can use it. Exit codes: 0 ok, 1 error,
2 usage or invalid input, 3 not found, 4 store busy (another process owns the embedded store),
130 interrupted, 141 stdout closed by its reader (``amem ... | head``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
from typing import Any, Callable, Mapping, Sequence, TextIO

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_BUSY, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: the reader of stdout went away (128 + SIGPIPE, as for any Unix filter)
EXIT_BROKEN_PIPE = 141

#: the exit code of an error by its code (any other code exits 1)
CODE_EXITS = {"invalid_argument": EXIT_USAGE, "config_error": EXIT_USAGE,
              "regex_refused": EXIT_USAGE, "forbidden": EXIT_USAGE, "not_found": EXIT_NOT_FOUND,
              "replay_flood": EXIT_USAGE, "store_locked": EXIT_BUSY}


class CliError(Exception):
    """A failure the CLI reports in one line and maps to an exit code."""

    def __init__(self, message: str, *, code: str = "error", exit_code: int = EXIT_ERROR,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.exit_code = exit_code
        self.field = field


def usage_error(message: str, field: str | None = None) -> CliError:
    """A bad option or argument: code ``invalid_argument``, exit 2."""
    return CliError(message, code="invalid_argument", exit_code=EXIT_USAGE, field=field)


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str]) -> None:
    """Print ``data`` as JSON with ``--json``, else the human ``text`` (:func:`printable`)."""
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(printable(text() if callable(text) else text))


#: what a terminal would act on rather than show: C0 and C1 controls but the line breaks and
#: tabs the output is made of, DEL, and the bidirectional overrides and isolates that reorder
#: what follows them on screen (a "Trojan Source" line)
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as an escape (``\\x1b``).

    Notes and messages are written by agents, often from untrusted pages and chats: printed
    raw, "ESC[2J" in a note cleared the reader's screen, and a right-to-left override turned
    the rest of a line around. JSON output is left as it is (its reader is a program, and
    ``json.dumps`` escapes controls itself)."""
    return _UNSHOWN.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def width() -> int:
    """The terminal's width (at least 60 columns)."""
    return max(60, shutil.get_terminal_size((100, 24)).columns)


#: a Markdown heading line and its ``#`` marks
_HEADING = re.compile(r"^[ ]{0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")


def clip(text: str, room: int) -> str:
    """``text`` on one line, cut to ``room`` characters with an ellipsis. A Markdown heading
    (an imported section's title) ends with a dash, so that it does not read as the first
    words of the paragraph after it."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        lines = [f"{m.group(1)} —" if (m := _HEADING.match(line)) else line for line in lines]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= room else text[: max(1, room - 1)] + "…"


def search_table(results: Sequence[Mapping[str, Any]]) -> str:
    """A readable table of the matches (rank, score, via, id, content, clipped to the
    terminal), then the linked notes search added as what they are: notes the matches link
    to, in a block of their own without a score (they were not matched)."""
    if not results:
        return "no matches"
    matches = [r for r in results if r.get("via") != "link"]
    linked = [r for r in results if r.get("via") == "link"]
    ids = [str(r["id"]) for r in results]
    idw = min(max(len(i) for i in ids), 36)
    head = f"{'#':>2}  {'score':>7}  {'via':<5}  {'id':<{idw}}  content"
    room = width() - len(head) + len("content")
    lines = [head, "-" * min(width(), len(head) + room - len("content"))]
    for n, r in enumerate(matches, 1):
        lines.append(f"{n:>2}  {float(r.get('rrf') or 0):>7.4f}  {r['via']:<5}  "
                     f"{clip(str(r['id']), idw):<{idw}}  {clip(str(r['content']), room)}")
        said = _supersession(r)
        if said:  # under the row, where its id stands: what replaced it, or what it hides
            lines.append(f"{'':>2}  {'':>7}  {'':<5}  {clip(said, room + idw + 2)}")
    if not matches:
        lines.append("no direct matches")
    if linked:
        rank = {str(r["id"]): n for n, r in enumerate(matches, 1)}
        lines.append("")
        lines.append(f"linked from the matches ({len(linked)}; not matched themselves):")
        for r in linked:
            sources = sorted(n for match_id, n in rank.items()
                             if str(r["id"]) in _links(matches[n - 1]) or match_id in _links(r))
            via = ("from " + ",".join(f"#{n}" for n in sources)) if sources else "link"
            # the same columns as the matches' rows: "from #1,#2" stands where rank, score
            # and via stand
            lines.append(f"{'':>2}  {via:<14}  {clip(str(r['id']), idw):<{idw}}  "
                         f"{clip(str(r['content']), room)}")
    return "\n".join(lines)


def _links(hit: Mapping[str, Any]) -> list[str]:
    return [str(i) for i in hit.get("links") or []]


def _supersession(result: Mapping[str, Any]) -> str:
    """What ``--json`` says of a match's place in a supersession chain, in words (empty when
    nothing): a replaced note (shown with ``--history``), one changed in part, one hiding
    older notes."""
    parts = []
    if result.get("superseded_by"):
        parts.append(f"replaced by {result['superseded_by']} (shown for --history)")
    if result.get("partly_superseded_by"):
        parts.append(f"partly changed by {result['partly_superseded_by']}; shown for the rest")
    hidden = list(result.get("hidden") or [])
    if hidden:
        parts.append(f"hides {', '.join(hidden[:3])}{' ...' if len(hidden) > 3 else ''} "
                     f"(amem history {hidden[0]})")
    return "↳ " + "; ".join(parts) if parts else ""


def kv_text(data: Mapping[str, Any], indent: str = "") -> str:
    """A nested mapping as indented ``key: value`` lines."""
    lines = []
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            lines.append(f"{indent}{key}:")
            lines.append(kv_text(value, indent + "  "))
        elif isinstance(value, Mapping):  # empty: its name alone, not over a blank line
            lines.append(f"{indent}{key}: ")
        elif isinstance(value, (list, tuple)):  # a tuple is a list to the reader, not Python's repr
            shown = ", ".join(json.dumps(v, ensure_ascii=False, default=str)
                              if not isinstance(v, str) else v for v in value)
            lines.append(f"{indent}{key}: {shown}")
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)


def report_error(args: argparse.Namespace | None, err: CliError) -> int:
    """Say ``err`` on stderr (and as ``{"error": ...}`` on stdout with ``--json``); its exit code."""
    if args is not None and getattr(args, "json", False):
        print(json.dumps({"error": {"code": err.code, "message": str(err), "field": err.field}},
                         ensure_ascii=False))
    print(printable(f"amem: error: {err}"), file=sys.stderr)
    return err.exit_code


def setup_logging(verbose: int, env: Mapping[str, str]) -> Callable[[], None]:
    """JSON lines on stderr (never stdout: it is the MCP wire in ``amem serve``); returns what
    puts the root logger back as it was.

    The console script never calls it: its process ends with the command. A program that runs
    commands in its own process (``main(argv, env=...)``: tests, an embedding program) does, so
    one command's handler and level do not outlive it: a handler left on the root logger wrote
    a later thread's records to a stream its caller had closed ("--- Logging error ---"), and
    a level left at DEBUG by ``-vv`` made every later library log in that process.
    """
    level_name = env.get("AMEM_LOG_LEVEL", "").upper()
    level = getattr(logging, level_name, None) if level_name else None
    if not isinstance(level, int):
        level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    before, before_level = list(root.handlers), root.level
    for old in [h for h in root.handlers if getattr(h, "_amem", False)]:
        root.removeHandler(old)
    handler = _StderrNow()
    handler.setFormatter(_JsonFormatter())
    handler._amem = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)

    def restore() -> None:
        # Every amem handler set up since goes, not only this one (`serve` and `scheduler`
        # set up their own within the command this call wraps); the caller's handlers come
        # back in their order, and one another part of the program added meanwhile stays.
        now = list(root.handlers)
        kept = [h for h in before if h in now or getattr(h, "_amem", False)]
        kept += [h for h in now if h not in before and not getattr(h, "_amem", False)]
        for h in now:
            root.removeHandler(h)
        for h in kept:
            root.addHandler(h)
        root.setLevel(before_level)

    return restore


class _StderrNow(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler that writes to whatever ``sys.stderr`` is when a record comes, not to the
    stream it was when the handler was made (a test's capture, long closed; a redirected
    stderr put back)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # always the current sys.stderr


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
