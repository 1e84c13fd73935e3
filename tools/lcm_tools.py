"""The ``lcm_*`` tools: recall over the lossless conversation store (``lcm.LcmStore``).

Every call is confined to the caller's session family (``session_key_for``), which the tools
pass to ``LcmStore``: its scoped lookups (``lcm.recall.visible``, ``LcmStore._scope``) answer a
conversation, summary, file or message id of another family with the very same ``not_found``
as an id that does not exist, so a caller can neither read nor probe another agent's history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import ToolError
from .registry import Tool, obj

if TYPE_CHECKING:
    from .facade import CallContext

_SUMMARY_IDS = {"type": "array", "minItems": 1, "maxItems": 50,
                "items": {"type": "string", "minLength": 1, "maxLength": 100},
                "description": "Summary ids (sum_...) to expand."}
_TIME = {"type": "string", "minLength": 1, "maxLength": 40,
         "description": "An ISO 8601 date or date-time."}


def _out(value: Any) -> dict[str, Any]:
    data = value.to_dict() if hasattr(value, "to_dict") else value
    return data if isinstance(data, dict) else {"result": data}


def session_key_for(ctx: "CallContext") -> str:
    """The session family the caller may read: the facade's, which ``tools.tenancy`` checked
    belongs to the caller (``agent:<agent id>:main`` unless the host or the connection named
    another of its own). Never taken from tool arguments."""
    return ctx.facade.session_key


def lcm_grep(ctx: "CallContext", pattern: str, mode: str = "full_text", scope: str = "both",
             conversation_id: int | None = None, since: str | None = None,
             before: str | None = None, limit: int = 50, sort: str = "recency") -> dict[str, Any]:
    # With both, lcm answers a conversation of another family exactly like a missing one.
    return _out(ctx.lcm.grep(pattern, mode=mode, scope=scope, since=since, before=before, limit=limit,
                             sort=sort, session_key=session_key_for(ctx), conversation_id=conversation_id))


def lcm_describe(ctx: "CallContext", id: str) -> dict[str, Any]:  # noqa: A002 - the wire name
    return _out(ctx.lcm.describe(id, session_key=session_key_for(ctx)))


def lcm_expand(ctx: "CallContext", summary_ids: list[str] | None = None, query: str | None = None,
               max_depth: int = 3, token_cap: int = 8000) -> dict[str, Any]:
    if not summary_ids and not query:
        raise ToolError("invalid_argument", "give summary_ids or a query", field="query")
    return _out(ctx.lcm.expand(summary_ids, query=query, max_depth=max_depth, token_cap=token_cap,
                               session_key=session_key_for(ctx)))


def lcm_expand_query(ctx: "CallContext", prompt: str, query: str | None = None,
                     summary_ids: list[str] | None = None, max_tokens: int = 2000) -> dict[str, Any]:
    if not summary_ids and not query:
        raise ToolError("invalid_argument", "give a query or summary_ids", field="query")
    return _out(ctx.lcm.expand_query(prompt, query=query, summary_ids=summary_ids,
                                     max_tokens=max_tokens, session_key=session_key_for(ctx)))


def lcm_tools() -> list[Tool]:
    """The four ``lcm_*`` recall tools."""
    return [
        Tool(
            name="lcm_grep", handler=lcm_grep, core=True, group="lcm",
            summary="search the full history of past conversations",
            description=(
                "Search the complete, lossless history of this conversation and its earlier "
                "sessions (raw messages and their summaries) by words (mode=full_text, the "
                "default) or a regular expression (mode=regex, RE2 syntax: no backreferences or "
                "lookarounds). Use it when something was said "
                "earlier but is no longer in context. Returns {hits: [{kind, id, conversation_id, "
                "created_at, snippet, score, role, depth}], truncated}; expand summary hits with "
                "lcm_expand or lcm_describe."),
            schema=obj({
                "pattern": {"type": "string", "minLength": 1, "maxLength": 500,
                            "description": "Words or a phrase (full_text), or an RE2 regex (regex)."},
                "mode": {"type": "string", "enum": ["full_text", "regex"], "default": "full_text"},
                "scope": {"type": "string", "enum": ["messages", "summaries", "both"],
                          "default": "both"},
                "conversation_id": {"type": "integer", "minimum": 1,
                                    "description": "Only this conversation of the family."},
                "since": _TIME, "before": _TIME,
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                "sort": {"type": "string", "enum": ["recency", "relevance", "hybrid"],
                         "default": "recency"},
            }, required=["pattern"])),
        Tool(
            name="lcm_describe", handler=lcm_describe, group="lcm",
            summary="show one conversation summary or stored file by id",
            description=(
                "Show one item of the conversation history by id: a summary (sum_...) with its "
                "metadata, parent and child summaries and source message ids; a stored large "
                "file (file_...) with its metadata and a bounded slice of its text; or a message "
                "(msg_...). Use it on ids returned by lcm_grep. Returns the item with its kind, "
                "or a not_found error."),
            schema=obj({"id": {"type": "string", "minLength": 1, "maxLength": 100,
                               "description": "A summary (sum_...), file (file_...) or message "
                               "(msg_...) id."}},
                       required=["id"])),
        Tool(
            name="lcm_expand", handler=lcm_expand, group="lcm",
            summary="recover the original messages behind summaries",
            description=(
                "Walk summaries down to the original messages they were made from, to recover "
                "exact wording, numbers or commands. Give summary_ids (from lcm_grep) or a query "
                "that finds them. Returns {summaries, messages, total_tokens, truncated}."),
            schema=obj({
                "summary_ids": _SUMMARY_IDS,
                "query": {"type": "string", "minLength": 1, "maxLength": 500,
                          "description": "Find the summaries to expand by this search instead."},
                "max_depth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "token_cap": {"type": "integer", "minimum": 100, "maximum": 50000,
                              "default": 8000, "description": "Stop after this many tokens."},
            })),
        Tool(
            name="lcm_expand_query", handler=lcm_expand_query, group="lcm",
            summary="answer a question from the expanded conversation history",
            description=(
                "Answer one focused question from the original messages behind the summaries "
                "that match a query (or the given summary_ids), citing the ids it used. Use it "
                "when a summary mentions something you need in detail. Returns {answer, "
                "cited_ids, expanded_summary_count, total_source_tokens, truncated}."),
            schema=obj({
                "prompt": {"type": "string", "minLength": 1, "maxLength": 2000,
                           "description": "The question to answer."},
                "query": {"type": "string", "minLength": 1, "maxLength": 500,
                          "description": "Search terms that find the relevant summaries."},
                "summary_ids": _SUMMARY_IDS,
                "max_tokens": {"type": "integer", "minimum": 100, "maximum": 20000,
                               "default": 2000},
            }, required=["prompt"])),
    ]
