"""The inspector's conversation pages: the list, one conversation's messages (paged), its
summary DAG as a tree, the context view and its large files.

Read-only SQL over the store's handle, one page at a time (``LIMIT``/``OFFSET`` on indexed
columns). Tenancy is the tools' rule (``tools.tenancy.session_owner``): an agent's key sees the
conversations of its own session keys, an owner key every conversation; a conversation of
another agent answers "not found", exactly like one that does not exist.

The context view shows the conversation's context items as stored, in order, with their
token totals: what assembly starts from for the next model call (``LcmStore.assemble`` may
then drop the oldest items to fit a budget, or compact first). Assembling here would compact
or record debt, which a page must never do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lcm.errors import LcmNotFoundError

from ..tenancy import PREFIX, agent_segment, session_owner
from .html import Html, esc, join, link, table, url

if TYPE_CHECKING:
    from lcm import LcmStore

PAGE_SIZE = 50
MAX_DAG = 500


def _scope_sql(agent: str | None) -> tuple[str, list[Any]]:
    """The SQL condition of the conversations ``agent`` may see (``None``: the owner, all)."""
    if agent is None:
        return "1 = 1", []
    prefix = f"{PREFIX}{agent_segment(agent)}:"
    # substr, not LIKE: an escaped agent holds '%', a LIKE wildcard
    return "substr(c.session_key, 1, ?) = ?", [len(prefix), prefix]


def conversations_page(store: LcmStore, agent: str | None, page: int
                       ) -> tuple[list[dict[str, Any]], int]:
    where, params = _scope_sql(agent)
    total = int(store.db.query(f"SELECT count(*) FROM conversations c WHERE {where}", params)[0][0])
    rows = store.db.query(
        "SELECT c.id, c.session_key, c.active, c.title, c.created_at, c.updated_at, "
        "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id), "
        "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.id), "
        "(SELECT max(m.created_at) FROM messages m WHERE m.conversation_id = c.id) "
        f"FROM conversations c WHERE {where} ORDER BY c.updated_at DESC, c.id DESC LIMIT ? OFFSET ?",
        [*params, PAGE_SIZE, page * PAGE_SIZE])
    out = [{"id": r[0], "session_key": r[1], "active": bool(r[2]), "title": r[3],
            "created_at": r[4], "updated_at": r[5], "messages": r[6], "summaries": r[7],
            "last_message_at": r[8]} for r in rows
           if agent is None or session_owner(r[1] or "") == agent]
    return out, total


def conversation(store: LcmStore, agent: str | None, conversation_id: int) -> dict[str, Any]:
    """One conversation ``agent`` may see (``LcmNotFoundError`` otherwise, the same either way)."""
    rows = store.db.query("SELECT id, session_key, session_id, active, title, created_at, updated_at, "
                          "archived_at, archive_cause FROM conversations WHERE id = ?", [conversation_id])
    if not rows or (agent is not None and session_owner(rows[0][1] or "") != agent):
        raise LcmNotFoundError(f"no conversation {conversation_id}")
    r = rows[0]
    return {"id": r[0], "session_key": r[1], "session_id": r[2], "active": bool(r[3]),
            "title": r[4], "created_at": r[5], "updated_at": r[6], "archived_at": r[7],
            "archive_cause": r[8]}


def messages_page(store: LcmStore, conversation_id: int, page: int) -> tuple[list[Any], int]:
    total = int(store.db.query("SELECT count(*) FROM messages WHERE conversation_id = ?",
                               [conversation_id])[0][0])
    rows = store.db.query("SELECT id, seq, role, content, token_count, created_at, file_id "
                          "FROM messages WHERE conversation_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                          [conversation_id, PAGE_SIZE, page * PAGE_SIZE])
    return list(rows), total


def summary_dag(store: LcmStore, conversation_id: int) -> tuple[list[Any], dict[str, list[str]]]:
    """The summaries (deepest first, at most ``MAX_DAG``) and each one's sources."""
    rows = store.db.query("SELECT summary_id, kind, depth, token_count, substr(content, 1, 240), "
                          "earliest_at, latest_at, descendant_count FROM summaries "
                          "WHERE conversation_id = ? ORDER BY depth DESC, earliest_at LIMIT ?",
                          [conversation_id, MAX_DAG])
    edges = store.db.query("SELECT p.summary_id, p.parent_summary_id FROM summary_parents p "
                           "JOIN summaries s ON s.summary_id = p.summary_id "
                           "WHERE s.conversation_id = ? ORDER BY p.summary_id, p.ordinal",
                           [conversation_id])
    sources: dict[str, list[str]] = {}
    for summary_id, source in edges:
        sources.setdefault(summary_id, []).append(source)
    return list(rows), sources


def context_items(store: LcmStore, conversation_id: int) -> list[Any]:
    return list(store.db.query(
        "SELECT ci.ordinal, ci.item_type, coalesce(CAST(ci.message_id AS TEXT), ci.summary_id), "
        "coalesce(m.token_count, s.token_count, 0), substr(coalesce(m.content, s.content, ''), 1, 240), "
        "m.role FROM context_items ci LEFT JOIN messages m ON m.id = ci.message_id "
        "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
        "WHERE ci.conversation_id = ? ORDER BY ci.ordinal", [conversation_id]))


def large_files(store: LcmStore, conversation_id: int) -> list[Any]:
    return list(store.db.query(
        "SELECT file_id, name, mime_type, size_bytes, token_count, "
        "substr(exploration_summary, 1, 240), created_at FROM large_files "
        "WHERE conversation_id = ? ORDER BY created_at LIMIT 200", [conversation_id]))


# ------------------------------------------------------------------------------ rendering


def _page_number(raw: str | None) -> int:
    if raw is None or raw == "":
        return 0
    if not raw.isdigit() or int(raw) > 10_000_000:
        raise ValueError(f"page must be a whole number, got {raw[:40]!r}")
    return int(raw)


def render_list(store: LcmStore, agent: str | None, view_agent: str, raw_page: str | None) -> Html:
    page = _page_number(raw_page)
    rows, total = conversations_page(store, agent, page)
    cells = [(link(url(f"conversation/{r['id']}", agent=view_agent), r["id"]), r["session_key"] or "",
              r["title"] or "", "active" if r["active"] else "archived", r["messages"],
              r["summaries"], (r["last_message_at"] or r["updated_at"] or "")[:19]) for r in rows]
    nav = []
    if page:
        nav.append(link(url("conversations", agent=view_agent, page=str(page - 1)), "Previous page", rel="prev"))
    if (page + 1) * PAGE_SIZE < total:
        nav.append(link(url("conversations", agent=view_agent, page=str(page + 1)), "Next page", rel="next"))
    whose = "every agent's" if agent is None else f"agent {agent}'s"
    return join([Html(f'<p id="count" data-total="{total}">{total} conversations ({esc(whose)})</p>'),
                 table(["id", "session key", "title", "state", "messages", "summaries", "last activity"],
                       cells, caption="Conversations, most recent first", empty="no conversations"),
                 Html(f'<nav class="pager" aria-label="Pages of conversations">{" ".join(nav)}</nav>')])


def _dag_tree(rows: list[Any], sources: dict[str, list[str]]) -> Html:
    info = {r[0]: r for r in rows}
    used = {s for srcs in sources.values() for s in srcs}
    roots = [r[0] for r in rows if r[0] not in used]

    def node(sid: str, depth: int) -> str:
        r = info.get(sid)
        if r is None:
            return f"<li>{esc(sid)} (not loaded)</li>"
        label = (f"<span class=\"sid\">{esc(sid)}</span> {esc(r[1])} depth {r[2]}, {r[3]} tokens, "
                 f"{esc((r[5] or '')[:16])} to {esc((r[6] or '')[:16])}: {esc(r[4])}")
        kids = sources.get(sid, [])
        if not kids or depth > 12:
            return f"<li>{label}</li>"
        inner = "".join(node(k, depth + 1) for k in kids)
        return f"<li><details open><summary>{label}</summary><ul>{inner}</ul></details></li>"

    if not rows:
        return Html("<p>No summaries yet: the conversation has not been compacted.</p>")
    return Html(f'<ul class="dag" id="dag" role="tree" aria-label="Summary DAG">'
                f'{"".join(node(r, 0) for r in roots)}</ul>')


def render_conversation(store: LcmStore, agent: str | None, view_agent: str, conversation_id: int,
                        raw_page: str | None) -> Html:
    conv = conversation(store, agent, conversation_id)
    page = _page_number(raw_page)
    messages, total = messages_page(store, conversation_id, page)
    msg_rows = [(r[1], r[2], r[3][:600], r[4], (r[5] or "")[:19], r[6] or "") for r in messages]
    nav = []
    base = f"conversation/{conversation_id}"
    if page:
        nav.append(link(url(base, agent=view_agent, page=str(page - 1)), "Previous messages", rel="prev"))
    if (page + 1) * PAGE_SIZE < total:
        nav.append(link(url(base, agent=view_agent, page=str(page + 1)), "Next messages", rel="next"))
    dag_rows, sources = summary_dag(store, conversation_id)
    items = context_items(store, conversation_id)
    tokens = sum(int(r[3]) for r in items)
    ctx_rows = [(r[0], r[1] if r[1] == "summary" else f"message ({r[5]})", r[2], r[3], r[4]) for r in items]
    files = large_files(store, conversation_id)
    file_rows = [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in files]
    return join([
        table(["field", "value"], list(conv.items()), caption="This conversation"),
        Html(f'<h2 id="messages">Messages</h2><p id="message-count" data-total="{total}">'
             f"{total} messages; page {page + 1}</p>"),
        table(["seq", "role", "content", "tokens", "at", "file"], msg_rows,
              caption="Messages, in order", empty="no messages"),
        Html(f'<nav class="pager" aria-label="Pages of messages">{" ".join(nav)}</nav>'),
        Html('<h2 id="dag-title">Summary DAG</h2><p>Each summary lists the summaries or '
             "messages it was made from.</p>"), _dag_tree(dag_rows, sources),
        Html(f'<h2 id="context">Context view</h2><p id="context-tokens" data-tokens="{tokens}">'
             f"{len(items)} items, {tokens} tokens: what assembly starts from for the next "
             "model call (it may drop the oldest to fit the budget, or compact first).</p>"),
        table(["ordinal", "item", "id", "tokens", "text"], ctx_rows, caption="Context items, in order",
              empty="an empty context"),
        Html('<h2 id="files">Large files</h2>'),
        table(["file id", "name", "type", "bytes", "tokens", "exploration summary"], file_rows,
              caption="Large files of this conversation", empty="no large files"),
    ])


__all__ = ["context_items", "conversation", "conversations_page", "large_files", "messages_page",
           "render_conversation", "render_list", "summary_dag"]
