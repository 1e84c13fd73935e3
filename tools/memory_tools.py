"""The ``memory_*`` tools: thin handlers over ``MemoryStore`` that always act as the caller's agent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amem.notefields import DERIVED_FIELDS, MAX_TTL
from amem.refresh import count_stale
from amem.search.visibility import count_expired

from .context import CallContext
from .errors import ToolError
from .registry import Tool, obj

if TYPE_CHECKING:
    from amem import MemoryStore

#: longest note text the tool accepts (the store's default limit; a smaller config still wins)
MAX_TEXT_CHARS = 32_000
MAX_QUERY_CHARS = 4_000
MAX_SEARCH_LIMIT = 50
LIST_PREVIEW_CHARS = 300
#: note fields the tools never return: internal bookkeeping, or the caller's own identity
_HIDDEN = ("hash", "folded_hashes", "agent_id", *DERIVED_FIELDS)

_ID = {"type": "string", "minLength": 1, "maxLength": 200, "description": "A note id."}
_META_HELP = ("Your own labels, {key: string | number | boolean} (at most 32 keys; a key is a "
              "letter or _ then letters, digits or _.:-; strings up to 256 characters); "
              "memory_search filters on them.")
_NAMES = {"type": "array", "maxItems": 64,
          "items": {"type": "string", "minLength": 1, "maxLength": 200}}


def _store(ctx: "CallContext") -> "MemoryStore":
    # The facade refuses every memory_* call when it has no store, so one is always here.
    assert ctx.memory is not None
    return ctx.memory


def note_view(payload: dict[str, Any]) -> dict[str, Any]:
    """A note as the tools and ``amem get`` show it: without the hidden bookkeeping fields."""
    return {k: v for k, v in payload.items() if k not in _HIDDEN}


def memory_add(ctx: "CallContext", text: str, subjects: list[str] | None = None,
               eventTime: str | None = None,  # noqa: N803 - the wire names are camelCase
               metadata: dict[str, Any] | None = None,
               expiresAt: str | None = None,  # noqa: N803
               ttl: float | None = None, tags: list[str] | None = None) -> dict[str, Any]:
    # given tags are checked by the store as every write's are (amem.notes.check_tags)
    result = _store(ctx).add(text, subjects or (), agent_id=ctx.agent_id, event_time=eventTime,
                             metadata=metadata, expires_at=expiresAt, ttl=ttl, tags=tags)
    return result.to_dict()


def memory_search(ctx: "CallContext", query: str, limit: int = 5,
                  topicsFilter: list[str] | None = None,  # noqa: N803 - the wire name
                  subject: str | None = None,
                  minSimilarity: float | None = None,  # noqa: N803
                  since: str | None = None, before: str | None = None,
                  metadata: dict[str, Any] | None = None,
                  includeSuperseded: bool = False,  # noqa: N803
                  tags: list[str] | None = None) -> dict[str, Any]:
    hits = _store(ctx).search(query, limit=limit, topics_filter=topicsFilter, subject=subject,
                              agent_id=ctx.agent_id, min_similarity=minSimilarity,
                              include_superseded=includeSuperseded, since=since,
                              before=before, metadata=metadata, tags=tags,
                              record_usage=not ctx.read_only)
    results = [h.to_dict() for h in hits]
    return {"results": results,
            "matches": sum(1 for r in results if r["via"] == "match"),
            "linked": sum(1 for r in results if r["via"] == "link")}


def memory_list(ctx: "CallContext", limit: int = 20, offset: str | None = None) -> dict[str, Any]:
    store = _store(ctx)
    notes, nxt = store.list(agent_id=ctx.agent_id, limit=limit, offset=offset)
    items = []
    for note in notes:
        content = note.content
        cut = len(content) > LIST_PREVIEW_CHARS
        items.append({"id": note.id, "content": content[:LIST_PREVIEW_CHARS] + ("…" if cut else ""),
                      "truncated": cut, "timestamp": note.timestamp, "category": note.category,
                      "tags": note.tags, "note_type": note.note_type,
                      "pending_merge": note.pending_merge})
    return {"count": store.count(agent_id=ctx.agent_id), "notes": items, "next_offset": nxt}


def memory_get(ctx: "CallContext", id: str) -> dict[str, Any]:  # noqa: A002 - the wire name
    return note_view(_store(ctx).get(id, agent_id=ctx.agent_id,
                                     record_usage=not ctx.read_only).to_payload())


def memory_update(ctx: "CallContext", id: str, text: str | None = None,  # noqa: A002
                  subjects: list[str] | None = None,
                  tags: list[str] | None = None) -> dict[str, Any]:
    return _store(ctx).update(id, content=text, subjects=subjects, tags=tags,
                              agent_id=ctx.agent_id).to_dict()


def memory_delete(ctx: "CallContext", id: str) -> dict[str, Any]:  # noqa: A002
    return _store(ctx).delete(id, agent_id=ctx.agent_id).to_dict()


def memory_history(ctx: "CallContext", id: str) -> dict[str, Any]:  # noqa: A002
    return {"id": id, "chain": _store(ctx).history(id, agent_id=ctx.agent_id)}


def memory_unsupersede(ctx: "CallContext", id: str,  # noqa: A002
                       confirm: bool) -> dict[str, Any]:
    if confirm is not True:
        raise ToolError("invalid_argument", "memory_unsupersede shows a hidden fact again and "
                        "keeps it so against the note that hid it; call it with confirm: true "
                        "only when the user said that fact is still true", field="confirm")
    return _store(ctx).unsupersede(id, agent_id=ctx.agent_id)


def memory_separate(ctx: "CallContext", id: str, part: str,  # noqa: A002
                    confirm: bool) -> dict[str, Any]:
    if confirm is not True:
        raise ToolError("invalid_argument", "memory_separate takes a text a fold or a merge "
                        "joined into a memory out again, as a memory of its own, and keeps "
                        "the two apart for good; call it with confirm: true only when the user "
                        "said they are different facts", field="confirm")
    return _store(ctx).separate(id, part, agent_id=ctx.agent_id).to_dict()


def memory_delete_all(ctx: "CallContext", confirm: bool) -> dict[str, Any]:
    # Only ever the caller's own agent: the tool takes no agent id, the context names it.
    if confirm is not True:
        raise ToolError("invalid_argument", "memory_delete_all erases every memory of this "
                        "agent for good; call it with confirm: true only when the user asked "
                        "for that", field="confirm")
    return {"deleted": _store(ctx).delete_all(agent_id=ctx.agent_id)}


def memory_consolidate(ctx: "CallContext") -> dict[str, Any]:
    try:
        report = _store(ctx).consolidate(agent_id=ctx.agent_id)
    except ImportError as exc:  # amem.consolidate is optional until it lands
        raise ToolError("unavailable", f"consolidation is not available: {exc}") from None
    return report.to_dict()


def memory_status(ctx: "CallContext") -> dict[str, Any]:
    store = _store(ctx)
    degraded: list[str] = []
    # Every figure is this agent's own (the owner's `amem status` has the store's totals): a
    # store-wide count would tell a caller about other agents' notes.
    stale = count_stale(store.index, ctx.agent_id)
    memory = {"notes": store.count(agent_id=ctx.agent_id), "embedder": store.embedder.model_id,
              "dim": store.embedder.dim, "backend": store.backend_kind,
              # expired notes are no longer "notes" but still take room until the nightly sweep
              "expired_pending_sweep": count_expired(store.index, ctx.agent_id),
              "stale_vectors": stale}
    if store.embedder.model_id.startswith("hashing"):
        degraded.append("the embedder is the hashing fallback: search matches words, not meaning")
    if stale:
        degraded.append(f"{stale} of your notes embed an earlier text of theirs (an "
                        "interrupted write); the next write, import or nightly job re-embeds them")
    if store.llm is None:
        degraded.append("no LLM configured: notes are enriched offline (keywords, no context)")
    if ctx.lcm is None:
        degraded.append("the conversation store (lcm) is off: lcm_* tools are unavailable")
    return {"agent": ctx.agent_id, "versions": _versions(), "memory": memory,
            "lcm": {"available": ctx.lcm is not None}, "degraded": degraded}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for dist in ("amem", "mcp", "qdrant-edge-py"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            continue  # a checkout run without installing, or the mcp extra not installed
    return found


def memory_tools() -> list[Tool]:
    """The ``memory_*`` tools."""
    return [
        Tool(
            name="memory_add", handler=memory_add, core=True, writes=True,
            summary="store a fact or event in long-term memory",
            description=(
                "Store one fact, preference, decision or event in long-term memory so it can be "
                "found in later conversations. Write it as one self-contained statement (who, what, "
                "when). Exact duplicates are recognised and near-duplicates are folded into the "
                "existing note; an older memory this one replaces (moved, switched, stopped) is "
                "marked superseded. Given tags are the memory's labels as written (no keywords "
                "are drawn then); for a text already stored, the tags it lacks are added "
                "(tags_added). Returns {status: created|deduplicated|folded|pending_merge, "
                "id, links, evolved, enriched_by, supersedes, warnings}."),
            schema=obj({
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS,
                         "description": "The memory, as a self-contained statement."},
                "subjects": {**_NAMES, "description": "People or entities the memory is about "
                             "(lets memory_search filter by subject)."},
                "eventTime": {"type": "string", "minLength": 1, "maxLength": 64,
                               "description": "When the event happened, ISO 8601 (e.g. "
                               "2026-03-01T14:00:00+01:00); default: now. memory_search "
                               "filters on it with since/before."},
                "metadata": {"type": "object", "description": _META_HELP},
                "expiresAt": {"type": "string", "minLength": 1, "maxLength": 64,
                               "description": "ISO 8601 time after which the memory is "
                               "forgotten (hidden at once, deleted nightly)."},
                "ttl": {"type": "number", "minimum": 1, "maximum": MAX_TTL,
                        "description": "Forget the memory this many seconds from now (instead "
                        "of expiresAt)."},
                "tags": {**_NAMES, "description": "Labels to file the memory by (memory_search "
                         "filters on them, any case, a leading '#' or not); a tag of only "
                         "'#' is refused."},
            }, required=["text"])),
        Tool(
            name="memory_search", handler=memory_search, core=True,
            summary="find stored memories relevant to a query",
            description=(
                "Search long-term memory by meaning and keywords (hybrid BM25 + embeddings). Use it "
                "before answering questions about the user, past decisions or earlier sessions. "
                "`limit` counts direct matches; up to 8 linked notes may follow them with "
                "via='link'. `similarity` runs from 0 (unrelated) to 1 (a typical answer); set "
                "`minSimilarity` (e.g. 0.3) to get nothing rather than unrelated notes. Results "
                "are ordered by `score`. Returns {results: [{id, content, context, keywords, "
                "tags, topics, links, timestamp, note_type, similarity, score, rrf, via, "
                "found_by}], matches, linked}."),
            schema=obj({
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS,
                          "description": "What to look for, in natural language."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                          "default": 5, "description": "How many direct matches to return."},
                "topicsFilter": {**_NAMES, "description": "Knowledge notes must carry all of "
                                 "these topics; ordinary memories are not filtered."},
                "subject": {"type": "string", "minLength": 1, "maxLength": 200,
                            "description": "Only memories about this subject (plus memories "
                            "about nobody in particular)."},
                "minSimilarity": {"type": "number", "minimum": -1, "maximum": 1,
                                   "description": "Drop results whose similarity to the query is "
                                   "below this (0 = unrelated, 1 = a typical answer); off by "
                                   "default."},
                "since": {"type": "string", "minLength": 1, "maxLength": 64,
                          "description": "Only memories whose event time is at or after this "
                          "ISO 8601 time."},
                "before": {"type": "string", "minLength": 1, "maxLength": 64,
                           "description": "Only memories whose event time is before this ISO "
                           "8601 time."},
                "metadata": {"type": "object", "description": "Only memories whose metadata "
                             "has each of these key: value pairs (a list value: any of them), "
                             "e.g. {\"project\": \"apollo\"}."},
                "includeSuperseded": {"type": "boolean", "default": False,
                                       "description": "Also return notes a newer note replaced "
                                       "(history), each right after the note that replaced it, "
                                       "with superseded_by; off by default."},
                "tags": {**_NAMES, "description": "Only memories holding any of these tags, "
                         "case-insensitive and with or without a leading '#' ('morning' "
                         "finds 'Morning'; e.g. an imported Obsidian note's tags)."},
            }, required=["query"])),
        Tool(
            name="memory_list", handler=memory_list,
            summary="count stored memories and page through them",
            description=(
                "Count your stored memories and list them page by page (content previews of "
                f"{LIST_PREVIEW_CHARS} characters). Use it for an overview, not to find something "
                "(memory_search does that). Returns {count, notes: [{id, content, truncated, "
                "timestamp, category, tags, note_type, pending_merge}], next_offset}."),
            schema=obj({
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20,
                          "description": "Notes per page."},
                "offset": {"type": "string", "minLength": 1, "maxLength": 200,
                           "description": "The next_offset of the previous page."},
            })),
        Tool(
            name="memory_get", handler=memory_get,
            summary="read one memory in full by id",
            description=(
                "Read one memory note in full by its id, with its links, keywords, tags, context "
                "and evolution history. Returns the note, or a not_found error."),
            schema=obj({"id": _ID}, required=["id"])),
        Tool(
            name="memory_update", handler=memory_update, writes=True,
            summary="correct or change one memory in place",
            description=(
                "Change the text, subjects and/or tags of one memory note by id, for example when a "
                "stored fact was wrong or needs more detail. The note keeps its id; it is "
                "enriched, embedded and linked again, and its previous text stays in its "
                "evolution history. For a fact that changed over time prefer memory_add: the "
                "new note supersedes the old one and the history stays searchable. Returns "
                "{id, status: updated|unchanged, changed, links, links_added, links_removed, "
                "supersedes, released, enriched_by, warnings}, or a not_found error."),
            schema=obj({
                "id": _ID,
                "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS,
                         "description": "The new text of the memory (replaces the old one)."},
                "subjects": {**_NAMES, "description": "The new subjects (replace the old "
                             "ones; [] clears them)."},
                "tags": {**_NAMES, "description": "The new tags (replace the old ones; [] "
                         "clears them)."},
            }, required=["id"])),
        Tool(
            name="memory_delete", handler=memory_delete, writes=True,
            summary="delete one memory by id",
            description=(
                "Delete one memory note by id, for example when the user asks to forget "
                "something or it is wrong. The note stops appearing in searches; the older "
                "notes it had replaced are current again and listed in released. Returns "
                "{id, deleted: true, released}, or a not_found error."),
            schema=obj({"id": _ID}, required=["id"])),
        Tool(
            name="memory_history", handler=memory_history,
            summary="what a memory replaced and what replaced it",
            description=(
                "Show the supersession chain of one memory note by id: the older notes it "
                "replaced (hidden from search) and the newer notes that replaced it, oldest "
                "first, deleted ones included, and the texts folded or merged into each (events "
                "fold, consolidate_merge: memory_separate undoes one). Use it when a search "
                "result lists hidden ids, or the user asks how a fact changed. Returns {id, chain: [{id, content, "
                "event_time, is_active, superseded_by, supersedes, kept_against, events}]}, "
                "or a not_found error."),
            schema=obj({"id": _ID}, required=["id"])),
        Tool(
            name="memory_unsupersede", handler=memory_unsupersede, writes=True,
            summary="show a wrongly hidden memory again (confirm: true)",
            description=(
                "Restore a memory that a newer note hid by mistake (the older fact is still "
                "true): it appears in searches again, and the pair is remembered so it is "
                "never hidden behind that note again. Pass the hidden note's id and confirm: "
                "true only when the user said so. Returns {id, was_superseded_by, restored: "
                "true}, or an invalid_argument error when the note is not hidden."),
            schema=obj({"id": _ID,
                        "confirm": {"type": "boolean", "description": "Must be true: the user "
                                    "said the hidden fact is still true."}},
                       required=["id", "confirm"])),
        Tool(
            name="memory_separate", handler=memory_separate, writes=True,
            summary="undo a fold or merge of two memories (confirm)",
            description=(
                "Undo a join: a near-duplicate folded into a memory when it was added, or a "
                "memory merged into it at night, becomes its own memory again, and the two are "
                "never joined again. Use it when the user says a memory mixes two different "
                "facts. memory_history lists what was joined into a memory (events of action "
                "fold: pass its triggered_by as part; consolidate_merge: its merged). Pass "
                "confirm: true only when the user said so. Returns {id, part, note (the id of "
                "the separated memory), joined_by, text_restored, removed, links, supersedes "
                "(older memories it replaces), relinked, warnings}; text_restored is false "
                "when the memory's text changed since and was kept."),
            schema=obj({"id": _ID,
                        "part": {**_ID, "description": "The joined text's id, as "
                                 "memory_history shows it."},
                        "confirm": {"type": "boolean", "description": "Must be true: the user "
                                    "said the two are different facts."}},
                       required=["id", "part", "confirm"])),
        Tool(
            name="memory_delete_all", handler=memory_delete_all, writes=True,
            summary="erase every memory of this agent (needs confirm: true)",
            description=(
                "Erase every memory note of this agent for good (it cannot be undone). Only when "
                "the user explicitly asks to forget everything; pass confirm: true. Other agents' "
                "memories are not touched. Returns {deleted: number of notes erased}."),
            schema=obj({"confirm": {"type": "boolean", "description": "Must be true: the user "
                                    "asked to erase all memories."}}, required=["confirm"])),
        Tool(
            name="memory_consolidate", handler=memory_consolidate, writes=True,
            summary="merge duplicate memories now (normally runs nightly)",
            description=(
                "Merge near-duplicate memories and resolve notes flagged pending_merge. It runs "
                "nightly on its own; call it only when asked to tidy memory now. It can take a "
                "while on a large store. Returns a report of what was merged."),
            schema=obj({})),
        Tool(
            name="memory_status", handler=memory_status,
            summary="counts, embedder, versions and degraded paths",
            description=(
                "Report the state of your memory: how many notes you have, the embedder, the "
                "versions running, and any degraded path (a fallback embedder, no LLM, the "
                "conversation store off). Use it when memory seems to behave oddly. Returns "
                "{agent, versions, memory: {notes, embedder, dim, backend}, lcm: {available}, "
                "degraded: [...]}; over HTTP with request budgets also rate_limit: your key's "
                "budgets and how many of your requests were served and refused."),
            schema=obj({})),
    ]
