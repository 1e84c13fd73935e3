"""``amem lcm browse|rewrite|repair|dissolve|transplant|backfill|prompts``: the operator's repair kit.

A thin layer over :mod:`lcm.operator`: every command that writes is a dry run unless given
``--apply`` (the plan is printed either way), and each write is the library's one transaction.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..transcripts import FORMATS
from .common import Cmd, runtime
from .output import emit, kv_text, usage_error

if TYPE_CHECKING:
    from lcm import LcmStore

    from .common import Subparsers

_DRY = "dry run: nothing written (--apply writes it)"


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register the repair kit's commands under ``amem lcm``."""
    browse: argparse.ArgumentParser = cmd("browse", lambda a: _need_sub(browse), "read-only views: conversations, messages, "
                 "the summary tree, the context view, large files", into=lsub)
    bsub = browse.add_subparsers(dest="browse_command", metavar="VIEW")
    p = cmd("conversations", cmd_browse_conversations, "conversations with message/summary/file counts", into=bsub)
    p.add_argument("--limit", type=int, default=100, help="rows per page (default 100)")
    p.add_argument("--after", type=int, metavar="ID", help="the page after this conversation id")
    p.add_argument("--session-key", help="only this session key's conversations")
    p = cmd("messages", cmd_browse_messages, "one window of a conversation's messages", into=bsub)
    p.add_argument("conversation", type=int, help="conversation id")
    p.add_argument("--after", type=_cursor, metavar="msg_ID|SEQ",
                   help="the window after this message (msg_ID, as a window prints it), or after "
                        "this sequence number (a position: `amem restore --merge` renumbers them)")
    p.add_argument("--before", type=_cursor, metavar="msg_ID|SEQ",
                   help="the window before this message (msg_ID), or this sequence number")
    p.add_argument("--newest", action="store_true", help="the newest window (default: the oldest)")
    p.add_argument("--limit", type=int, default=50, help="messages per window (default 50)")
    p = cmd("tree", cmd_browse_tree, "the summary DAG as a tree (kind, depth, tokens, sources)", into=bsub)
    p.add_argument("conversation", type=int, help="conversation id")
    p = cmd("context", cmd_browse_context, "what the model receives next turn, with token totals", into=bsub)
    p.add_argument("conversation", type=int, help="conversation id")
    p.add_argument("--budget", type=int, required=True, help="the token budget assemble would get")
    p.add_argument("--prompt", help="the next prompt (prompt-aware eviction)")
    p = cmd("files", cmd_browse_files, "large files, biggest first, with exploration summaries", into=bsub)
    p.add_argument("--conversation", type=int, help="only this conversation's files")
    p.add_argument("--min-bytes", type=int, default=0, help="only files at least this large")
    p.add_argument("--limit", type=int, default=100, help="at most this many files")

    p = cmd("rewrite", cmd_rewrite, "re-summarize summaries from their sources with the current prompts "
            "(dry run unless --apply)", into=lsub)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--summary", metavar="ID", help="one summary")
    what.add_argument("--depth", type=int, help="every summary at this depth of --conversation")
    what.add_argument("--all", action="store_true", help="every summary of --conversation, bottom-up")
    what.add_argument("--subtree", metavar="ID", help="this summary and everything it was built from, bottom-up")
    p.add_argument("--conversation", type=int, help="the conversation of --depth / --all")
    _write_flags(p)
    p = cmd("repair", cmd_repair, "rewrite with the LLM the summaries no LLM wrote (extractive, fallback, "
            "truncated; dry run unless --apply)", into=lsub)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--conversation", type=int, help="one conversation's summaries")
    what.add_argument("--summary", metavar="ID", help="one summary")
    what.add_argument("--all", action="store_true", help="every conversation")
    _write_flags(p)
    p = cmd("dissolve", cmd_dissolve, "undo a condensation: put a condensed summary's sources back in the "
            "context (dry run unless --apply)", into=lsub)
    p.add_argument("summary", help="the condensed summary (it must be in the active context)")
    p.add_argument("--keep", action="store_true", help="keep the summary's record (default: delete it)")
    p.add_argument("--apply", action="store_true", help="write it (default: show the plan only)")
    p = cmd("transplant", cmd_transplant, "deep-copy a conversation's summary DAG into another one "
            "(dry run unless --apply)", into=lsub)
    p.add_argument("source", type=int, help="conversation to copy from")
    p.add_argument("target", type=int, help="conversation to copy into (the copies go first in its context)")
    p.add_argument("--summary", action="append", metavar="ID",
                   help="copy this summary's DAG (repeatable; default: the source's context summaries)")
    p.add_argument("--apply", action="store_true", help="write it (default: show the plan only)")
    p = cmd("backfill", cmd_backfill, "import a transcript from before lcm, compact it, optionally "
            "transplant it (dry run unless --apply)", into=lsub)
    p.add_argument("file", help="JSONL transcript, '-' for stdin")
    p.add_argument("--session-id", required=True, help="the transcript's id (a second run imports nothing)")
    p.add_argument("--transplant-to", type=int, metavar="CONV", help="transplant the summaries into this conversation")
    p.add_argument("--format", choices=FORMATS, default="auto", help="transcript format, as `amem lcm ingest` (default: detected)")
    p.add_argument("--max-rounds", type=int, default=20, help="compaction rounds at most (default 20)")
    p.add_argument("--single-root", action="store_true",
                   help="condense the whole transcript (its fresh tail too) into one root summary")
    p.add_argument("--apply", action="store_true", help="write it (default: show the plan only)")

    prompts: argparse.ArgumentParser = cmd("prompts", lambda a: _need_sub(prompts), "the depth-aware summary prompts: list, show, "
                  "export, diff", into=lsub)
    psub = prompts.add_subparsers(dest="prompts_command", metavar="ACTION")
    cmd("list", cmd_prompts_list, "each level's prompt and where it comes from", into=psub)
    p = cmd("show", cmd_prompts_show, "print one level's prompt", into=psub)
    p.add_argument("level", choices=["leaf", "d1", "d2", "d3+"], help="the level")
    p = cmd("export", cmd_prompts_export, "write the prompts in use to a directory, to edit", into=psub)
    p.add_argument("directory", help="where to write leaf.txt, d1.txt, d2.txt, d3plus.txt")
    p.add_argument("--force", action="store_true", help="replace files that exist")
    p = cmd("diff", cmd_prompts_diff, "diff a directory's prompts against the ones in use (or the "
            "ones in use against the built-in ones)", into=psub)
    p.add_argument("directory", nargs="?", help="edited prompts (default: compare the configured ones with the built-in)")


def _write_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--apply", action="store_true", help="write it (default: show the plan only)")
    p.add_argument("--diff", action="store_true", help="show each summary's unified diff")


def _need_sub(parser: argparse.ArgumentParser) -> int:
    raise usage_error(f"say what to do: {parser.prog} --help lists the choices")


def _run(args: argparse.Namespace, call: Callable[[LcmStore], Any], text: Callable[[dict[str, Any]], str]) -> int:
    with runtime(args) as rt:
        result = call(rt.lcm)
    data = result if isinstance(result, dict) else result.to_dict()
    emit(args, data, lambda: text(data))
    return 0


# -- browse -------------------------------------------------------------------------------------
def cmd_browse_conversations(args: argparse.Namespace) -> int:
    from lcm.operator import browse

    def text(d: dict[str, Any]) -> str:
        lines = [f"{'id':>6} {'msgs':>6} {'sums':>5} {'files':>5} {'ctx':>5}  {'last activity':<20} session key"]
        lines += [f"{c['id']:>6} {c['message_count']:>6} {c['summary_count']:>5} {c['file_count']:>5} "
                  f"{c['context_items']:>5}  {c['last_activity'][:19]:<20} {c['session_key'] or '-'}"
                  f"{'' if c['active'] else ' (archived)'}"
                  + (f"  {' '.join(str(c['title']).split())[:60]!r}" if c.get("title") else "")
                  for c in d["conversations"]]
        if d["next_after_id"] is not None:
            lines.append(f"more: --after {d['next_after_id']}")
        return "\n".join(lines)

    return _run(args, lambda s: browse.conversations(s.db, limit=args.limit, after_id=args.after,
                                                     session_key=args.session_key), text)  # fmt: skip


def _cursor(text: str) -> tuple[str, int]:
    """``--after`` / ``--before``: ``msg_ID`` (a message, ``("id", ID)``) or a bare sequence
    number (``("seq", N)``); argparse turns the error into exit 2 naming the option."""
    kind, number = ("id", text[4:]) if text.startswith("msg_") else ("seq", text)
    if not number.isdigit():
        raise argparse.ArgumentTypeError(f"must be msg_ID (as a window prints it) or a sequence number, got {text!r}")
    return kind, int(number)


def cmd_browse_messages(args: argparse.Namespace) -> int:
    from lcm.operator import browse

    def text(d: dict[str, Any]) -> str:
        lines = [f"{m['seq']:>6} {m['role']:<9} {m['token_count']:>5}t {'ctx' if m['in_context'] else ','.join(m['summary_ids']) or '-':<20} "
                 f"{' '.join(m['content'].split())[:90]}" for m in d["messages"]]  # fmt: skip
        # the message ids, not the sequence numbers: a merge between two commands renumbers those
        if d["prev_before_id"] is not None:
            lines.insert(0, f"earlier: --before msg_{d['prev_before_id']}")
        if d["next_after_id"] is not None:
            lines.append(f"later: --after msg_{d['next_after_id']}")
        lines.append(f"{len(d['messages'])} of {d['total']} messages")
        return "\n".join(lines)

    cursors: dict[str, int] = {}
    for side, given in (("after", args.after), ("before", args.before)):
        if given is not None:
            cursors[f"{side}_{given[0]}"] = given[1]
    return _run(args, lambda s: browse.messages(s.db, args.conversation, limit=args.limit, newest=args.newest,
                                                **cursors), text)  # fmt: skip


def cmd_browse_tree(args: argparse.Namespace) -> int:
    from lcm.operator import browse

    def text(d: dict[str, Any]) -> str:
        lines: list[str] = []

        def show(n: dict[str, Any], indent: str) -> None:
            what = f"{len(n['message_ids'])} messages" if n["kind"] == "leaf" else f"{len(n['sources'])} sources"
            mark = " [context]" if n["in_context"] else ""
            lines.append(f"{indent}{n['id']} {n['kind']} d{n['depth']} {n['token_count']}t {n['model']}/{n['status']} "
                         f"({what}){mark}  {n['content_preview'][:60]}")  # fmt: skip
            for s in n["sources"]:
                show(s, indent + "  ")

        for r in d["roots"]:
            show(r, "")
        lines.append(f"{d['summary_count']} summaries; by depth {d['by_depth']}")
        return "\n".join(lines)

    return _run(args, lambda s: browse.summary_tree(s.db, args.conversation), text)


def cmd_browse_context(args: argparse.Namespace) -> int:
    from lcm.operator import browse

    def text(d: dict[str, Any]) -> str:
        lines = [f"{i['type'][:3]} {i['id']:<22} {i['role']:<9} {i['token_count']:>6}t  "
                 f"{' '.join(i['content'].split())[:80]}" for i in d["items"]]  # fmt: skip
        lines.append(f"{len(d['items'])} items: {d['summary_count']} summaries ({d['summary_tokens']}t), "
                     f"{d['tail_count']} tail messages; {d['total_tokens']} of {d['token_budget']} tokens; "
                     f"{d['dropped_count']} dropped")  # fmt: skip
        if d["would_compact"]:
            lines.append(f"note: stored context is {d['stored_tokens']} tokens, at the threshold "
                         f"({d['threshold_tokens']}): assemble would compact (or record debt) first")  # fmt: skip
        return "\n".join(lines)

    return _run(args, lambda s: browse.context_view(s.db, s.config, args.conversation, args.budget,
                                                    prompt=args.prompt), text)  # fmt: skip


def cmd_browse_files(args: argparse.Namespace) -> int:
    from lcm.operator import browse

    def text(d: dict[str, Any]) -> str:
        lines = []
        for f in d["files"]:
            lines.append(f"{f['file_id']} {f['file_name']} {f['mime_type']} {f['byte_size']} bytes "
                         f"(conversation {f['conversation_id']}, {f['created_at'][:19]})")  # fmt: skip
            lines += [f"    {ln}" for ln in f["exploration_summary"].splitlines()[:8]]
        lines.append(f"{len(d['files'])} files")
        return "\n".join(lines)

    return _run(args, lambda s: {"files": [f.to_dict() for f in browse.large_files(
        s.db, conversation_id=args.conversation, min_bytes=args.min_bytes, limit=args.limit)]}, text)  # fmt: skip


# -- rewrite and repair -------------------------------------------------------------------------------
def _plan_text(args: argparse.Namespace) -> Callable[[dict[str, Any]], str]:
    def text(d: dict[str, Any]) -> str:
        lines = []
        for r in d["rewrites"]:
            lines.append(f"{r['summary_id']} {r['kind']} d{r['depth']} ({r['level']} prompt): "
                         f"{r['old_token_count']} -> {r['new_token_count']} tokens, {r['old_model']}/{r['old_status']} "
                         f"-> {r['new_model']}/{r['new_status']}")  # fmt: skip
            if args.diff:
                lines.append(r["diff"].rstrip("\n"))
        lines += [f"skipped {s['summary_id']}: {s['reason']}" for s in d["skipped"]]
        lines.append(f"{len(d['rewrites'])} to rewrite ({d['token_delta']:+} tokens), {len(d['skipped'])} skipped; "
                     + ("written" if d["applied"] else _DRY))  # fmt: skip
        return "\n".join(lines)

    return text


def cmd_rewrite(args: argparse.Namespace) -> int:
    from lcm.operator.repair import RepairKit

    if (args.depth is not None or args.all) and args.conversation is None:
        raise usage_error("--depth and --all need --conversation ID", "conversation")

    def run(s: LcmStore) -> Any:
        kit = RepairKit.of(s)
        if args.summary:
            plan = kit.plan_rewrite(args.summary)
        elif args.subtree:
            plan = kit.plan_rewrite_subtree(args.subtree)
        elif args.all:
            plan = kit.plan_rewrite_all(args.conversation)
        else:
            plan = kit.plan_rewrite_depth(args.conversation, args.depth)
        return kit.apply(plan) if args.apply and plan.rewrites else plan

    return _run(args, run, _plan_text(args))


def cmd_repair(args: argparse.Namespace) -> int:
    from lcm.operator.repair import RepairKit

    def run(s: LcmStore) -> Any:
        kit = RepairKit.of(s)
        plan = kit.plan_repair(conversation_id=args.conversation, summary_id=args.summary)
        return kit.apply(plan) if args.apply and plan.rewrites else plan

    return _run(args, run, _plan_text(args))


# -- dissolve, transplant, backfill ----------------------------------------------------------------------
def cmd_dissolve(args: argparse.Namespace) -> int:
    from lcm.operator.dissolve import apply_dissolve, plan_dissolve

    def run(s: LcmStore) -> Any:
        plan = plan_dissolve(s.db, args.summary, purge=not args.keep)
        return apply_dissolve(s.db, plan, events=s.events) if args.apply else plan

    def text(d: dict[str, Any]) -> str:
        lines = [f"{d['summary_id']} d{d['depth']} {d['token_count']}t at context ordinal {d['ordinal']} "
                 f"-> {len(d['restored'])} sources ({d['restored_tokens']}t):"]  # fmt: skip
        lines += [f"  {r['summary_id']} {r['kind']} d{r['depth']} {r['token_count']}t  {r['preview'][:70]}" for r in d["restored"]]
        lines.append(f"context {d['context_tokens_before']} -> {d['context_tokens_after']} tokens ({d['token_delta']:+}); "
                     f"{d['items_shifted']} later items shift; summary record "
                     f"{'deleted' if d['purge'] else 'kept'}; " + ("written" if d["applied"] else _DRY))  # fmt: skip
        return "\n".join(lines)

    return _run(args, run, text)


def cmd_transplant(args: argparse.Namespace) -> int:
    from lcm.operator.transplant import apply_transplant, plan_transplant
    from lcm.timeutil import iso

    def run(s: LcmStore) -> Any:
        plan = plan_transplant(s.db, args.source, args.target, summary_ids=args.summary)
        return apply_transplant(s.db, plan, iso(s.clock.now()), events=s.events) if args.apply else plan

    return _run(args, run, _transplant_text)


def _transplant_text(d: dict[str, Any]) -> str:
    lines = [f"{d['source_conversation_id']} -> {d['target_conversation_id']}: {len(d['root_ids'])} roots "
             f"({d['context_tokens_added']} context tokens), {len(d['summary_ids'])} summaries, {d['message_count']} messages"]
    lines += [f"duplicate: {x['source_summary_id']} is already {x['target_summary_id']}" for x in d["duplicates"]]
    if d["applied"]:
        lines += [f"  {a} -> {b}" for a, b in d["id_map"].items()]
    lines.append("written" if d["applied"] else ("refused on --apply: duplicates" if d["duplicates"] else _DRY))
    return "\n".join(lines)


def cmd_backfill(args: argparse.Namespace) -> int:
    import sys

    from lcm.operator.backfill import apply_backfill, plan_backfill

    from .lcm_chats import refuse_export
    from .lcm_host import read_transcript

    refuse_export("amem lcm backfill", args.file, args.format,
                  "one session id, compacted as one conversation, transplanted into one")
    stdin = sys.stdin.read() if args.file == "-" else None
    rows, _fmt, _empty = read_transcript(args.file, stdin, args.format)
    messages = [m for _pos, _line, m in rows]

    def run(s: LcmStore) -> Any:
        plan = plan_backfill(s, messages, session_id=args.session_id, transplant_to=args.transplant_to,
                             single_root=args.single_root)
        return apply_backfill(s, plan, messages, max_rounds=args.max_rounds) if args.apply else plan

    def text(d: dict[str, Any]) -> str:
        lines = [f"{d['message_count']} messages ({d['token_count']} tokens, ~{d['leaf_chunks']} leaf summaries) "
                 f"as {d['session_key']}" + (f" (imported before: conversation {d['conversation_id']})"
                                             if d["already_imported"] else "")]  # fmt: skip
        if d["applied"]:
            lines.append(f"imported {d['imported']} into conversation {d['conversation_id']}; "
                         f"{d['compaction_rounds']} compaction rounds made {d['summaries_made']} summaries")  # fmt: skip
            if d["root_summary_id"]:
                lines.append(f"condensed to one root summary {d['root_summary_id']}")
            if d["transplant"]:
                lines.append(_transplant_text(d["transplant"]))
        lines += [f"warning: {w}" for w in d["warnings"]]
        if not d["applied"]:
            lines.append(_DRY)
        return "\n".join(lines)

    return _run(args, run, text)


# -- prompts ----------------------------------------------------------------------------------------
def cmd_prompts_list(args: argparse.Namespace) -> int:
    return _run(args, lambda s: s.summarizer.prompts.to_dict(),
                lambda d: "\n".join(f"{lv:<5} {d['origins'][lv]}: {' '.join(t.split())[:70]}"
                                    for lv, t in d["templates"].items()))  # fmt: skip


def cmd_prompts_show(args: argparse.Namespace) -> int:
    return _run(args, lambda s: {"level": args.level, "template": s.summarizer.prompts.templates[args.level],
                                 "origin": s.summarizer.prompts.origins[args.level]},
                lambda d: str(d["template"]))  # fmt: skip


def cmd_prompts_export(args: argparse.Namespace) -> int:
    from lcm.operator.prompts import export_prompts

    return _run(args, lambda s: {"written": [str(p) for p in export_prompts(s.summarizer.prompts, args.directory,
                                                                             overwrite=args.force)]},
                lambda d: "\n".join(d["written"]))  # fmt: skip


def cmd_prompts_diff(args: argparse.Namespace) -> int:
    from lcm.operator.prompts import PromptSet, diff_prompts, load_prompts

    def run(s: LcmStore) -> dict[str, Any]:
        current = s.summarizer.prompts
        if args.directory is None:
            return {"diff": diff_prompts(PromptSet.default(), current)}
        return {"diff": diff_prompts(current, load_prompts(Path(args.directory)))}

    return _run(args, run, lambda d: "".join(d["diff"].values()) or "no difference")
