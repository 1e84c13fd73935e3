"""The ``lcm_*`` tools: recall over the lossless conversation store (``lcm.LcmStore``).

Every call is confined to the caller's session family (``session_key_for``), which the tools
pass to ``LcmStore``: its scoped lookups (``lcm.recall.visible``, ``lcm.scopes.Scopes.scope``) answer a
conversation, summary, file or message id of another family with the very same ``not_found``
as an id that does not exist, so a caller can neither read nor probe another agent's history.
``allConversations`` widens that to every session family of the calling agent (the keys
``tools.tenancy.session_owner`` gives to it), never further.

Arguments and results use lossless-claw's names (camelCase), so agents written for it work
unchanged; snake_case spellings are not aliases (one style, as ``memory_search``'s ``topicsFilter``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from lcm.errors import LcmValidationError
from lcm.recall import ExpansionFailedError

from .context import CallContext
from .errors import ToolError, redact
from .registry import Handler, Tool, obj
from .tenancy import PREFIX, agent_segment, session_owner

if TYPE_CHECKING:
    from lcm import LcmStore

_SUMMARY_IDS = {"type": "array", "minItems": 1, "maxItems": 50,
                "items": {"type": "string", "minLength": 1, "maxLength": 100},
                "description": "Summary ids (sum_...) to expand."}
_TIME = {"type": "string", "minLength": 1, "maxLength": 40,
         "description": "An ISO 8601 date or date-time."}
_CONVERSATION = {"type": "integer", "minimum": 1,
                 "description": "Only this conversation (one of yours); default: this session's."}
_ALL = {"type": "boolean", "default": False,
        "description": "Every conversation of yours (all your sessions), not only this one's."}
_TOKEN_CAP = {"type": "integer", "minimum": 1, "maximum": 1000000,
              "description": "Source tokens to read at most; never more than the server's "
              "maxExpandTokens (LCM_MAX_EXPAND_TOKENS), which is the default."}
#: lcm_expand_query's default timeoutMs is delegationTimeoutMs plus this (the reference's headroom)
TIMEOUT_HEADROOM_MS = 30000


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _camelize(value: Any) -> Any:
    """Result keys in the reference's style (``conversationId``), like the arguments."""
    if isinstance(value, dict):
        return {_camel(k) if isinstance(k, str) else k: _camelize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camelize(v) for v in value]
    return value


def _argument_names(handler: Handler) -> Handler:
    """lcm names a bad argument in its own (snake_case) words; the caller sent camelCase."""
    @functools.wraps(handler)
    def call(ctx: "CallContext", *args: Any, **kwargs: Any) -> Any:
        try:
            return handler(ctx, *args, **kwargs)
        except LcmValidationError as exc:
            if exc.field:
                exc.field = _camel(exc.field)
            raise
    return call


def _out(value: Any) -> dict[str, Any]:
    data = value.to_dict() if hasattr(value, "to_dict") else value
    out = _camelize(data)
    return out if isinstance(out, dict) else {"result": out}


def _hit(hit: dict[str, Any]) -> dict[str, Any]:
    """One grep hit under the reference's names: ``type`` (message, summary or file) and, for
    a summary, ``kind`` leaf or condensed; fields that do not apply are left out."""
    out: dict[str, Any] = {"type": hit["kind"]}
    for key, value in hit.items():
        if key == "kind" or value is None:
            continue
        out["kind" if key == "summaryKind" else key] = value
    if hit["kind"] == "summary":
        out["summaryId"] = hit["id"]  # the reference's name for a summary hit's id
    return out


def _lcm(ctx: CallContext) -> "LcmStore":
    # The facade refuses every lcm_* call when it has no conversation store.
    assert ctx.lcm is not None
    return ctx.lcm


def session_key_for(ctx: "CallContext") -> str:
    """The session family the caller may read: the facade's, which ``tools.tenancy`` checked
    belongs to the caller (``agent:<agent id>:main`` unless the host or the connection named
    another of its own). Never taken from tool arguments."""
    return ctx.facade.session_key


def owned_session_keys(ctx: "CallContext") -> list[str]:
    """Every session key of the calling agent (``allConversations``): keys whose owner by
    ``tools.tenancy.session_owner`` is the caller, never another agent's."""
    own = session_key_for(ctx)
    prefix = f"{PREFIX}{agent_segment(ctx.agent_id)}:"
    keys = [k for k in _lcm(ctx).session_keys(prefix) if session_owner(k) == ctx.agent_id]
    return list(dict.fromkeys([own, *keys]))


def _scope_keys(ctx: "CallContext", all_conversations: bool) -> str | list[str]:
    return owned_session_keys(ctx) if all_conversations else session_key_for(ctx)


@_argument_names
def lcm_grep(ctx: "CallContext", pattern: str, mode: str = "regex", scope: str = "both",
             conversationId: int | None = None, allConversations: bool = False,
             fileIds: list[str] | None = None, since: str | None = None,
             before: str | None = None, limit: int = 50, sort: str | None = None) -> dict[str, Any]:
    # A conversation of another family (or another agent) answers exactly like a missing one.
    out = _out(_lcm(ctx).grep(pattern, mode=mode, scope=scope, since=since, before=before, limit=limit,
                            sort=sort, session_key=_scope_keys(ctx, allConversations),
                            conversation_id=conversationId, file_ids=fileIds))
    out["hits"] = [_hit(h) for h in out.get("hits", [])]
    return out


@_argument_names
def lcm_describe(ctx: "CallContext", id: str, conversationId: int | None = None,  # noqa: A002 - the wire name
                 allConversations: bool = False, offset: int = 0,
                 limit: int = 4000, expandFile: bool = False,
                 expandFileMaxBytes: int | None = None) -> dict[str, Any]:
    out = _out(_lcm(ctx).describe(id, offset=offset, limit=limit, conversation_id=conversationId,
                                session_key=_scope_keys(ctx, allConversations), expand_file=expandFile,
                                expand_file_max_bytes=expandFileMaxBytes))
    if out.get("content") is None and out.get("kind") == "file":
        # without expandFile the file's content is not read: leave the fields out, not null
        out.pop("content", None)
        out.pop("contentTruncated", None)
    out["type"] = out.get("kind")
    if "id" not in out and isinstance(out.get("summary"), dict):
        out["id"] = out["summary"].get("id")  # the reference's top-level id, for summaries too
    return out


@_argument_names
def lcm_expand(ctx: "CallContext", summaryIds: list[str] | None = None,
               query: str | None = None, maxDepth: int = 3,
               tokenCap: int | None = None, conversationId: int | None = None,
               allConversations: bool = False) -> dict[str, Any]:
    if not summaryIds and not query:
        raise ToolError("invalid_argument", "give summaryIds or a query", field="query")
    return _out(_lcm(ctx).expand(summaryIds, query=query, max_depth=maxDepth, token_cap=tokenCap,
                               conversation_id=conversationId,
                               session_key=_scope_keys(ctx, allConversations)))


@_argument_names
def lcm_expand_query(ctx: "CallContext", prompt: str, query: str | None = None,
                     summaryIds: list[str] | None = None, maxTokens: int = 2000,
                     tokenCap: int | None = None, timeoutMs: int | None = None,
                     conversationId: int | None = None,
                     allConversations: bool = False) -> dict[str, Any]:
    if not summaryIds and not query:
        raise ToolError("invalid_argument", "give a query or summaryIds", field="query")
    lcm = _lcm(ctx)
    try:
        out = _out(lcm.expand_query(prompt, query=query, summary_ids=summaryIds, max_tokens=maxTokens,
                                    token_cap=tokenCap, timeout_ms=timeoutMs or default_timeout_ms(lcm),
                                    conversation_id=conversationId,
                                    session_key=_scope_keys(ctx, allConversations)))
        for key in ("error", "errorCode"):  # set only when nothing answered (below)
            out.pop(key, None)
        return out
    except ExpansionFailedError as exc:
        if exc.result is None:
            raise
        # No bucket answered: still an error (``{"error": {...}}``, so hosts flag it), whose
        # object carries what the reference reports then: errorCode, the empty counters and
        # the breakdown naming each conversation's phase, elapsed time and code.
        out = _out(exc.result)
        detail = {k: out[k] for k in ("errorCode", "citedIds", "sourceConversationIds", "expandedSummaryCount",
                                      "totalSourceTokens", "truncated", "conversationBreakdown")}
        return {"error": {"code": exc.code, "message": redact(str(exc)), "field": None, **detail}}


def default_timeout_ms(lcm: "LcmStore") -> int:
    """``timeoutMs`` when the caller gives none: ``delegationTimeoutMs`` plus the reference's 30 s
    of headroom (150 s with the defaults), so delegated recall ends before the host stops waiting."""
    return int(lcm.config.delegation_timeout_ms) + TIMEOUT_HEADROOM_MS


def expand_query_deadline(facade: Any, arguments: Any) -> float | None:
    """Seconds ``lcm_expand_query`` may run over ``amem serve`` (``tools.runner``): its own
    ``timeoutMs`` (or the default), which the runner bounds by the server's maximum."""
    lcm = getattr(facade, "lcm", None)
    if lcm is None:
        return None
    given = arguments.get("timeoutMs") if isinstance(arguments, dict) else None
    ms = given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else default_timeout_ms(lcm)
    return ms / 1000


def lcm_tools() -> list[Tool]:
    """The four ``lcm_*`` recall tools, with lossless-claw's argument names (camelCase)."""
    return [
        Tool(
            name="lcm_grep", handler=lcm_grep, core=True, group="lcm",
            summary="search the full history of past conversations",
            description=(
                "Search the complete, lossless history of this conversation and its earlier "
                "sessions (raw messages and their summaries) by an RE2 regular expression "
                "(mode=regex, the default: no backreferences or lookarounds), by words "
                "(mode=full_text), by meaning (mode=semantic: a paraphrase finds the wording "
                "actually used) or both (mode=hybrid: words and meaning fused). scope=files searches stored large files (fileIds to name "
                "some; the first 8 MB of each). allConversations=true searches all your "
                "sessions. Use it when something was said earlier but is no longer in context. "
                "Returns {hits: [{type, id, conversationId, createdAt, snippet, score, role, name "
                "(the speaker, when the host named one), "
                "kind (leaf/condensed), depth, summaryId (summary hits), line, byteOffset and "
                "matchText (file hits)}], truncated, notEmbedded "
                "(semantic/hybrid: items not embedded yet, unseen by meaning)}; follow up "
                "with lcm_describe or lcm_expand_query."),
            schema=obj({
                "pattern": {"type": "string", "minLength": 1, "maxLength": 500,
                            "description": "An RE2 regex (regex), words and phrases (full_text), "
                            "or a question or paraphrase (semantic, hybrid)."},
                "mode": {"type": "string", "enum": ["regex", "full_text", "semantic", "hybrid"],
                         "default": "regex"},
                "scope": {"type": "string", "enum": ["messages", "summaries", "both", "files"],
                          "default": "both"},
                "conversationId": _CONVERSATION,
                "allConversations": _ALL,
                "fileIds": {"type": "array", "minItems": 1, "maxItems": 50,
                            "items": {"type": "string", "minLength": 1, "maxLength": 100},
                            "description": "Only these stored files (file_...); needs scope=files."},
                "since": _TIME, "before": _TIME,
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                "sort": {"type": "string", "enum": ["recency", "relevance", "hybrid"],
                         "description": "Hit order; default recency (newest first), and "
                         "relevance (best match first) for semantic and hybrid."},
            }, required=["pattern"])),
        Tool(
            name="lcm_describe", handler=lcm_describe, group="lcm",
            summary="show one conversation summary or stored file by id",
            description=(
                "Show one item of the conversation history by id: a summary (sum_...) with its "
                "metadata, parentIds (the summaries it was condensed from: walk them down to the "
                "source), childIds (summaries condensed from it), source message ids and fileIds; "
                "a stored large file (file_...) with fileName, mimeType, byteSize, storageName and "
                "a slice of its text (offset/limit page through it; expandFile=true adds its first "
                "expandFileMaxBytes bytes as content, with contentTruncated); or a message "
                "(msg_...). Use it on ids returned by lcm_grep. Returns the item with its type, or "
                "a not_found error."),
            schema=obj({
                "id": {"type": "string", "minLength": 1, "maxLength": 100,
                       "description": "A summary (sum_...), file (file_...) or message (msg_...) id."},
                "conversationId": _CONVERSATION,
                "allConversations": _ALL,
                "offset": {"type": "integer", "minimum": 0, "maximum": 1000000000, "default": 0,
                           "description": "Files: the first character of the slice."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50000, "default": 4000,
                          "description": "Files: characters in the slice."},
                "expandFile": {"type": "boolean", "default": False,
                               "description": "Files: inline the file's content from its start "
                               "(content, contentTruncated); lcm_grep scope=files searches past it."},
                "expandFileMaxBytes": {"type": "integer", "minimum": 1024, "maximum": 512000,
                                       "description": "Files: bytes expandFile inlines at most; "
                                       "default the server's expandFileMaxBytes (32768)."},
            }, required=["id"])),
        Tool(
            name="lcm_expand", handler=lcm_expand, group="lcm",
            summary="recover the original messages behind summaries",
            description=(
                "Walk summaries down to the original messages they were made from, to recover "
                "exact wording, numbers or commands. Give summaryIds (from lcm_grep) or a query "
                "that finds them. Returns {summaries, messages, totalTokens, truncated}, "
                "within tokenCap and the server's maxExpandTokens."),
            schema=obj({
                "summaryIds": _SUMMARY_IDS,
                "query": {"type": "string", "minLength": 1, "maxLength": 500,
                          "description": "Find the summaries to expand by this search instead."},
                "maxDepth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "tokenCap": _TOKEN_CAP,
                "conversationId": _CONVERSATION,
                "allConversations": _ALL,
            })),
        Tool(
            name="lcm_expand_query", handler=lcm_expand_query, group="lcm",
            deadline=expand_query_deadline,
            summary="answer a question from the expanded conversation history",
            description=(
                "Answer one focused question from the original messages behind the summaries "
                "that match a query (or the given summaryIds), citing the ids it used. Use it "
                "when a summary mentions something you need in detail. The matches are grouped "
                "by conversation; the best 3 conversations are expanded at once (by a bounded "
                "sub-agent with lcm_describe/lcm_expand/lcm_grep when a model is configured) "
                "under one shared deadline and one shared tokenCap. Returns {answer, citedIds, "
                "sourceConversationIds, expandedSummaryCount, totalSourceTokens, truncated, "
                "method, conversationBreakdown: [{conversationId, status (success/failed/"
                "skipped), summaryIds, phase, elapsedMs, tokens, errorCode, error}]}; truncated "
                "is true when a conversation was skipped or failed or a cap cut the answer. "
                "method=extractive means no model is configured and the answer is the best "
                "source passages. When no conversation could answer it is an error (timeout, "
                "expansion_failed, ...) whose object also carries errorCode and "
                "conversationBreakdown."),
            schema=obj({
                "prompt": {"type": "string", "minLength": 1, "maxLength": 2000,
                           "description": "The question to answer."},
                "query": {"type": "string", "minLength": 1, "maxLength": 500,
                          "description": "Search terms that find the relevant summaries."},
                "summaryIds": _SUMMARY_IDS,
                "maxTokens": {"type": "integer", "minimum": 1, "maximum": 20000, "default": 2000,
                              "description": "Answer length cap."},
                "tokenCap": _TOKEN_CAP,
                "timeoutMs": {"type": "integer", "minimum": 1, "maximum": 600000,
                              "description": "Deadline for the whole call, in ms; default the "
                              "server's delegationTimeoutMs + 30000 (150000 by default). The "
                              "conversations are expanded under one shared deadline, at most "
                              "delegationTimeoutMs; over amem serve the call gets this deadline "
                              "(up to the server's maximum) instead of the fixed one."},
                "conversationId": _CONVERSATION,
                "allConversations": _ALL,
            }, required=["prompt"])),
    ]
