"""The note commands: add, search, list, get, update, delete, history, unsupersede, separate,
import, export, consolidate, reembed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, TextIO

from .common import Cmd, not_routed, open_memory, progress, runtime
from .output import (EXIT_ERROR, EXIT_OK, clip, emit, kv_text, printable, search_table, usage_error,
                     width)
from .server import add_server_option, local_store, open_notes, remote_call, remote_page, remote_read

if TYPE_CHECKING:
    from amem import MemoryStore

    from ..remote import RemoteServer
    from ..runtime import Runtime
    from .common import Subparsers


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add the note commands to the ``amem`` parser (called by ``tools.cli.main``)."""
    p = cmd("add", cmd_add, "store one note")
    add_server_option(p)
    p.add_argument("text", help="the note text ('-' reads stdin)")
    p.add_argument("--subject", action="append", default=[], help="who/what it is about (repeat)")
    p.add_argument("--no-enrich", action="store_true", help="fast path: no enrichment, no links")
    p.add_argument("--tag", action="append", default=None, metavar="TAG",
                   help="a tag of the note (repeat); given tags are the note's enrichment, "
                        "embedded with its text, and no keywords are drawn beside them, as "
                        "for an imported note that carries tags")
    _note_field_options(p)

    p = cmd("search", cmd_search, "hybrid search over your notes")
    add_server_option(p)
    p.add_argument("query")
    p.add_argument("-n", "--limit", type=int, default=5, help="direct matches (default 5)")
    p.add_argument("--subject", help="only notes about this subject (plus notes about nobody)")
    p.add_argument("--topic", action="append", default=None, help="knowledge-note topic filter")
    p.add_argument("--history", action="store_true",
                   help="also show notes a newer note superseded (each after its successor)")
    p.add_argument("--since", metavar="ISO", help="only notes whose event time is at or after this")
    p.add_argument("--before", metavar="ISO", help="only notes whose event time is before this")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE",
                   help="only notes with this metadata value (repeat; a repeated key: any of)")
    p.add_argument("--tag", action="append", default=None, metavar="TAG",
                   help="only notes holding this tag, case-insensitive, a leading '#' or not, "
                        "a space or a hyphen alike (repeat: any of them)")

    p = cmd("list", cmd_list, "list your notes page by page")
    add_server_option(p)
    p.add_argument("-n", "--limit", type=int, default=20, help="notes per page (default 20)")
    p.add_argument("--offset", help="the next_offset printed by the previous page, or a number "
                   "of notes to skip")

    p = cmd("get", cmd_get, "show one note in full")
    add_server_option(p)
    p.add_argument("id")

    p = cmd("update", cmd_update, "edit one note in place (new text, subjects and/or tags)")
    add_server_option(p)
    p.add_argument("id")
    p.add_argument("--text", help="the new text ('-' reads stdin)")
    p.add_argument("--subject", action="append", default=None,
                   help="the new subjects, replacing the old ones (repeat)")
    p.add_argument("--no-subjects", action="store_true", help="clear the note's subjects")
    p.add_argument("--tag", action="append", default=None,
                   help="the new tags, replacing the old ones (repeat)")
    p.add_argument("--no-tags", action="store_true", help="clear the note's tags")

    p = cmd("delete", cmd_delete, "delete one note (soft delete), or --all of the agent's")
    add_server_option(p)
    p.add_argument("id", nargs="?", help="the note to delete")
    p.add_argument("--all", action="store_true",
                   help="erase every note of the agent for good (asks first on a terminal)")
    p.add_argument("--yes", action="store_true", help="with --all: do not ask (scripts)")

    p = cmd("history", cmd_history, "the supersession chain of one note: what it replaced, "
            "what replaced it")
    add_server_option(p)
    p.add_argument("id")

    p = cmd("unsupersede", cmd_unsupersede, "show a fact hidden by a newer note again, and "
            "keep it so (the judge never hides it behind that note again)")
    add_server_option(p)
    p.add_argument("id", help="the hidden (older) note")

    p = cmd("separate", cmd_separate, "undo a fold or a merge: a text joined into a note "
            "becomes its own note again, and the two are never joined again")
    add_server_option(p)
    p.add_argument("id", help="the note the text was joined into")
    p.add_argument("part", help="the joined text's id, as `amem history ID` shows it "
                                "(\"part ...\" of a fold, the note a merge took in)")

    p = cmd("import", cmd_import, "bulk import JSONL, JSON, CSV, Markdown, text, HTML or an "
                                  "Evernote export (or an amem export)")
    # the kinds amem.importdir reads in a folder (its .json and .csv files are left out, named)
    p.add_argument("file", help="the file to import, or a folder: every Markdown, text, JSONL, "
                                "HTML and Evernote (.enex) file under it (hidden ones, "
                                "attachments, tables and links to folders left out, and named)")
    p.add_argument("--format", choices=["jsonl", "json", "csv", "text", "html", "enex"],
                   help="default: from the extension (stdin: a JSON array, JSON lines, an "
                   "HTML page or an ENEX export told apart by how they open; text and CSV "
                   "need --format)")
    p.add_argument("--no-enrich", action="store_true", help="fast path for bulk ingestion")
    p.add_argument("--batch", type=int, help="notes per embedding batch, at least 1 (with "
                   "--from-export: notes written together, default 256)")
    p.add_argument("--from-export", action="store_true", help="the file is an `amem export`")
    p.add_argument("--title", help="a text, Markdown or HTML document's title, given to every note as "
                                   "a subject (default: its level-1 heading before any "
                                   "paragraph, else the file name; '' for none)")
    p.add_argument("--skip-invalid", action="store_true",
                   help="import the good lines of a file with bad ones (default: the whole "
                        "file is checked first and a bad line imports nothing, exit 2)")

    p = cmd("export", cmd_export, "write every note (all agents; one agent's with --agent) as "
            "JSON lines; while `amem serve --http` holds the store, through it (owner only)")
    add_server_option(p)
    p.add_argument("out", nargs="?", default="-", help="output file (default: stdout)")
    p.add_argument("--no-vectors", action="store_true", help="leave vectors out (re-embed on import)")

    p = cmd("consolidate", cmd_consolidate, "merge near-duplicates, resolve pending merges")
    p.add_argument("--all-agents", action="store_true", help="every agent, not just --agent")

    p = cmd("reembed", cmd_reembed, "rebuild every vector with another embedder")
    p.add_argument("--to", "--new-embedder", dest="new_embedder", required=True, metavar="NAME",
                   help="the embedder to rebuild with (the store then opens with it by default)")


def _note_field_options(p: argparse.ArgumentParser) -> None:
    """``amem add``'s event time, metadata and expiry (``amem.notefields``)."""
    p.add_argument("--event-time", metavar="ISO", help="when it happened (default: now)")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE",
                   help="a metadata label, stored as text (repeat)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--ttl", type=float, metavar="SECONDS", help="forget it after this long")
    when.add_argument("--expires-at", metavar="ISO", help="forget it at this time")


def _meta_option(pairs: list[str] | None) -> dict[str, Any] | None:
    """``--meta key=value`` options: one value per key, or a list for a repeated key."""
    if not pairs:  # before the import: the note fields' module loads the engines and numpy
        return None
    from amem.notefields import parse_meta_args

    parsed = parse_meta_args(pairs)
    return None if parsed is None else {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


@contextmanager
def _notes(args: argparse.Namespace) -> Iterator[tuple[MemoryStore | None, RemoteServer | None]]:
    """``(store, None)``, or ``(None, server)`` when a running server holds the store or
    ``--server`` names one (``tools.cli.server``); the store is closed at the end."""
    with runtime(args) as rt, open_notes(args, rt) as pair:
        yield pair


def _stdin_text() -> str:
    """The text piped in for ``-``, without the line break that ends it (``echo`` and editors
    add one; it is not part of the note). Other whitespace is kept."""
    text = sys.stdin.read()
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


def cmd_add(args: argparse.Namespace) -> int:
    text = _stdin_text() if args.text == "-" else args.text
    extra = {"event_time": args.event_time, "metadata": _meta_option(args.meta),
             "ttl": args.ttl, "expires_at": args.expires_at}
    extra = {k: v for k, v in extra.items() if v is not None}
    with _notes(args) as (store, server):
        if server is not None:
            if args.no_enrich:
                raise usage_error("--no-enrich cannot go through the running server (its "
                                  "memory_add always enriches); drop it, or stop the server",
                                  "no_enrich")
            wire = {"event_time": "eventTime", "expires_at": "expiresAt"}  # the tool's names
            result = remote_call(server, "memory_add",
                                 {"text": text, "subjects": args.subject,
                                  **({"tags": args.tag} if args.tag is not None else {}),
                                  **{wire.get(k, k): v for k, v in extra.items()}})
        else:
            result = local_store(store).add(text, args.subject, enrich=not args.no_enrich,
                                            tags=args.tag, **extra).to_dict()
    emit(args, result, lambda: _added(result))
    return EXIT_OK


def _added(result: dict[str, Any]) -> str:
    """``amem add``'s line: what became of the text, what it hid, and any warning (a fallback
    enrichment, a link not verified), as the JSON says them."""
    hidden = result.get("supersedes") or []
    return (f"{result['status']} {result['id']}"
            + (f" (links: {', '.join(result['links'])})" if result.get("links") else "")
            + (f"; supersedes {', '.join(hidden)}: hidden from search as replaced "
               f"(`amem history {hidden[0]}` shows it, `amem unsupersede {hidden[0]}` "
               "shows it again)" if hidden else "")
            + (f"; gained the tags {', '.join(result['tags_added'])}"
               if result.get("tags_added") else "")
            + "".join(f"\nwarning: {w}" for w in result.get("warnings") or ()))


def cmd_search(args: argparse.Namespace) -> int:
    narrow = {"since": args.since, "before": args.before, "metadata": _meta_option(args.meta),
              "tags": args.tag}
    with _notes(args) as (store, server):
        if server is not None:
            call = {"query": args.query, "limit": args.limit, "topicsFilter": args.topic,
                    "subject": args.subject, "includeSuperseded": args.history or None,
                    **narrow}
            hits = remote_call(server, "memory_search",
                               {k: v for k, v in call.items() if v is not None})["results"]
        else:
            hits = [h.to_dict() for h in local_store(store).search(
                args.query, limit=args.limit, topics_filter=args.topic, subject=args.subject,
                include_superseded=args.history, **narrow)]
    emit(args, {"results": hits}, lambda: search_table(hits))
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):
        if server is not None:
            page = remote_page(server, args.limit, args.offset)
            total, nxt = page["count"], page["next_offset"]
            rows = [{"id": r["id"], "timestamp": r["timestamp"], "content": r["content"]}
                    for r in page["notes"]]
        else:
            notes, nxt = local_store(store).list(limit=args.limit, offset=args.offset)
            total = local_store(store).count()
            rows = [{"id": n.id, "timestamp": n.timestamp, "content": n.content} for n in notes]

    def text() -> str:
        room = width() - 40
        lines = [f"{r['id'][:36]:<36}  {clip(r['content'], room)}" for r in rows]
        lines.append(f"{total} notes" + (f"; next page: --offset {nxt}" if nxt else ""))
        return "\n".join(lines)

    emit(args, {"count": total, "notes": rows, "next_offset": nxt}, text)
    return EXIT_OK


def cmd_get(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):  # the note as memory_get shows it, either way
        if server is not None:
            note = remote_call(server, "memory_get", {"id": args.id})
        else:  # imported here: the tools' module loads the store's, which a routed get skips
            from ..memory_tools import note_view

            note = note_view(local_store(store).get(args.id).to_payload())
    emit(args, note, lambda: kv_text(note))
    return EXIT_OK


def cmd_update(args: argparse.Namespace) -> int:
    if args.no_subjects and args.subject:
        raise usage_error("give --subject or --no-subjects, not both", "subjects")
    if args.no_tags and args.tag:
        raise usage_error("give --tag or --no-tags, not both", "tags")
    text = _stdin_text() if args.text == "-" else args.text
    subjects = [] if args.no_subjects else args.subject
    tags = [] if args.no_tags else args.tag
    if text is None and subjects is None and tags is None:
        raise usage_error("nothing to update: give --text, --subject, --tag, --no-subjects or "
                          "--no-tags", "text")
    call = {"id": args.id, "text": text, "subjects": subjects, "tags": tags}
    with _notes(args) as (store, server):
        result = (remote_call(server, "memory_update",
                              {k: v for k, v in call.items() if v is not None})
                  if server is not None
                  else local_store(store).update(args.id, content=text, subjects=subjects,
                                                 tags=tags).to_dict())
    emit(args, result, lambda: f"{result['status']} {result['id']}"
         + (f" ({', '.join(result['changed'])})" if result["changed"] else "")
         + (f"; supersedes {', '.join(result['supersedes'])}" if result["supersedes"] else "")
         + _current_again(result.get("released"), "the old text")
         + "".join(f"\nwarning: {w}" for w in result["warnings"]))
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):  # as memory_history shows it, either way
        data = (remote_call(server, "memory_history", {"id": args.id}) if server is not None
                else {"id": args.id, "chain": local_store(store).history(args.id)})
    emit(args, data, lambda: _chain_text(data))
    return EXIT_OK


def _chain_text(data: dict[str, Any]) -> str:
    """One line per note of the chain, oldest first: state, id, text."""
    lines = []
    for n in data["chain"]:
        state = (f"merged into {n['merged_into']}" if n.get("merged_into") else
                 "deleted" if not n["is_active"] else
                 f"hidden by {n['superseded_by']}" if n["superseded_by"] else "current")
        kept = f" (kept against {', '.join(n['kept_against'])})" if n["kept_against"] else ""
        mark = "*" if n["id"] == data["id"] else " "
        lines.append(f"{mark} {n['event_time'][:10]}  {n['id']}  [{state}]{kept}  "
                     f"{clip(n['content'], 80)}")
        lines.extend(_join_lines(n.get("events") or ()))
    hint = _separable(data["chain"])
    return "\n".join(lines + ([hint] if hint else []))


def _join_lines(events: Any) -> list[str]:
    """A line per text joined into the note: a fold at add (with its part id), a nightly merge
    (with the merged-away note's id: ``amem history`` of that id says "merged into"), each the
    id ``amem separate`` takes; a line per separation since, per tag join of a re-import, and
    per ``amem update`` (what it replaced: how a retag or an edit is found again)."""
    out = []
    for e in events:
        when = str(e.get("at") or "")[:10]
        if e.get("action") == "fold":
            out.append(f"    \u21b3 {when} folded in: {clip(str(e.get('folded_text', '')), 70)}"
                       f"  [part {e.get('triggered_by')}]")
        elif e.get("action") == "consolidate_merge":
            out.append(f"    \u21b3 {when} merged {e.get('merged')}: "
                       f"{clip(str(e.get('merged_text', '')), 60)}")
        elif e.get("action") == "separated":
            into = ("its own note again" if e.get("into") == e.get("part")
                    else f"now note {e.get('into')}")
            out.append(f"    \u21b3 {when} separated {e.get('part')}: {into}"
                       + ("" if e.get("text") != "kept" else " (the text was kept as it was)"))
        elif e.get("action") == "separated_from":
            out.append(f"    \u21b3 {when} separated from note {e.get('from')}")
        elif e.get("action") == "update":  # what `amem update` replaced (the note has the rest)
            out.append(f"    \u21b3 {when} updated: " + "; ".join(_replaced(e)))
        elif e.get("action") == "tags_added":
            out.append(f"    \u21b3 {when} tags added: {', '.join(e.get('tags') or ())} "
                       f"(given with the same text again; it held "
                       f"{', '.join(e.get('kept') or ()) or 'none'})")
        elif e.get("action") == "tags_tidied":
            out.append(f"    \u21b3 {when} tags tidied by `amem doctor --fix`: were "
                       f"{', '.join(e.get('old_tags') or ()) or 'none'}")
    return out


def _replaced(event: dict[str, Any]) -> list[str]:
    """What one update replaced, as it was: its text, subjects and tags, those it changed."""
    said = []
    if "old_content" in event:
        said.append(f'text was "{clip(str(event["old_content"]), 60)}"')
    for name in ("subjects", "tags"):
        if f"old_{name}" in event:
            said.append(f"{name} were {', '.join(event[f'old_{name}'] or ()) or 'none'}")
    return said


def _separable(chain: list[dict[str, Any]]) -> str | None:
    """The hint under a history with a join not undone: the command that undoes it."""
    for n in chain:
        events = n.get("events") or ()
        done = {e.get("part") for e in events if e.get("action") == "separated"}
        for e in events:
            part = (e.get("triggered_by") if e.get("action") == "fold"
                    else e.get("merged") if e.get("action") == "consolidate_merge" else None)
            if part is not None and part not in done and n.get("is_active"):
                return (f"(`amem separate {n['id']} {part}` makes that text its own note "
                        "again, and keeps the two apart)")
    return None


def cmd_unsupersede(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_unsupersede", {"id": args.id, "confirm": True})
                if server is not None else local_store(store).unsupersede(args.id))
    emit(args, data, f"{data['id']} is current again; it stays so against "
                     f"{data['was_superseded_by']}")
    return EXIT_OK


def cmd_separate(args: argparse.Namespace) -> int:
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_separate",
                            {"id": args.id, "part": args.part, "confirm": True})
                if server is not None
                else local_store(store).separate(args.id, args.part).to_dict())
    emit(args, data, lambda: _separated(data))
    return EXIT_OK


def _separated(data: dict[str, Any]) -> str:
    """``amem separate``'s lines: the two notes, what left the first, and any warning."""
    how = "folded" if data["joined_by"] == "fold" else "merged"
    removed = "; ".join(f"{name}: {', '.join(items)}" for name, items in data["removed"].items())
    return (f"separated: {data['note']} is its own note again (it was {how} into {data['id']})"
            + (f"\n{data['id']} has its text from before" if data["text_restored"]
               else f"\n{data['id']} keeps its text as it is")
            + (f"; taken out of it: {removed}" if removed else "")
            + (f"\nthe sentences of {', '.join(data['also_taken_out'])}, separated before, came "
               "out of its text too" if data.get("also_taken_out") else "")
            + (f"\n{data['note']} links {', '.join(data['links'])}" if data.get("links") else "")
            + (f"\n{data['note']} replaces {', '.join(data['supersedes'])} (hidden behind it)"
               if data.get("supersedes") else "")
            + (f"\nlinking {data['note']} again: {', '.join(data['relinked'])}"
               if data.get("relinked") else "")
            + "".join(f"\nwarning: {w}" for w in data.get("warnings") or ()))


def cmd_delete(args: argparse.Namespace) -> int:
    if args.all or args.id is None:
        return _delete_all(args)
    if args.yes:
        raise usage_error("--yes only goes with --all", "yes")
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_delete", {"id": args.id}) if server is not None
                else local_store(store).delete(args.id).to_dict())
    emit(args, data, f"deleted {data['id']}" + _current_again(data.get("released"), "it"))
    return EXIT_OK


def _current_again(released: list[str] | None, replacer: str) -> str:
    """The tail of ``update``'s and ``delete``'s lines naming the older notes shown again."""
    return (f"; current again: {', '.join(released)} (the older notes {replacer} had replaced)"
            if released else "")


def _delete_all(args: argparse.Namespace) -> int:
    """``amem delete --all``: the agent's whole memory, after a yes on a terminal."""
    if args.id is not None or not args.all:
        raise usage_error("give one note id, or --all (not both)", "id")
    agent = runtime(args).agent_id
    if not args.yes:
        if not sys.stdin.isatty():  # a script or a pipe cannot have meant it without --yes
            raise usage_error("delete --all erases every note of the agent for good: add --yes "
                              "to confirm when stdin is not a terminal", "yes")
        print(f"Erase every note of agent {agent!r} for good? Type 'yes' to confirm: ",
              end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing deleted", file=sys.stderr)
            return EXIT_ERROR
    with _notes(args) as (store, server):
        data = (remote_call(server, "memory_delete_all", {"confirm": True}) if server is not None
                else {"deleted": local_store(store).delete_all()})
    emit(args, {"agent": agent, **data}, f"deleted {data['deleted']} notes of agent {agent}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    if args.file == "-":
        return _import_stdin(args)
    folder = Path(args.file).expanduser().is_dir()
    if folder and (args.from_export or args.title is not None or args.format):
        raise usage_error("a folder is imported file by file, each by its extension and with "
                          "its own title: --from-export, --title and --format take one file",
                          "file")
    if not folder and not Path(args.file).expanduser().is_file():
        # said here, in `amem lcm ingest`'s words: the CLI's argument is `file` (the library's
        # error names its own parameter, `path`)
        what = "not a file" if Path(args.file).expanduser().exists() else "no such file"
        raise usage_error(f"{what}: {args.file}", "file")
    if args.from_export and args.title is not None:
        raise usage_error("--title is for a text or Markdown document; an export keeps each "
                          "note's own subjects", "title")
    return _import(args, Path(args.file).expanduser(), folder=folder)


def _import_stdin(args: argparse.Namespace) -> int:
    """``amem import -``: what is piped in, spooled to a private file for the two passes
    (``tools.cli.spool``), then imported as a file is, named ``stdin`` in the report and its
    errors ("stdin:3: ...")."""
    from .spool import sniffed, spooled

    if args.from_export:  # an export keeps ids and vectors: a file the user can keep
        raise usage_error("--from-export reads a file: save the export and give its path",
                          "file")
    with spooled(sys.stdin.fileno()) as path:  # removed however the import ends
        if args.format is None:
            args.format = sniffed(path)
            if args.format is None:
                raise usage_error("stdin is empty" if not path.stat().st_size else
                                  "stdin is neither a JSON array ([...]) nor JSON lines ({...} "
                                  "a line): pass --format text for Markdown or text, or "
                                  "--format json|jsonl|csv|html|enex", "format")
        return _import(args, path, folder=False, source="stdin")


def _import(args: argparse.Namespace, path: Path, *, folder: bool,
            source: str | None = None) -> int:
    from amem.export import load_export
    from amem.importdir import import_dir, refuse_chat_export
    from amem.importer import import_file

    if folder:
        refuse_chat_export(path)  # before the store opens: an unzipped chat export is no notes
    with open_memory(args) as store, _resumable():
        # the bar ends (one 100% line) before anything else is said on stderr
        with progress(args, "import") as bar:
            if folder:
                report = import_dir(store, path, enrich=not args.no_enrich, batch=args.batch,
                                    progress=bar, skip_invalid=args.skip_invalid)
            elif args.from_export:
                report = load_export(store, args.file, batch=args.batch,
                                     skip_invalid=args.skip_invalid, progress=bar)
            else:
                report = import_file(store, path, fmt=args.format,
                                     enrich=not args.no_enrich, batch=args.batch, progress=bar,
                                     skip_invalid=args.skip_invalid, title=args.title,
                                     source=source)
        # The process ends here, so a due index build runs now (in the foreground) instead of
        # leaving the imported points to brute-force search until the nightly job.
        index = store.index.build
        ran = index.state == "running"
        if (ran or index.due()) and not getattr(args, "quiet", False):
            print(f"building the search index ({index.points_since} points written and "
                  f"{index.points_moved} moved out of it since the last build) ...",
                  file=sys.stderr)
        # a build the import started as it went ends first; it built what it copied, so what
        # was written after its copy is still counted and built here
        index.wait()
        built = index.maybe_build(background=False) or ran
    data = report.to_dict()
    data["index_build"] = index.to_dict()
    if not args.json:
        # the skipped lines and the warnings are diagnostics (stderr), not the import's result
        # (stdout); --json has them in the report's "errors" and "warnings"
        shown = data["errors"][:20]
        for error in shown:
            print(printable(f"amem: skipped {error}"), file=sys.stderr)
        if data["skipped"] > len(shown):
            print(f"amem: ... and {data['skipped'] - len(shown)} more skipped lines",
                  file=sys.stderr)
        for warning in data["warnings"]:  # the library keeps at most 100, then "... and N more"
            print(printable(f"amem: warning: {warning}"), file=sys.stderr)
        if data.get("json_key"):  # said, so a file with two lists is not read silently
            print(printable(f"amem: read the notes listed under {data['json_key']!r} of "
                            f"{data['path']}'s top-level object"), file=sys.stderr)
        for why, count in data.get("left_out_by_reason", {}).items():  # a folder's (--json: each)
            print(printable(f"amem: left out {count} {'path' if count == 1 else 'paths'}: {why}"),
                  file=sys.stderr)
    emit(args, data, lambda: (
        (f"{data['files']} files, " if "files" in data else "")
        + f"read {data['read']}: created {data['created']}, "
        + (f"unchanged {data['unchanged']} (already stored as exported), replaced "
           f"{data['replaced']}, " if args.from_export else
           f"deduplicated {data['deduplicated']}, folded {data['folded']}, pending merge "
           f"{data['pending_merge']}, ")
        + f"skipped {data['skipped']} ({data['notes_per_second']} notes/s)"
        + _supersede_line(data)
        + (f"\n{data['title_added']} stored notes hold the same text from a file of another "
           f"name: they gained this file's name as a subject, not a second copy"
           if data.get("title_added") else "")
        + (f"\n{data['tags_added']} stored notes gained tags given with a text they hold "
           f"(`amem history ID` shows which): {', '.join(data['tags_added_to'])}"
           + (" ..." if data["tags_added"] > len(data["tags_added_to"]) else "")
           if data.get("tags_added") else "")
        + (f"\ntags_kept_removed {data['tags_kept_removed']}: stored notes whose user removed "
           f"tags this import gives again kept them out (`amem history ID` shows the removal; "
           f"`amem update ID --tag ...` puts one back): "
           f"{', '.join(data['tags_kept_removed_from'])}"
           + (" ..." if data["tags_kept_removed"] > len(data["tags_kept_removed_from"]) else "")
           if data.get("tags_kept_removed") else "")
        + (f"\nindex build: {data['index_build']['state']} in {data['index_build']['seconds']} s"
           if built else "")))
    return EXIT_OK if not data["skipped"] else EXIT_ERROR


@contextmanager
def _resumable() -> Iterator[None]:
    """A Ctrl-C during an import says what it left: the batches written are kept, and the
    same import run again stores only the rest (a line keeps its id), instead of a bare
    "interrupted" that left the user to wonder whether to delete and start over."""
    try:
        yield
    except KeyboardInterrupt:
        print("amem: the import was stopped; the notes it wrote are kept, and running the same "
              "import again stores only the rest (nothing twice)", file=sys.stderr)
        raise


def _supersede_line(data: dict[str, Any]) -> str:
    """What the import did to older facts, in words (the --json report has the same counts)."""
    if data["supersede"] == "as exported":
        return "\nsupersession marks kept as exported (nothing judged again)"
    parts = [f"superseded {data['superseded']} older notes (judged: {data['supersede']})"]
    if data.get("supersede_deferred"):
        parts.append(f"{data['supersede_deferred']} left to the nightly sweep")
    if data.get("expired_replaced"):
        parts.append(f"replaced {data['expired_replaced']} expired notes")
    return "\n" + "; ".join(parts)


def cmd_export(args: argparse.Namespace) -> int:
    # a backup of the whole store by default; an --agent given on the command line asks for
    # that agent's notes alone (it was accepted and ignored: every tenant's notes went out
    # under one agent's name)
    one = getattr(args, "agent", None) is not None
    with runtime(args) as rt, ExitStack() as stack:
        out = sys.stdout if args.out == "-" else stack.enter_context(_export_target(args.out))
        count, through = export_notes(args, rt, out, agent=rt.agent_id if one else None,
                                      vectors=not args.no_vectors)
        whose = f"of agent {rt.agent_id}" if one else "(all agents)"
    if args.out != "-":
        emit(args, {"path": args.out, "exported": count, "agent_id": rt.agent_id if one else None,
                    "through_server": through},
             f"exported {count} notes {whose} to {args.out}"
             + (" (through the running server)" if through else ""))
    else:
        print(f"exported {count} notes {whose}", file=sys.stderr)
    return EXIT_OK


def export_notes(args: argparse.Namespace, rt: Runtime, out: TextIO, *, agent: str | None,
                 vectors: bool) -> tuple[int, bool]:
    """Every note (``agent``'s alone when given) into ``out`` as export lines, from the store
    or through the server holding it; how many, and whether a server wrote them."""
    from amem.export import export_store

    with open_notes(args, rt) as (store, server), progress(args, "export") as bar:
        if server is not None:  # the server holding the store exports it, page by page
            return _export_through(server, out, agent=agent, vectors=vectors, progress=bar), True
        # one agent's export is the CLI's own agent's, as the store was opened for it
        return export_store(local_store(store), out, all_agents=agent is None,
                            with_vectors=vectors, progress=bar), False


#: notes a page of a routed export holds (~4 KB each with its vector)
EXPORT_PAGE = 500


def _export_through(server: RemoteServer, out: TextIO, *, agent: str | None, vectors: bool,
                    progress: Callable[[int, int | None], None]) -> int:
    """``amem export`` while ``amem serve`` holds the store: the owner's export pages
    (``amem://owner/export``), written as they come. Notes written meanwhile may or may not be
    in it; every note acknowledged before it began is (``amem.export.export_page``); a tar of
    the served home lost half of them."""
    from urllib.parse import urlencode

    from ..remote import OWNER_EXPORT

    written, cursor, total = 0, None, None
    while True:
        query = {"limit": str(EXPORT_PAGE), "vectors": "1" if vectors else "0",
                 **({"cursor": cursor} if cursor else {}), **({"agent": agent} if agent else {})}
        page = remote_read(server, f"{OWNER_EXPORT}?{urlencode(query)}")
        total = page.get("total", total)
        for line in page["lines"]:
            out.write(line)
        written += len(page["lines"])
        progress(written, total)
        cursor = page.get("next")
        if not cursor:
            return written


def _export_target(name: str) -> ContextManager[TextIO]:
    """Where ``amem export OUT`` writes: a file is replaced only once the export is whole (a
    killed or failed export used to leave OUT cut short, often at a line end, so nothing
    told it from a full backup, and the previous backup at that name was already gone). A
    device, a pipe or a link at OUT is written in place, as before."""
    from amem.atomicfile import writing_atomic

    path = Path(name)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        return open(path, "w", encoding="utf-8")
    return writing_atomic(path)


def cmd_consolidate(args: argparse.Namespace) -> int:
    with open_memory(args) as store:
        with progress(args, "consolidate") as bar:
            report = store.consolidate(all_agents=args.all_agents, progress=bar)
    data = report.to_dict()
    # which notes went where: a merged note leaves search (its sentences now in the survivor),
    # so the user can look at each (`amem history`, `amem get`)
    data["merged"] = [{"note": loser, "into": survivor, "agent_id": agent}
                      for agent, a in report.agents.items() for loser, survivor in a.merged]

    def text() -> str:
        merged = data["merged"]
        lines = [f"merged {m['note']} into {m['into']}" for m in merged[:20]]
        if len(merged) > 20:
            lines.append(f"... and {len(merged) - 20} more (--json lists them all)")
        if merged:
            lines.append(f"(a merged note is found through its survivor, which holds its words and "
                         f"values: `amem get {merged[0]['into']}`; `amem history {merged[0]['note']}` "
                         "shows where it went)")
        return kv_text({k: v for k, v in data.items() if k != "merged"}) + (
            "\n" + "\n".join(lines) if lines else "")

    emit(args, data, text)
    return EXIT_OK


def cmd_reembed(args: argparse.Namespace) -> int:
    from amem.errors import StoreLockedError
    from amem.reembed import reembed

    from ..runtime import make_embedder

    cfg = runtime(args).settings.amem
    embedder = make_embedder(args.new_embedder, threads=cfg.embed_threads,
                             cache_dir=Path(cfg.home) / "models")
    with progress(args, "reembed") as bar:
        try:
            report = reembed(cfg, embedder, progress=bar)
        except StoreLockedError as exc:
            raise not_routed("reembed", cfg.home, exc) from None
    data = report.to_dict()
    data["conversations"] = _reembed_conversations(args)
    emit(args, data, lambda: (
        f"rebuilt {data['notes']} notes: {data['old_embedder']} -> {data['new_embedder']} "
        f"in {data['seconds']} s\nthe store opens with {args.new_embedder} from now on, "
        f"unless --embedder, AMEM_EMBEDDER or the config file names another\n"
        f"{data['conversations']}"))
    return EXIT_OK


def _reembed_conversations(args: argparse.Namespace) -> str:
    """The home's conversation store follows the notes to the new embedder, and what was done.

    It keeps the embedder its vectors were made by until told to switch (its semantic recall
    refuses another); the home's own file is switched here, since this command changes the
    home's embedder. A PostgreSQL store other hosts share is left to them, said so.
    """
    from lcm.pg.url import is_postgres_url

    rt = runtime(argparse.Namespace(**{**vars(args), "embedder": args.new_embedder}))
    with rt:
        where = rt.lcm_database()
        if where is None or is_postgres_url(where):
            return ("the conversation store is shared (PostgreSQL) and keeps its embedder: switch it "
                    f"for every host with `amem --embedder {args.new_embedder} lcm embed --switch-embedder`")
        if not Path(where).expanduser().exists():
            return "no conversation store in this home: nothing else to switch"
        embedding = rt.switch_lcm_embedder().status().embedding
        owed = 0 if embedding is None else embedding.debt
    return (f"the conversation store now uses {args.new_embedder} too: its {owed} messages and summaries "
            "are embedded again by `amem lcm embed` or the nightly job (semantic recall misses them until then)")
