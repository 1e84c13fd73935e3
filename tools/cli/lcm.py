"""``amem lcm ...``: the conversation store's commands (grep, describe, expand, status, doctor;
ingest, assemble, embed and migrate come from their own modules)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, Callable

from . import lcm_embed, lcm_host, lcm_kit, lcm_migrate, lcm_session
from .common import Cmd, runtime
from .output import EXIT_ERROR, EXIT_USAGE, emit, kv_text, usage_error

if TYPE_CHECKING:
    from lcm import LcmStore

    from .common import Subparsers


def register(cmd: Cmd, sub: Subparsers) -> None:
    """Add ``amem lcm`` and its subcommands (called by ``tools.cli.main``)."""
    lcm: argparse.ArgumentParser = cmd("lcm", _usage, "conversation store: grep, describe, "
                                       "expand, status, doctor, ingest, assemble")
    lcm.set_defaults(func=lambda a: _usage(lcm))
    lsub = lcm.add_subparsers(dest="lcm_command", metavar="LCM_COMMAND")
    p = cmd("grep", cmd_lcm_grep, "search messages and summaries (or stored files), with the "
            "lcm_grep tool's defaults: the agent's main session, an RE2 regular expression",
            into=lsub)
    p.add_argument("pattern")
    p.add_argument("--mode", choices=["regex", "full_text", "semantic", "hybrid"], default="regex",
                   help="an RE2 regular expression (default, as the lcm_grep tool: no "
                   "backreferences or lookarounds), words (full_text), meaning (semantic: the "
                   "embedder's cosine) or hybrid (both, RRF)")
    p.add_argument("--scope", choices=["messages", "summaries", "both", "files"], default="both",
                   help="what to search (default both; files: the stored large files)")
    p.add_argument("--file-id", action="append", dest="file_ids", metavar="FILE_ID",
                   help="with --scope files: only this stored file (repeat)")
    p.add_argument("--sort", choices=["recency", "relevance", "hybrid"],
                   help="hit order (default recency; relevance for semantic and hybrid)")
    p.add_argument("-n", "--limit", type=int, default=50, help="at most this many hits (1-200)")
    p.add_argument("--since", help="ISO date/time with its offset (2024-01-01T00:00:00Z): only "
                   "newer items")
    p.add_argument("--before", help="ISO date/time with its offset (2024-01-01T00:00:00Z): only "
                   "older items")
    _where_options(p, "search")
    p = cmd("describe", cmd_lcm_describe, "show a summary or file by id", into=lsub)
    p.add_argument("id")
    p = cmd("expand", cmd_lcm_expand, "walk summaries down to their messages", into=lsub)
    p.add_argument("ids", nargs="*", help="summary ids")
    p.add_argument("--query", help="find the summaries by this search instead")
    p.add_argument("--max-depth", type=int, default=3, help="summary levels to descend")
    p.add_argument("--token-cap", type=int, default=8000, help="stop after this many tokens")
    _where_options(p, "expand within")
    cmd("status", cmd_lcm_status, "conversation store status", into=lsub)
    p = cmd("doctor", cmd_lcm_doctor, "conversation store checks", into=lsub)
    p.add_argument("--clean", action="store_true", help="clean-up candidates (a report)")
    p.add_argument("--apply", action="store_true", help="with --clean: delete the .tmp files of "
                   "large-file writes killed at their rename (leftover_files); the other "
                   "candidates stay a report")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rank the N worst conversations (findings, failures, debt, size; default 10)")
    lcm_host.register(cmd, lsub)
    lcm_session.register(cmd, lsub)
    lcm_embed.register(cmd, lsub)
    lcm_migrate.register(cmd, lsub)
    lcm_kit.register(cmd, lsub)


def _where_options(p: argparse.ArgumentParser, verb: str) -> None:
    """Which conversations a command reads: by default the agent's main session family
    (``agent:<agent>:main``), as the lcm_* tools read it."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--session-key", help=f"{verb} this session family (default: the "
                       "agent's main session, agent:<--agent>:main)")
    where.add_argument("--conversation", type=int, help=f"{verb} one conversation id")
    where.add_argument("--all", action="store_true",
                       help=f"{verb} every conversation of every agent (the CLI reads the data "
                       "directory as its owner; the lcm_* tools' allConversations stays within "
                       "the caller's agent)")


def _where(args: argparse.Namespace, agent_id: str) -> dict[str, Any]:
    """The store's scope arguments for ``_where_options``' flags."""
    if args.all:
        return {"all_conversations": True}
    if args.conversation is not None:
        return {"conversation_id": args.conversation}
    from ..tenancy import default_session_key

    return {"session_key": args.session_key or default_session_key(agent_id)}


def _usage(parser: argparse.ArgumentParser) -> int:
    """``amem lcm`` without a subcommand: show what there is (a usage error)."""
    import sys

    parser.print_help(sys.stderr)
    return EXIT_USAGE


def _lcm_run(args: argparse.Namespace, call: Callable[[LcmStore, str], Any],
             text: Callable[[dict[str, Any]], str] | None = None) -> int:
    """``call(store, agent_id)`` on the runtime's conversation store, printed."""
    with runtime(args) as rt:
        result = call(rt.lcm, rt.agent_id)
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    emit(args, data, lambda: (text or kv_text)(data))
    return 0


def _grep_text(data: dict[str, Any]) -> str:
    hits = data.get("hits", [])
    kinds = max([len(str(h["kind"])) for h in hits] + [4])  # message, summary, file: whole
    lines = [f"{h['kind']:<{kinds}} {h['id']:<22} {str(h.get('created_at') or '')[:19]}  "
             f"{_speaker(h)}{' '.join(str(h.get('snippet', '')).split())[:100]}" for h in hits]
    lines.append(f"{len(hits)} hits" + (" (truncated)" if data.get("truncated") else ""))
    # a degraded answer says so in text too (messages not embedded yet, a deadline hit)
    lines += [f"warning: {w}" for w in data.get("warnings", [])]
    return "\n".join(lines)


def _speaker(hit: dict[str, Any]) -> str:
    """"alice: " before a message a named speaker said (as summaries write it), else nothing."""
    return f"{' '.join(str(hit['name']).split())[:40]}: " if hit.get("name") else ""


def cmd_lcm_grep(args: argparse.Namespace) -> int:
    if args.file_ids and args.scope != "files":
        raise usage_error("--file-id needs --scope files", "file_ids")
    kwargs: dict[str, Any] = {"mode": args.mode, "scope": args.scope, "sort": args.sort,
                              "limit": args.limit, "since": args.since, "before": args.before,
                              "file_ids": args.file_ids}
    return _lcm_run(args, lambda s, agent: s.grep(args.pattern, **kwargs, **_where(args, agent)),
                    _grep_text)


def cmd_lcm_describe(args: argparse.Namespace) -> int:
    return _lcm_run(args, lambda s, _agent: s.describe(args.id))


def cmd_lcm_expand(args: argparse.Namespace) -> int:
    if not args.ids and not args.query:
        raise usage_error("give summary ids or --query")
    return _lcm_run(args, lambda s, agent: s.expand(args.ids or None, query=args.query,
                                                    max_depth=args.max_depth,
                                                    token_cap=args.token_cap,
                                                    **_where(args, agent)), _expand_text)


def _expand_text(data: dict[str, Any]) -> str:
    """An expansion for a reader: each summary, then its messages one per paragraph
    (role, time, text) instead of inline JSON."""
    lines: list[str] = []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{key}:")
            for item in value:
                lines.append(_expand_item(item, "  "))
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines.append(kv_text(value, "  "))
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _expand_item(item: dict[str, Any], indent: str) -> str:
    """One summary or message of an expansion: a header line, then its text, indented."""
    nested = {k: v for k, v in item.items() if isinstance(v, list) and v
              and all(isinstance(x, dict) for x in v)}
    text = next((str(item[k]) for k in ("content", "text", "summary") if k in item
                 and isinstance(item[k], str)), None)
    head = [f"{k}={v}" for k, v in item.items()
            if k not in nested and k not in ("content", "text", "summary")
            and not isinstance(v, (dict, list)) and v not in (None, "")]
    out = [f"{indent}- " + " ".join(head)]
    if text is not None:
        out += [f"{indent}    {line}" for line in text.splitlines() or [""]]
    for key, children in nested.items():
        out.append(f"{indent}  {key}:")
        out += [_expand_item(child, indent + "    ") for child in children]
    return "\n".join(out)


def cmd_lcm_status(args: argparse.Namespace) -> int:
    # The lossless-claw keys the config accepted but lcm does not act on (warned once at load),
    # and which models make summaries and expansions (None: extractive, no LLM configured).
    def report(s: LcmStore) -> dict[str, Any]:
        summary, expansion = s.summarizer.llm, s.recall.llm
        breaker = getattr(summary, "breaker", None)
        llm = None if summary is None else {
            "summaryModel": getattr(summary, "model", None), "expansionModel": getattr(expansion, "model", None),
            "circuit": breaker.state if breaker is not None else None}
        status = s.status().to_dict()
        # the status already names the ignored keys; a second spelling of them said it twice
        status.setdefault("ignored_keys", list(s.config.ignored_keys))
        return {**status, "llm": llm}

    return _lcm_run(args, lambda s, _agent: report(s))


def cmd_lcm_doctor(args: argparse.Namespace) -> int:
    if args.apply and not args.clean:
        raise usage_error("--apply goes with --clean (amem lcm doctor --clean --apply)", "apply")
    if args.clean:  # a report of cleanup candidates, not a verdict
        return _lcm_run(args, lambda s, _agent: s.doctor_clean(apply=args.apply))
    with runtime(args) as rt:
        data = rt.lcm.doctor(top=args.top).to_dict()
    emit(args, data, lambda: kv_text(data))
    # as `amem doctor` does: a script's `amem lcm doctor || alert` fires on damage
    return 0 if data["ok"] else EXIT_ERROR
