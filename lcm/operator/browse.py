"""Browse: read-only views of a store for an operator (conversations, messages, the DAG, context, files).

The API (stable since the ``kit-browse`` tag; every function only reads, on both engines):

- :func:`conversations` ``(db, *, limit=100, after_id=None, session_key=None) -> ConversationPage``:
  each conversation with its message / summary / file counts and its last activity, keyset-paged
  by id (``next_after_id`` is the cursor of the next page, ``None`` at the end).
- :func:`messages` ``(db, conversation_id, *, after_id=None, before_id=None, limit=50) -> MessagePage``:
  one window of a conversation's messages in ``seq`` order. ``after_id`` (a message id: the
  page's ``next_after_id``) pages forward; ``before_id`` (``prev_before_id``) pages backward
  (the newest window when neither is given and ``newest=True``). A message's id never changes,
  where ``amem restore --merge`` renumbers the conversation's ``seq`` to put the backup's
  messages in time order: paging on from an id after a merge neither repeats nor skips a
  message that was there. ``after_seq`` / ``before_seq`` (``next_after_seq``,
  ``prev_before_seq``) are the older positional cursors, kept for callers that have them: a
  merge in between moves what they name.
- :func:`summary_tree` ``(db, conversation_id) -> SummaryTree``: the summary DAG as a forest.
  A node's ``sources`` are the summaries it was condensed from (lossless-claw's "parents");
  a leaf lists its ``message_ids``. Roots are the summaries no other summary was built from.
- :func:`context_view` ``(db, config, conversation_id, token_budget, *, prompt=None) -> ContextView``:
  exactly what ``assemble`` hands the model next turn, built by the assembler's own
  :func:`lcm.assemble.build_context` without writing anything; ``would_compact`` says that
  ``assemble`` would compact (or record debt) first, so the next turn's context will differ.
- :func:`large_files` ``(db, *, conversation_id=None, min_bytes=0, limit=100) -> list[LargeFileRow]``:
  stored large files, biggest first, with their exploration summaries.

Every result is a frozen dataclass with ``to_dict()``. An unknown conversation raises
:class:`lcm.errors.LcmNotFoundError`; a bad paging argument :class:`lcm.errors.LcmValidationError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lcm.assemble import build_context, load_context
from lcm.compaction import resolve_params
from lcm.config import LcmConfig
from lcm.conn import Connection, Handle
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.models import AssembledItem, _Dict

__all__ = [
    "ConversationRow", "ConversationPage", "MessageRow", "MessagePage", "TreeNode", "SummaryTree",
    "ContextView", "LargeFileRow", "conversations", "messages", "summary_tree", "context_view",
    "large_files", "require_conversation", "positive_int",
]  # fmt: skip

#: the most rows one page may ask for (a window, not an export)
MAX_PAGE = 1000


def positive_int(value: object, name: str, *, upper: int | None = None, zero: bool = False) -> int:
    """``value`` as a checked int (>= 1, or >= 0 with ``zero``; at most ``upper``)."""
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (upper is not None and value > upper):
        bound = f" and at most {upper}" if upper is not None else ""
        raise LcmValidationError(f"{name} must be an integer >= {low}{bound}; got {value!r}", field=name)
    return value


def require_conversation(c: Connection, conversation_id: int) -> dict[str, object]:
    """The conversation row as a dict, or :class:`LcmNotFoundError` naming the id."""
    positive_int(conversation_id, "conversation_id")
    row = c.execute("SELECT id, session_key, active FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    if row is None:
        raise LcmNotFoundError(f"no conversation {conversation_id}", id=str(conversation_id))
    return {"id": row[0], "session_key": row[1], "active": bool(row[2])}


@dataclass(frozen=True)
class ConversationRow(_Dict):
    id: int
    session_key: str | None
    session_id: str | None
    active: bool
    created_at: str
    message_count: int
    summary_count: int
    file_count: int
    context_items: int
    #: the last message's time (by sequence), or the conversation's last update when it has none
    last_activity: str
    #: the conversation's title (a chat export's), None when it has none
    title: str | None = None


@dataclass(frozen=True)
class ConversationPage(_Dict):
    conversations: list[ConversationRow]
    next_after_id: int | None


_CONVERSATIONS = (
    "SELECT c.id, c.session_key, c.session_id, c.active, c.created_at, c.updated_at, "
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), "
    # the newest message by sequence (the (conversation, seq) index), not max(created_at): a scan
    "(SELECT m.created_at FROM messages m WHERE m.conversation_id = c.id ORDER BY m.seq DESC LIMIT 1), "
    "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.id), "
    "(SELECT count(*) FROM large_files f WHERE f.conversation_id = c.id), "
    "(SELECT count(*) FROM context_items ci WHERE ci.conversation_id = c.id), c.title "
    "FROM conversations c WHERE c.id > ? {where} ORDER BY c.id LIMIT ?"
)


def conversations(db: Handle, *, limit: int = 100, after_id: int | None = None,
                  session_key: str | None = None) -> ConversationPage:  # fmt: skip
    """One page of conversations by id, with their counts and last activity."""
    positive_int(limit, "limit", upper=MAX_PAGE)
    start = 0 if after_id is None else positive_int(after_id, "after_id", zero=True)
    where, params = ("AND c.session_key = ?", [session_key]) if session_key is not None else ("", [])
    rows = db.query(_CONVERSATIONS.format(where=where), (start, *params, limit + 1))
    out = [
        ConversationRow(int(r[0]), r[1], r[2], bool(r[3]), r[4], int(r[6]), int(r[8]), int(r[9]), int(r[10]),
                        str(r[7] or r[5]), r[11])
        for r in rows[:limit]
    ]  # fmt: skip
    return ConversationPage(out, out[-1].id if len(rows) > limit else None)


@dataclass(frozen=True)
class MessageRow(_Dict):
    id: int
    seq: int
    role: str
    content: str
    token_count: int
    created_at: str
    file_id: str | None
    #: the leaf summaries that cover this message (empty while it is raw)
    summary_ids: list[str] = field(default_factory=list)
    in_context: bool = False


@dataclass(frozen=True)
class MessagePage(_Dict):
    conversation_id: int
    messages: list[MessageRow]
    #: positions: pass ``after_seq=next_after_seq`` for the next window, ``before_seq=prev_before_seq``
    #: for the previous one (None: nothing more that way); a merge renumbers them
    next_after_seq: int | None
    prev_before_seq: int | None
    total: int
    #: the same cursors by message id (``after_id=``, ``before_id=``), which no merge changes
    next_after_id: int | None = None
    prev_before_id: int | None = None


def messages(db: Handle, conversation_id: int, *, after_seq: int | None = None, before_seq: int | None = None,
             limit: int = 50, newest: bool = False, after_id: int | None = None,
             before_id: int | None = None) -> MessagePage:  # fmt: skip
    """A keyset-paged window of a conversation's messages, in ``seq`` order.

    ``after_id`` gives the ``limit`` messages after that message; ``before_id`` the ``limit``
    messages before it; none gives the first window (or the last with ``newest=True``).
    ``after_seq`` / ``before_seq`` do the same by position (see the module docstring).

    Raises:
        LcmNotFoundError: ``after_id`` / ``before_id`` is no message of the conversation (one
            deleted since, by retention or a repair, or another conversation's).
    """
    positive_int(limit, "limit", upper=MAX_PAGE)
    given = [name for name, value in (("after_seq", after_seq), ("before_seq", before_seq), ("after_id", after_id),
                                      ("before_id", before_id)) if value is not None]  # fmt: skip
    if len(given) > 1:
        raise LcmValidationError(f"give one cursor, not both {given[0]} and {given[1]}", field=given[1])
    with db.reading() as c:
        require_conversation(c, conversation_id)
        if after_id is not None:
            after_seq = _seq_of(c, conversation_id, after_id, "after_id")
        if before_id is not None:
            before_seq = _seq_of(c, conversation_id, before_id, "before_id")
        cols = "id, seq, role, content, token_count, created_at, file_id"
        if before_seq is not None or (after_seq is None and newest):
            bound = positive_int(before_seq, "before_seq", zero=True) if before_seq is not None else None
            cond = "AND seq < ?" if bound is not None else ""
            rows = c.execute(f"SELECT {cols} FROM messages WHERE conversation_id = ? {cond} ORDER BY seq DESC LIMIT ?",
                             (conversation_id, *([bound] if bound is not None else []), limit + 1)).fetchall()  # fmt: skip
            more_before = len(rows) > limit
            rows = list(reversed(rows[:limit]))
            more_after = bound is not None and c.execute(
                "SELECT 1 FROM messages WHERE conversation_id = ? AND seq >= ? LIMIT 1", (conversation_id, bound)
            ).fetchone() is not None  # fmt: skip
        else:
            low = -1 if after_seq is None else positive_int(after_seq, "after_seq", zero=True)
            rows = c.execute(f"SELECT {cols} FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                             (conversation_id, low, limit + 1)).fetchall()  # fmt: skip
            more_after = len(rows) > limit
            rows = rows[:limit]
            more_before = after_seq is not None and c.execute(
                "SELECT 1 FROM messages WHERE conversation_id = ? AND seq <= ? LIMIT 1", (conversation_id, low)
            ).fetchone() is not None  # fmt: skip
        ids = [int(r[0]) for r in rows]
        covered: dict[int, list[str]] = {}
        live: set[int] = set()
        if ids:
            q = ",".join("?" * len(ids))
            for mid, sid in c.execute(f"SELECT message_id, summary_id FROM summary_messages WHERE message_id IN ({q}) "
                                      "ORDER BY summary_id", ids):  # fmt: skip
                covered.setdefault(int(mid), []).append(str(sid))
            live = {int(r[0]) for r in c.execute(
                f"SELECT message_id FROM context_items WHERE conversation_id = ? AND message_id IN ({q})",
                (conversation_id, *ids))}  # fmt: skip
        total = int(c.execute("SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)).fetchone()[0])
    out = [MessageRow(int(r[0]), int(r[1]), r[2], r[3], int(r[4]), r[5], r[6], covered.get(int(r[0]), []),
                      int(r[0]) in live) for r in rows]  # fmt: skip
    return MessagePage(conversation_id, out, out[-1].seq if out and more_after else None,
                       out[0].seq if out and more_before else None, total,
                       out[-1].id if out and more_after else None,
                       out[0].id if out and more_before else None)  # fmt: skip


def _seq_of(c: Connection, conversation_id: int, message_id: int, name: str) -> int:
    """Where message ``message_id`` of the conversation is now (a merge may have moved it)."""
    positive_int(message_id, name)
    row = c.execute("SELECT seq FROM messages WHERE conversation_id = ? AND id = ?",
                    (conversation_id, message_id)).fetchone()
    if row is None:
        raise LcmNotFoundError(f"the cursor {name}={message_id}: msg_{message_id} is no message of conversation "
                               f"{conversation_id} (deleted since the page was read, by retention or a repair, or "
                               "another conversation's); start again from the first or the newest window",
                               id=f"msg_{message_id}")  # fmt: skip
    return int(row[0])


@dataclass(frozen=True)
class TreeNode(_Dict):
    id: str
    kind: str
    depth: int
    token_count: int
    model: str
    status: str
    earliest_at: str
    latest_at: str
    in_context: bool
    #: the messages a leaf covers (empty for a condensed summary)
    message_ids: list[int]
    #: the summaries this one was condensed from, as nodes (lossless-claw's "parents")
    sources: list[TreeNode]
    source_message_token_count: int
    content_preview: str


@dataclass(frozen=True)
class SummaryTree(_Dict):
    conversation_id: int
    roots: list[TreeNode]
    summary_count: int
    #: summaries at each depth, as {depth: count}
    by_depth: dict[int, int]

    def walk(self) -> list[TreeNode]:
        """Every node once, each before its sources (the order an operator reads the tree)."""
        out: list[TreeNode] = []
        seen: set[str] = set()

        def visit(n: TreeNode) -> None:
            if n.id in seen:
                return
            seen.add(n.id)
            out.append(n)
            for s in n.sources:
                visit(s)

        for r in self.roots:
            visit(r)
        return out


#: characters of a summary's text a tree node shows
PREVIEW_CHARS = 160


def summary_tree(db: Handle, conversation_id: int) -> SummaryTree:
    """The conversation's summary DAG as a forest (roots newest-last, sources in their order)."""
    with db.reading() as c:
        require_conversation(c, conversation_id)
        rows = c.execute(
            "SELECT summary_id, kind, depth, token_count, model, status, earliest_at, latest_at, "
            "source_message_token_count, content FROM summaries WHERE conversation_id = ? ORDER BY earliest_at, pk",
            (conversation_id,),
        ).fetchall()
        edges = c.execute(
            "SELECT p.summary_id, p.parent_summary_id FROM summary_parents p JOIN summaries s "
            "ON s.summary_id = p.summary_id WHERE s.conversation_id = ? ORDER BY p.summary_id, p.ordinal",
            (conversation_id,),
        ).fetchall()
        leaf_msgs = c.execute(
            "SELECT sm.summary_id, sm.message_id FROM summary_messages sm JOIN summaries s "
            "ON s.summary_id = sm.summary_id WHERE s.conversation_id = ? ORDER BY sm.summary_id, sm.ordinal",
            (conversation_id,),
        ).fetchall()
        live = {str(r[0]) for r in c.execute(
            "SELECT summary_id FROM context_items WHERE conversation_id = ? AND summary_id IS NOT NULL",
            (conversation_id,))}  # fmt: skip
    sources: dict[str, list[str]] = {}
    used: set[str] = set()
    for sid, src in edges:
        sources.setdefault(str(sid), []).append(str(src))
        used.add(str(src))
    msgs: dict[str, list[int]] = {}
    for sid, mid in leaf_msgs:
        msgs.setdefault(str(sid), []).append(int(mid))
    info = {str(r[0]): r for r in rows}
    built: dict[str, TreeNode] = {}

    def node(sid: str, path: frozenset[str]) -> TreeNode:
        if sid in built:
            return built[sid]
        r = info[sid]
        # a source in another conversation (a transplant keeps its edges) or a cycle is not followed
        kids = [node(s, path | {sid}) for s in sources.get(sid, []) if s in info and s not in path]
        text = " ".join(str(r[9]).split())
        n = TreeNode(sid, r[1], int(r[2]), int(r[3]), r[4], r[5], r[6], r[7], sid in live, msgs.get(sid, []),
                     kids, int(r[8]), text[:PREVIEW_CHARS])  # fmt: skip
        built[sid] = n
        return n

    roots = [node(str(r[0]), frozenset()) for r in rows if str(r[0]) not in used]
    by_depth: dict[int, int] = {}
    for r in rows:
        by_depth[int(r[2])] = by_depth.get(int(r[2]), 0) + 1
    return SummaryTree(conversation_id, roots, len(rows), dict(sorted(by_depth.items())))


@dataclass(frozen=True)
class ContextView(_Dict):
    conversation_id: int
    token_budget: int
    #: tokens of what the model receives (the rendered items)
    total_tokens: int
    #: tokens of every context item as stored (what compaction's threshold compares)
    stored_tokens: int
    items: list[AssembledItem]
    summary_count: int
    tail_count: int
    dropped_count: int
    prefix_hash: str
    summary_tokens: int
    message_tokens: int
    #: the threshold compaction compares ``stored_tokens`` with (``contextThreshold`` x budget)
    threshold_tokens: int
    #: ``assemble`` would compact (or record compaction debt) before building the context
    would_compact: bool


def context_view(db: Handle, config: LcmConfig, conversation_id: int, token_budget: int, *,
                 prompt: str | None = None) -> ContextView:  # fmt: skip
    """What ``assemble`` would hand the model now, without compacting or recording debt.

    ``token_budget`` is capped by ``maxAssemblyTokenBudget`` as in ``assemble``. The session's
    ``contextThresholdOverrides`` rule (by its session key) picks the fresh tail, as there.
    """
    budget = positive_int(token_budget, "token_budget")
    if config.max_assembly_token_budget:
        budget = min(budget, config.max_assembly_token_budget)
    with db.reading() as c:
        conv = require_conversation(c, conversation_id)
        key = conv["session_key"]
        params = resolve_params(config, key if isinstance(key, str) else None)
        loaded = load_context(c, conversation_id)
        items, n_sum, n_tail, dropped, prefix = build_context(
            c, conversation_id, budget, fresh_tail_count=params.fresh_tail_count,
            fresh_tail_max_tokens=config.fresh_tail_max_tokens, tz=config.timezone, prompt=prompt,
            prompt_aware=config.prompt_aware_eviction, loaded=loaded)  # fmt: skip
    threshold = int(params.context_threshold * budget)
    return ContextView(
        conversation_id, budget, sum(i.token_count for i in items), loaded.tokens, items, n_sum, n_tail, dropped,
        prefix, sum(i.token_count for i in items if i.type == "summary"),
        sum(i.token_count for i in items if i.type == "message"), threshold,
        loaded.tokens >= params.context_threshold * budget)  # fmt: skip


@dataclass(frozen=True)
class LargeFileRow(_Dict):
    file_id: str
    conversation_id: int
    message_id: int | None
    file_name: str
    mime_type: str
    byte_size: int
    token_count: int
    exploration_summary: str
    created_at: str


def large_files(db: Handle, *, conversation_id: int | None = None, min_bytes: int = 0, limit: int = 100) -> list[LargeFileRow]:
    """Stored large files, biggest first, with their exploration summaries."""
    positive_int(limit, "limit", upper=MAX_PAGE)
    positive_int(min_bytes, "min_bytes", zero=True)
    with db.reading() as c:
        where, params = "WHERE size_bytes >= ?", [min_bytes]
        if conversation_id is not None:
            require_conversation(c, conversation_id)
            where += " AND conversation_id = ?"
            params.append(conversation_id)
        rows = c.execute(
            "SELECT file_id, conversation_id, message_id, name, mime_type, size_bytes, token_count, "
            f"exploration_summary, created_at FROM large_files {where} ORDER BY size_bytes DESC, file_id LIMIT ?",
            (*params, limit),
        ).fetchall()
    return [LargeFileRow(r[0], int(r[1]), r[2], r[3], r[4], int(r[5]), int(r[6]), r[7], r[8]) for r in rows]
