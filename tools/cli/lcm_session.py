"""A session's lifecycle from the command line: ``amem lcm reset``, ``amem lcm new`` and ``amem lcm rotate``.

``reset`` (a host's ``/reset``) archives the active conversation of a session key and opens a
fresh one for the same key; ``new`` (a host's ``/new``) empties the active context and keeps
the conversation. Neither deletes a message: recall still finds everything said. Both are
refused for a session that reads but never writes (``statelessSessionPatterns``).
``rotate`` (:mod:`lcm.operator.rotate`) backs a conversation up and compacts its context to the
fresh tail, keeping the conversation; ``rotate --restore FILE`` brings a backup back as a new
conversation. Both are dry runs unless ``--apply``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import Cmd, runtime
from .output import emit, usage_error

if TYPE_CHECKING:
    from .common import Subparsers


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register ``lcm reset`` and ``lcm new`` under ``amem lcm``."""
    p = cmd("reset", cmd_lcm_reset, "archive a session's conversation and start a fresh one (/reset)",
            into=lsub)
    p.add_argument("--session-key", required=True, help="the session to reset")
    p.add_argument("--cause", default="reset", help="why, kept on the archived conversation (default reset)")
    p = cmd("new", cmd_lcm_new, "empty a session's active context, keep its conversation (/new)", into=lsub)
    p.add_argument("--session-key", required=True, help="the session whose context to empty")
    p = cmd("rotate", cmd_lcm_rotate, "back a session's conversation up, then compact its context to the fresh "
            "tail, keeping the conversation (dry run unless --apply)", into=lsub)
    p.add_argument("--session-key", help="the session to rotate (with --restore: the key of the new conversation)")
    p.add_argument("--restore", metavar="FILE", help="restore this backup as a new conversation instead")
    p.add_argument("--max-rounds", type=int, default=20, help="compaction rounds at most (default 20)")
    p.add_argument("--apply", action="store_true", help="write it (default: show the plan only)")


def cmd_lcm_reset(args: argparse.Namespace) -> int:
    with runtime(args) as rt:
        data = rt.lcm.reset(args.session_key, args.cause).to_dict()
    emit(args, data, lambda: (f"archived conversation {data['archived_conversation_id']}; "
                              if data["archived_conversation_id"] is not None else "nothing to archive; ")
         + f"{args.session_key} now writes to conversation {data['conversation_id']}")
    return 0


def cmd_lcm_new(args: argparse.Namespace) -> int:
    with runtime(args) as rt:
        data = rt.lcm.new_context(args.session_key).to_dict()
    emit(args, data, lambda: f"no active conversation for {args.session_key}" if data["conversation_id"] is None
         else f"conversation {data['conversation_id']}: {data['pruned_items']} context items "
              f"({data['pruned_tokens']} tokens) left the context; the history stays searchable")
    return 0


def cmd_lcm_rotate(args: argparse.Namespace) -> int:
    from lcm.operator.rotate import apply_restore, apply_rotate, plan_restore, plan_rotate

    dry = "dry run: nothing written (--apply writes it)"
    if args.restore is None and not args.session_key:
        raise usage_error("amem lcm rotate needs --session-key (or --restore FILE)")
    with runtime(args) as rt:
        if args.restore is not None:
            plan: Any = plan_restore(rt.lcm, args.restore, session_key=args.session_key)
            data = (apply_restore(rt.lcm, plan) if args.apply else plan).to_dict()
        else:
            plan = plan_rotate(rt.lcm, args.session_key)
            data = (apply_rotate(rt.lcm, plan, max_rounds=args.max_rounds) if args.apply else plan).to_dict()

    def text() -> str:
        if args.restore is not None:
            head = (f"backup of conversation {data['source_conversation_id']} taken {data['taken_at']}: "
                    + ", ".join(f"{n} {t}" for t, n in data["counts"].items()))
            done = (f"restored as conversation {data['conversation_id']} (session key {data['session_key']})"
                    if data["applied"] else f"would restore as session key {data['session_key']}; {dry}")
            return "\n".join([head, done, *(f"warning: {w}" for w in data["warnings"])])
        lines = [f"conversation {data['conversation_id']} ({data['session_key']}): {data['context_items']} context "
                 f"items, {data['context_tokens_before']} tokens",
                 f"  fresh tail kept raw: {data['tail_items']} items, {data['tail_tokens']} tokens",
                 f"  to compact: {data['compactable_messages']} messages ({data['compactable_tokens']} tokens), "
                 f"{data['prefix_summaries']} summaries",
                 f"  backup into {data['backup_dir']} (keeping the newest {data['keep_backups']})"]
        if data["applied"]:
            backup = data["backup"]
            lines += [f"backup {backup['path']} ({backup['size_bytes']} bytes, checked)",
                      f"context {data['context_tokens_before']} -> {data['context_tokens_after']} tokens "
                      f"({data['token_delta']:+}); {data['summaries_made']} summaries in {data['compaction_rounds']} "
                      f"rounds; {len(data['pruned_backups'])} old backups deleted"]
        else:
            lines.append(dry)
        return "\n".join(lines + [f"warning: {w}" for w in data["warnings"]])

    emit(args, data, text)
    return 0
