"""``amem lcm ingest conversations.json``: a ChatGPT or Claude data export, every conversation.

Reached from ``amem lcm ingest`` when the file is such an export, the zip the app sent with
one inside, or the folder a user unzipped it into (:func:`tools.chats.load.sniff`);
the loading itself is :mod:`tools.chats.load`. This module only words the outcome: the report
on stdout, what was skipped or left out on stderr, exit 1 when conversations were skipped (as
``amem import --skip-invalid`` does).
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from .common import progress, runtime
from .output import CODE_EXITS, EXIT_ERROR, EXIT_OK, CliError, emit, printable, usage_error

_APP_NAMES = {"chatgpt": "ChatGPT", "claude": "Claude"}


def sniff_export(path: Path) -> str | None:
    """The app whose export ``path`` is, or None (:func:`tools.chats.load.sniff`); a zip made to
    harm its reader (a bomb, a member outside the archive) is a usage error naming it."""
    from ..chats.load import NoExportFound, UnsafeExport, sniff
    from ..chats.source import no_export_in_folder

    try:
        if not path.is_dir():
            return sniff(path) if path.is_file() else None
        app = sniff(path)
    except (NoExportFound, UnsafeExport) as exc:
        raise usage_error(str(exc), "file") from None
    if app is None:  # a folder is an unzipped export or nothing ingest reads (no transcript is one)
        raise usage_error(no_export_in_folder(path), "file")
    return app


def refuse_export(command: str, file: str, fmt: str, why: str) -> None:
    """Refuse ``file`` (a usage error naming ``amem lcm ingest FILE``) when it is a chat app's
    export, for a command that takes one transcript (``why`` says what it does with one).

    ``amem lcm backfill`` is such a command: it stores one transcript under one key
    (``backfill:<session id>``) and transplants it into one conversation. An export is many
    conversations, each with a key of its own and its branches beside it; folded into one
    transcript they would lose both, so the export is loaded by the command that keeps them.
    """
    if file == "-" or fmt != "auto":
        return  # stdin is read as a transcript, which names an export it finds
    app = sniff_export(Path(file).expanduser())
    if app is not None:
        raise usage_error(f"{file} is a {_APP_NAMES[app]} export of many conversations; {command} takes one "
                          f"transcript ({why}). Load the export with: amem lcm ingest {file} (each conversation "
                          f"under agent:<agent>:{app}:<its id>, its branches beside it)", "file")


def cmd_lcm_ingest_export(args: argparse.Namespace, path: Path, app: str) -> int:
    from ..chats import StreamError
    from ..chats.load import ExportRejected, PartlyStored, UnsafeExport, key_prefix, load_export

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
        except (ExportRejected, UnsafeExport) as exc:
            raise usage_error(str(exc), "file") from None
        except StreamError as exc:
            raise usage_error(f"{exc}; a {_APP_NAMES[app]} export is one JSON array of conversations"
                              + ("" if not args.skip_invalid else
                                 " (the conversations before that line are stored)"), "file") from None
        except UnicodeDecodeError as exc:
            raise usage_error(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); nothing "
                              "after it was read", "file") from None
        except (zipfile.BadZipFile, EOFError) as exc:
            raise usage_error(f"{path}: the zip is damaged ({exc or 'it ends early'}); download the export "
                              "again, or unzip what can be read and give its conversations.json", "file") from None
        except KeyboardInterrupt:
            # each conversation is its own transactions: what was stored stays, and the same
            # import again stores only the rest (every message keeps its export id)
            print("amem: the import was stopped; the conversations it stored are kept, and running the "
                  "same import again stores only the rest (nothing twice)", file=sys.stderr)
            raise
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
        if report.invalid > len(report.errors):  # the report names the first 100
            print(f"amem: ... and {report.invalid - len(report.errors)} more skipped conversations", file=sys.stderr)
        for warning in data["warnings"]:
            print(printable(f"amem: warning: {warning}"), file=sys.stderr)
        if report.warning_count > len(report.warnings):
            print(f"amem: ... and {report.warning_count - len(report.warnings)} more warnings", file=sys.stderr)
    emit(args, data, lambda: _text(data))
    return EXIT_OK if not report.invalid else EXIT_ERROR


def _n(count: object, thing: str) -> str:
    """``1 conversation``, ``2 conversations``."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


def _text(data: dict[str, object]) -> str:
    left = data["left_out"]
    assert isinstance(left, dict)
    lines = [f"read {_n(data['conversations'], 'conversation')} ({data['format']} export): stored "
             f"{_n(data['stored'], 'message')} in {_n(data['conversations_stored'], 'conversation')}, already "
             f"there {data['skipped_duplicates']} ({data['seconds']} s)",
             f"conversations are under {data['session_key_prefix']}<id>"]
    if data["branches"]:
        branches = "branch" if data["branches"] == 1 else "branches"
        lines.append(f"{data['branches']} edited or regenerated {branches} ({_n(data['branch_messages'], 'message')}) "
                     "kept apart, under <that key>:branches, each after a marker naming the message it follows")
    if data.get("fork_points_placed"):  # a store that held the branches before markers existed
        lines.append(f"{_n(data['fork_points_placed'], 'fork marker')} moved into place, each before the "
                     "branch it opens" + (f"; {data['fork_points_after_summary']} of them after the summary that holds "
                                          "its branch's opening (named in the warnings)"
                                          if data.get("fork_points_after_summary") else ""))
    kept, media = data["kept"], data["placeholders"]
    assert isinstance(kept, dict) and isinstance(media, dict)
    if kept:
        said = {"hidden": lambda n: f"{_n(n, 'message')} the app hides (custom instructions, memory notes)",
                "tool_output": lambda n: f"{n} tool {'output' if n == 1 else 'outputs'}"}
        lines.append("kept " + ", ".join(said.get(why, lambda n: f"{n} {why}")(n) for why, n in kept.items()))
    if media:
        lines.append("stored as placeholders (the export holds no bytes of them): "
                     + ", ".join(f"{n} {kind}" + ("s" if n != 1 and kind != "audio" else "")
                                 for kind, n in media.items()))
    if left:
        said = {"empty": lambda n: f"{_n(n, 'message')} with no text",
                "reasoning": lambda n: f"{n} of the model's reasoning (thinking)",
                "internal": lambda n: f"{n} of the app's internal {'marker' if n == 1 else 'markers'} (token budget)",
                "unreadable": lambda n: f"{_n(n, 'message')} that could not be read (named in the warnings)"}
        lines.append("left out " + ", ".join(said.get(why, lambda n: f"{n} {why}")(n) for why, n in left.items()))
    files, parts = data["files_left_out"], data["parts"]
    assert isinstance(files, dict) and isinstance(parts, list)
    if files:  # a zip's or a folder's files beside its conversations
        said = {"web_page": lambda n: f"{n} web page of the same conversations (chat.html)",
                "export_data": lambda n: f"{n} of the account's other data",
                "media": lambda n: f"{_n(n, 'file')} uploaded or generated in the chats",
                "hidden": lambda n: f"{n} hidden",
                "other_export": lambda n: f"{n} of another export's conversations (named on stderr)",
                "unknown": lambda n: f"{n} no export holds (named on stderr)"}
        lines.append(f"read {_n(len(parts), 'file')} of conversations ({parts[0]}{', ...' if len(parts) > 1 else ''}); "
                     "other files not read: "
                     + ", ".join(said.get(why, lambda n: f"{n} {why}")(n) for why, n in files.items()))
    if data["empty_conversations"]:
        lines.append(f"{_n(data['empty_conversations'], 'conversation')} held no message")
    if data["invalid"]:
        lines.append(f"skipped {_n(data['invalid'], 'conversation')} that cannot be read (named on stderr)")
    return "\n".join(lines)
