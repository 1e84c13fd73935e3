"""A session's lifecycle from the command line: ``amem lcm reset`` and ``amem lcm new``.

``reset`` (a host's ``/reset``) archives the active conversation of a session key and opens a
fresh one for the same key; ``new`` (a host's ``/new``) empties the active context and keeps
the conversation. Neither deletes a message: recall still finds everything said. Both are
refused for a session that reads but never writes (``statelessSessionPatterns``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .common import Cmd, runtime
from .output import emit

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
