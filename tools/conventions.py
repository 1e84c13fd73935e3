"""MCP conventions of every tool, by name: a title, the hints, and the schema of its result.

Kept apart from the handlers so that one table says, for the whole catalogue, what a host
may assume: which tools only read (``readOnlyHint``), which may lose what a caller stored
(``destructiveHint``), which are safe to retry (``idempotentHint``), and what a result looks
like (``outputSchema``). ``apply`` copies an entry onto its ``Tool``; the meta-tests hold that
every registered tool has one and that real results validate against it.

Output schemas describe the fields a caller may rely on (``required``) and leave the object
open (no ``additionalProperties: false``): a field added later must not make an older
client reject the result. Each served schema is ``anyOf`` the success shape and the
structured error (``tools.errors``): the SDK clients skip validation of ``isError`` results,
but the specification does not say they must, so an error validates either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from .registry import Tool

_S: dict[str, Any] = {"type": "string"}
_I: dict[str, Any] = {"type": "integer"}
_N: dict[str, Any] = {"type": "number"}
_B: dict[str, Any] = {"type": "boolean"}
_A: dict[str, Any] = {"type": "array"}
_STRS: dict[str, Any] = {"type": "array", "items": _S}


def _opt(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` or null."""
    return {"anyOf": [dict(schema), {"type": "null"}]}


def shape(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An open object: these properties typed, ``required`` present, others allowed."""
    out: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    return out


#: the structured error every tool may return (``tools.errors.error_result``)
ERROR_SCHEMA = shape({"error": shape({"code": _S, "message": _S, "field": _opt(_S)},
                                     ("code", "message"))}, ("error",))

_WARNINGS = {"type": "array", "description": "Degraded paths taken by this call, if any."}
_NOTE = shape({"id": _S, "content": _S, "keywords": _STRS, "tags": _STRS, "context": _S,
               "links": _A, "timestamp": _S, "note_type": _S, "topics": _STRS,
               "subjects": _STRS}, ("id", "content"))
_DEFINITION = shape({"name": _S, "description": _S, "input_schema": {"type": "object"}},
                    ("name", "description", "input_schema"))


@dataclass(frozen=True)
class Convention:
    """One tool's MCP conventions (see the module doc)."""

    title: str
    output: Mapping[str, Any]
    writes: bool = False
    destructive: bool = False
    idempotent: bool = True


CONVENTIONS: dict[str, Convention] = {
    # Searching and reading bump access counters (bookkeeping for consolidation), which no
    # caller observes as a change: they stay read-only so hosts never ask to confirm a search.
    "memory_add": Convention(
        "Store a memory", shape({"status": _S, "id": _S, "links": _A, "evolved": _A,
                                 "enriched_by": _opt(_S), "warnings": _WARNINGS,
                                 "tags_added": _STRS},
                                ("status", "id")),
        # Not destructive: near-duplicates fold into a note whose history keeps the old text.
        writes=True, idempotent=True),
    "memory_search": Convention(
        "Search memory", shape({"results": {"type": "array", "items": shape(
            {**_NOTE["properties"], "similarity": _opt(_N), "score": _N, "via": _S,
             "found_by": _S, "superseded_by": _opt(_S), "hidden": _STRS,
             "partly_superseded_by": _opt(_S), "boosted_by": _opt(_S)},
            ("id", "content", "score", "via"))},
            "matches": _I, "linked": _I}, ("results", "matches", "linked"))),
    "memory_list": Convention(
        "List memories", shape({"count": _I, "notes": {"type": "array", "items": shape(
            {"id": _S, "content": _S, "truncated": _B, "timestamp": _S, "tags": _STRS,
             "note_type": _S, "pending_merge": _B}, ("id", "content", "truncated"))},
            "next_offset": _opt(_S)}, ("count", "notes", "next_offset"))),
    "memory_get": Convention("Read a memory", _NOTE),
    "memory_update": Convention(
        "Edit a memory", shape({"id": _S, "status": _S, "changed": _STRS, "links": _A,
                                "supersedes": _STRS, "warnings": _WARNINGS},
                               ("id", "status", "changed")),
        # Not destructive: the previous text stays in the note's evolution history. The same
        # edit twice leaves the note as the first left it ("unchanged").
        writes=True, destructive=False, idempotent=True),
    "memory_delete": Convention(
        "Delete a memory", shape({"id": _S, "deleted": _B, "released": _STRS},
                                 ("id", "deleted", "released")),
        writes=True, destructive=True, idempotent=True),
    "memory_history": Convention(
        "Memory history", shape({"id": _S, "chain": {"type": "array", "items": shape(
            {"id": _S, "content": _S, "is_active": _B, "merged_into": _opt(_S),
             "superseded_by": _opt(_S), "supersedes": _STRS, "kept_against": _STRS, "events": _A},
            ("id", "content", "is_active", "superseded_by", "supersedes"))}},
            ("id", "chain"))),
    "memory_unsupersede": Convention(
        # Shows a fact again: nothing is lost; the same call twice is refused (not hidden).
        "Restore a hidden memory", shape({"id": _S, "was_superseded_by": _S, "restored": _B},
                                         ("id", "was_superseded_by", "restored")),
        writes=True, destructive=False, idempotent=False),
    "memory_separate": Convention(
        # Makes one note two: nothing is lost (both texts stay whole); the same call twice is
        # refused (separated already).
        "Separate joined memories", shape({"id": _S, "part": _S, "note": _S, "joined_by": _S,
                                           "text_restored": _B, "removed": {"type": "object"},
                                           "warnings": _WARNINGS},
                                          ("id", "part", "note", "joined_by", "text_restored")),
        writes=True, destructive=False, idempotent=False),
    "memory_delete_all": Convention(
        # Erases everything of the agent: destructive; a repeat finds nothing more to erase.
        "Erase all memories", shape({"deleted": _I}, ("deleted",)),
        writes=True, destructive=True, idempotent=True),
    "memory_consolidate": Convention(
        "Merge duplicate memories", shape({"merges": _I, "notes": _I, "warnings": _WARNINGS},
                                          ("merges",)),
        # Merging retires the merged notes: destructive, and a rerun may merge more.
        writes=True, destructive=True, idempotent=False),
    "memory_status": Convention(
        "Memory status", shape({"agent": _S, "versions": {"type": "object"},
                                "memory": shape({"notes": _I, "embedder": _S, "dim": _I},
                                                ("notes", "embedder")),
                                "lcm": shape({"available": _B}, ("available",)),
                                "degraded": _STRS,
                                # over HTTP with request budgets: the calling key's own
                                "rate_limit": {"type": "object"}},
                               ("agent", "versions", "memory", "lcm", "degraded"))),
    # The lcm results carry lossless-claw's names (camelCase, ``tools.lcm_tools``): only the
    # fields whose spelling is the same in both styles are pinned here.
    "lcm_grep": Convention(
        "Search conversation history", shape({"hits": {"type": "array", "items": shape(
            {"id": _S, "snippet": _S}, ("id",))}, "truncated": _B}, ("hits", "truncated"))),
    "lcm_describe": Convention(
        "Describe a history item", shape({"id": _S, "kind": _S}, ("id", "kind"))),
    "lcm_expand": Convention(
        "Expand summaries", shape({"summaries": _A, "messages": _A, "truncated": _B},
                                  ("messages", "truncated"))),
    "lcm_expand_query": Convention(
        "Answer from history", shape({
            "answer": _S, "truncated": _B, "warnings": _WARNINGS,
            "conversationBreakdown": {"type": "array", "items": shape({
                "conversationId": {"type": "integer"}, "status": {"enum": ["success", "failed", "skipped"]},
                "summaryIds": _STRS, "phase": _S, "elapsedMs": {"type": "integer"},
                "tokens": {"type": "integer"}, "errorCode": _opt(_S), "error": _opt(_S)},
                ("conversationId", "status", "phase", "elapsedMs"))}},
            ("answer",))),
    "tool_info": Convention(
        "Tool definitions", shape({"matched_by": {"enum": ["name", "keyword"]},
                                   "tools": {"type": "array", "items": _DEFINITION}},
                                  ("matched_by", "tools"))),
}


def served_output_schema(success: Mapping[str, Any]) -> dict[str, Any]:
    """The ``outputSchema`` on the wire: the success shape or the structured error."""
    return {"type": "object", "anyOf": [dict(success), ERROR_SCHEMA]}


def apply(tool: Tool) -> Tool:
    """``tool`` with its conventions filled in; a tool without an entry is returned as is
    (the meta-tests fail on it, naming the tool)."""
    conv = CONVENTIONS.get(tool.name)
    if conv is None:
        return tool
    if conv.writes != tool.writes:
        raise ValueError(f"tool {tool.name}: writes={tool.writes} but its convention says "
                         f"{conv.writes}")
    return dataclasses.replace(tool, title=tool.title or conv.title,
                               output_schema=served_output_schema(conv.output),
                               destructive=conv.destructive, idempotent=conv.idempotent)


#: ``AMEM_TOOL_DESCRIPTION_<TOOL NAME IN CAPITALS>`` replaces one tool's description
DESCRIPTION_ENV = "AMEM_TOOL_DESCRIPTION_"


def description_overrides(env: Mapping[str, str], tools_table: Mapping[str, Any] | None = None,
                          names: Any = None) -> dict[str, str]:
    """Tool descriptions a deployment words itself (as mcp-server-qdrant allows): the TOML
    table ``[tools.descriptions]`` (``memory_search = "..."``; ``tools_table`` is the file's
    ``[tools]`` table as ``tools.settings`` read it), then ``AMEM_TOOL_DESCRIPTION_
    MEMORY_SEARCH`` in the environment, which wins. ``names`` (all tool names) makes an
    unknown name an error instead of an override nobody would ever see.

    Raises:
        amem.errors.ConfigError: a value that is not a non-empty string, an unknown tool, or
            a ``descriptions`` entry that is not a table; ``key`` names the entry or the variable.
    """
    from amem.errors import ConfigError

    found: dict[str, tuple[str, str]] = {}
    table = (tools_table or {}).get("descriptions", {})
    if not isinstance(table, Mapping):
        raise ConfigError("tools.descriptions must be a table of tool name = description",
                          key="tools.descriptions")
    for name, text in table.items():
        found[name] = (text, f"tools.descriptions.{name}")
    for var, text in env.items():
        if var.startswith(DESCRIPTION_ENV):
            found[var[len(DESCRIPTION_ENV):].lower()] = (text, var)
    known = None if names is None else set(names)
    out: dict[str, str] = {}
    for name, (text, key) in found.items():
        if known is not None and name not in known:
            from amem.kernel.settings import did_you_mean

            raise ConfigError(f"{key}: there is no tool named {name!r}"
                              f"{did_you_mean(name, sorted(known))}", key=key)
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{key} must be a non-empty string", key=key)
        out[name] = text.strip()
    return out
