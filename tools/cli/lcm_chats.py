"""``amem lcm ingest conversations.json``: a ChatGPT or Claude data export, every conversation.

Reached from ``amem lcm ingest`` when the file is such an export (:func:`tools.chats.load.sniff`);
the loading itself is :mod:`tools.chats.load`. This module only words the outcome: the report
on stdout, what was skipped or left out on stderr, exit 1 when conversations were skipped (as
``amem import --skip-invalid`` does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .common import progress, runtime
from .output import CODE_EXITS, EXIT_ERROR, EXIT_OK, CliError, emit, printable, usage_error

_APP_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude"}


def cmd_lcm_ingest_export(args: argparse.Namespace, path: Path, app: str) -> int:
    from ..chats import StreamError
    from ..chats.load import ExportRejected, PartlyStored, key_prefix, load_export

    if args.session_key or args.session_id:
        flag = "--session-key" if args.session_key else "--session-id"
        raise usage_error(f"{path} is a {_APP_NAMES[app]} export of many conversations; each is stored under a "
                          f"key of its own (agent:<agent>:{app}:<its id>), so {flag} is not taken: drop it "
                          "(--agent chooses the agent)", flag.lstrip("-").replace("-", "_"))
    with runtime(args) as rt:
        agent = rt.agent_id
        try:
            with progress(args, f"{app} export", "conversation") as bar:
                report = load_export(rt.lcm, path, app, agent, skip_invalid=args.skip_invalid, progress=bar)
        except ExportRejected as exc:
            raise usage_error(str(exc), "file") from None
        except StreamError as exc:
            raise usage_error(f"{exc}; a {_APP_NAMES[app]} export is one JSON array of conversations"
                              + ("" if not args.skip_invalid else
                                 " (the conversations before that line are stored)"), "file") from None
        except UnicodeDecodeError as exc:
            raise usage_error(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); nothing "
                              "after it was read", "file") from None
        except PartlyStored as exc:
            code = getattr(exc.cause, "code", None)
            code = code if isinstance(code, str) else "error"
            raise CliError(str(exc), code=code, exit_code=CODE_EXITS.get(code, EXIT_ERROR),
                           field=getattr(exc.cause, "field", None)) from exc.cause
    data = report.to_dict()
    data["format"] = app
    data["session_key_prefix"] = key_prefix(agent, app)
    if not args.json:
        for error in data["errors"]:
            print(printable(f"amem: skipped {error}"), file=sys.stderr)
        for warning in data["warnings"]:
            print(printable(f"amem: warning: {warning}"), file=sys.stderr)
    emit(args, data, lambda: _text(data))
    return EXIT_OK if not report.invalid else EXIT_ERROR


def _text(data: dict[str, object]) -> str:
    left = data["left_out"]
    assert isinstance(left, dict)
    lines = [f"read {data['conversations']} conversations ({data['format']} export): stored {data['stored']} "
             f"messages in {data['conversations_stored']} conversations, already there "
             f"{data['skipped_duplicates']} ({data['seconds']} s)",
             f"conversations are under {data['session_key_prefix']}<id>"]
    if data["branches"]:
        lines.append(f"{data['branches']} edited or regenerated branches ({data['branch_messages']} messages) "
                     "kept apart, under <that key>:branches")
    if left:
        lines.append("left out " + ", ".join(f"{n} {why}" for why, n in left.items())
                     + " (messages with no text; the model's reasoning)")
    if data["empty_conversations"]:
        lines.append(f"{data['empty_conversations']} conversations held no message")
    if data["invalid"]:
        lines.append(f"skipped {data['invalid']} conversations that cannot be read (named on stderr)")
    return "\n".join(lines)
