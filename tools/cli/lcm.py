"""``amem lcm ...``: the conversation store's commands (grep, describe, expand, status, doctor;
ingest, assemble, embed and migrate come from their own modules)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from . import lcm_embed, lcm_host, lcm_kit, lcm_migrate, lcm_session
from .common import Cmd, runtime
from .output import EXIT_USAGE, emit, kv_text, usage_error

if TYPE_CHECKING:
    from lcm import LcmStore

    from .common import Subparsers


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add ``amem lcm`` and its subcommands (called by ``tools.cli.main``)."""
    lcm: argparse.ArgumentParser = cmd("lcm", _usage, "conversation store: grep, describe, "
                                       "expand, status, doctor, ingest, assemble")
    lcm.set_defaults(func=lambda a: _usage(lcm))
    lsub = lcm.add_subparsers(dest="lcm_command", metavar="LCM_COMMAND")
    p = cmd("grep", cmd_lcm_grep, "search messages and summaries", into=lsub)
    p.add_argument("pattern")
    p.add_argument("--mode", choices=["full_text", "regex", "semantic", "hybrid"], default="full_text",
                   help="words (default), an RE2 regular expression (no backreferences or "
                   "lookarounds), meaning (semantic: the embedder's cosine) or hybrid (both, RRF)")
    p.add_argument("--scope", choices=["messages", "summaries", "both"], default="both",
                   help="what to search (default both)")
    p.add_argument("--sort", choices=["recency", "relevance", "hybrid"],
                   help="hit order (default recency; relevance for semantic and hybrid)")
    p.add_argument("-n", "--limit", type=int, default=50, help="at most this many hits (1-200)")
    p.add_argument("--since", help="ISO date/time: only newer items")
    p.add_argument("--before", help="ISO date/time: only older items")
    p.add_argument("--conversation", type=int, help="one conversation id")
    p.add_argument("--session-key", help="search this session family")
    p.add_argument("--all", action="store_true", help="every conversation")
    p = cmd("describe", cmd_lcm_describe, "show a summary or file by id", into=lsub)
    p.add_argument("id")
    p = cmd("expand", cmd_lcm_expand, "walk summaries down to their messages", into=lsub)
    p.add_argument("ids", nargs="*", help="summary ids")
    p.add_argument("--query", help="find the summaries by this search instead")
    p.add_argument("--max-depth", type=int, default=3, help="summary levels to descend")
    p.add_argument("--token-cap", type=int, default=8000, help="stop after this many tokens")
    p.add_argument("--session-key", help="the session family --query searches")
    p.add_argument("--all", action="store_true", help="--query searches every conversation")
    cmd("status", cmd_lcm_status, "conversation store status", into=lsub)
    p = cmd("doctor", cmd_lcm_doctor, "conversation store checks", into=lsub)
    p.add_argument("--clean", action="store_true", help="read-only clean-up candidates")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rank the N worst conversations (findings, failures, debt, size; default 10)")
    lcm_host.register(cmd, lsub)
    lcm_session.register(cmd, lsub)
    lcm_embed.register(cmd, lsub)
    lcm_migrate.register(cmd, lsub)
    lcm_kit.register(cmd, lsub)


def _usage(parser: argparse.ArgumentParser) -> int:
    """``amem lcm`` without a subcommand: show what there is (a usage error)."""
    import sys

    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _lcm_run(args: argparse.Namespace, call: Callable[[LcmStore], Any],
             text: Callable[[dict[str, Any]], str] | None = None) -> int:
    with runtime(args) as rt:
        result = call(rt.lcm)
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    emit(args, data, lambda: (text or kv_text)(data))
    return 0


def _grep_text(data: dict[str, Any]) -> str:
    hits = data.get("hits", [])
    lines = [f"{h['kind'][:3]} {h['id']:<22} {h.get('created_at', '')[:19]}  "
             f"{' '.join(str(h.get('snippet', '')).split())[:100]}" for h in hits]
    lines.append(f"{len(hits)} hits" + (" (truncated)" if data.get("truncated") else ""))
    # a degraded answer says so in text too (messages not embedded yet, a deadline hit)
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    return "\n".join(lines)


def cmd_lcm_grep(args: argparse.Namespace) -> int:
    if not (args.session_key or args.conversation is not None or args.all):
        # Said in the command's own words (the store's message names Python arguments).
        raise usage_error("say what to search: --session-key KEY, --conversation ID or --all",
                          "session_key")
    kwargs: dict[str, Any] = {"mode": args.mode, "scope": args.scope, "sort": args.sort,
                              "limit": args.limit, "since": args.since, "before": args.before,
                              "conversation_id": args.conversation,
                              "all_conversations": args.all}
    if args.session_key:
        kwargs["session_key"] = args.session_key
    return _lcm_run(args, lambda s: s.grep(args.pattern, **kwargs), _grep_text)


def cmd_lcm_describe(args: argparse.Namespace) -> int:
    return _lcm_run(args, lambda s: s.describe(args.id))


def cmd_lcm_expand(args: argparse.Namespace) -> int:
    if not args.ids and not args.query:
        raise usage_error("give summary ids or --query")
    return _lcm_run(args, lambda s: s.expand(args.ids or None, query=args.query,
                                             max_depth=args.max_depth, token_cap=args.token_cap,
                                             session_key=args.session_key,
                                             all_conversations=args.all))


def cmd_lcm_status(args: argparse.Namespace) -> int:
    # The lossless-claw keys the config accepted but lcm does not act on (warned once at load),
    # and which models make summaries and expansions (None: extractive, no LLM configured).
    def report(s: LcmStore) -> dict[str, Any]:
        summary, expansion = s.summarizer.llm, s.recall.llm
        breaker = getattr(summary, "breaker", None)
        llm = None if summary is None else {
            "summaryModel": getattr(summary, "model", None), "expansionModel": getattr(expansion, "model", None),
            "circuit": breaker.state if breaker is not None else None}
        return {**s.status().to_dict(), "llm": llm, "ignoredKeys": list(s.config.ignored_keys)}

    return _lcm_run(args, report)


def cmd_lcm_doctor(args: argparse.Namespace) -> int:
    return _lcm_run(args, lambda s: s.doctor_clean() if args.clean else s.doctor(top=args.top))
