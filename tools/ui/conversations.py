"""The inspector's conversation pages: the list, one conversation's messages (paged), its
summary DAG as a tree, the context view and its large files.

Read-only SQL over the store's handle, one page at a time (``LIMIT``/``OFFSET`` on indexed
columns). A conversation's messages page by the boundary message's id (``?after=ID``,
``?before=ID``, ``lcm.operator.browse.messages``): ``amem restore --merge`` renumbers a
conversation to put a backup's messages in time order, and a page number or a sequence number
saved before it then named another place; an id does not (``?page=N`` still reads by offset). Tenancy is the tools' rule (``tools.tenancy.session_owner``): an agent's key sees the
conversations of its own session keys, an owner key every conversation; a conversation of
another agent answers "not found", exactly like one that does not exist.

The DAG, the context view (what ``assemble`` would hand the model under a budget, without
compacting or recording debt) and the large files come from the operator's browse views
(``lcm.operator.browse``); rewrite, dissolve and repair are its planned changes
(``lcm.operator.repair``, ``lcm.operator.dissolve``), offered as buttons whose dry run comes
first (``tools.ui.app``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lcm.errors import LcmNotFoundError

from ..numbers import whole_number
from ..tenancy import PREFIX, agent_segment, session_owner
from .html import Html, cut, esc, join, link, table, url

if TYPE_CHECKING:
    from lcm import LcmStore
    from lcm.operator.browse import SummaryTree, TreeNode

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


#: the budget the context view assembles for when the page names none
DEFAULT_BUDGET = 32000
#: characters of a message shown in the table, and of a context item (the rest one link away)
MESSAGE_CUT = 600
CONTEXT_CUT = 240


def render_item(store: LcmStore, agent: str | None, view_agent: str, conversation_id: int,
                kind: str, item_id: str) -> Html:
    """One message (by its id) or summary of a conversation ``agent`` may see, whole."""
    conversation(store, agent, conversation_id)
    if kind == "message":
        message_id = whole_number(item_id, "message id", maximum=MAX_ID)
        rows = store.db.query("SELECT seq, role, content, token_count, created_at FROM messages "
                              "WHERE conversation_id = ? AND id = ?", [conversation_id, message_id])
        fields = ("seq", "role", "content", "tokens", "at")
    else:
        rows = store.db.query("SELECT kind, depth, content, token_count, latest_at FROM summaries "
                              "WHERE conversation_id = ? AND summary_id = ?", [conversation_id, item_id])
        fields = ("kind", "depth", "content", "tokens", "latest at")
    if not rows:
        raise LcmNotFoundError(f"no {kind} {item_id[:80]!r} in conversation {conversation_id}")
    row = dict(zip(fields, rows[0]))
    text = str(row.pop("content") or "")
    back = link(url(f"conversation/{conversation_id}", agent=view_agent), "Back to the conversation")
    return join([table(["field", "value"], [*row.items(), ("characters", len(text))],
                       caption=f"This {kind}"),
                 Html(f'<h2>The whole {esc(kind)}</h2><pre id="whole">{esc(text)}</pre>'), back])


# ------------------------------------------------------------------------------ rendering


#: the largest id SQLite (and PostgreSQL's BIGINT) stores
MAX_ID = 2**63 - 1
MAX_PAGE = 10_000_000
MAX_BUDGET = 10_000_000


def _page_number(raw: str | None) -> int:
    return whole_number(raw, "page", maximum=MAX_PAGE, default=0)


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


def _actions(node: TreeNode, conversation_id: int, agent: str, can_write: bool) -> str:
    """Rewrite (and dissolve, for a condensed summary in the context): dry run first."""
    ops = [("rewrite", "Rewrite")]
    if node.kind == "condensed" and node.in_context:
        ops.append(("dissolve", "Dissolve"))
    out = []
    for op, label in ops:
        out.append(action_box("lcm", f"{label} {node.id} (dry run first)", can_write,
                              op=op, summary_id=node.id, conversation_id=str(conversation_id),
                              agent=agent))
    return "".join(out)


def _dag_tree(tree: SummaryTree, conversation_id: int, agent: str, can_write: bool) -> Html:
    if not tree.roots:
        return Html("<p>No summaries yet: the conversation has not been compacted.</p>")
    shown: set[str] = set()

    def node(n: TreeNode, depth: int) -> str:
        label = (f'<span class="sid">{esc(n.id)}</span> {esc(n.kind)} depth {n.depth}, '
                 f"{n.token_count} tokens, {esc(n.model)}"
                 f'{" (" + esc(n.status) + ")" if n.status != "ok" else ""}'
                 f'{", in context" if n.in_context else ""}, {esc(n.earliest_at[:16])} to '
                 f"{esc(n.latest_at[:16])}: {esc(n.content_preview)}")
        if n.id in shown:  # a DAG: a source shared by two summaries is drawn once
            return f"<li>{label} (shown above)</li>"
        shown.add(n.id)
        acts = _actions(n, conversation_id, agent, can_write)
        if not n.sources or depth > 12:
            return f"<li>{label}{acts}</li>"
        inner = "".join(node(k, depth + 1) for k in n.sources)
        return f"<li><details open><summary>{label}</summary>{acts}<ul>{inner}</ul></details></li>"

    return Html(f'<p>{tree.summary_count} summaries; by depth: '
                f'{esc(", ".join(f"{d}: {n}" for d, n in tree.by_depth.items()))}</p>'
                f'<ul class="dag" id="dag" aria-label="Summary DAG">'
                f'{"".join(node(r, 0) for r in tree.roots)}</ul>')


def _window(store: LcmStore, conversation_id: int, raw_page: str | None, raw_after: str | None,
            raw_before: str | None) -> tuple[list[Any], int, int | None, int | None]:
    """The messages shown (``id, seq, role, content, tokens, at, file``), how many there are,
    and the ids the previous and next windows start from (None: nothing that way)."""
    from lcm.operator.browse import messages

    after = None if raw_after is None else whole_number(raw_after, "after", minimum=1, maximum=MAX_ID)
    before = None if raw_before is None else whole_number(raw_before, "before", minimum=1, maximum=MAX_ID)
    if raw_page is not None and after is None and before is None:  # a link from before ids
        page = _page_number(raw_page)
        rows, total = messages_page(store, conversation_id, page)
        return (rows, total, rows[0][0] if rows and page else None,
                rows[-1][0] if rows and (page + 1) * PAGE_SIZE < total else None)
    # an id gone (retention) or another conversation's: LcmNotFoundError naming it, a 404
    window = messages(store.db, conversation_id, after_id=after, before_id=before, limit=PAGE_SIZE)
    rows = [(m.id, m.seq, m.role, m.content, m.token_count, m.created_at, m.file_id) for m in window.messages]
    return rows, window.total, window.prev_before_id, window.next_after_id


def render_conversation(store: LcmStore, agent: str | None, view_agent: str, conversation_id: int,
                        raw_page: str | None, raw_budget: str | None = None,
                        can_write: bool = False, raw_after: str | None = None,
                        raw_before: str | None = None) -> Html:
    from lcm.operator.browse import context_view, large_files, summary_tree

    conv = conversation(store, agent, conversation_id)
    budget = whole_number(raw_budget, "budget", minimum=1, maximum=MAX_BUDGET, default=DEFAULT_BUDGET)
    messages, total, earlier, later = _window(store, conversation_id, raw_page, raw_after, raw_before)
    base = f"conversation/{conversation_id}"
    msg_rows = [(r[1], r[2], cut(r[3], MESSAGE_CUT, url(f"{base}/message/{r[0]}", agent=view_agent)),
                 r[4], (r[5] or "")[:19], r[6] or "") for r in messages]
    nav = []
    if earlier is not None:
        nav.append(link(url(base, agent=view_agent, before=str(earlier)), "Previous messages", rel="prev"))
    if later is not None:
        nav.append(link(url(base, agent=view_agent, after=str(later)), "Next messages", rel="next"))
    shown = f"positions {messages[0][1]} to {messages[-1][1]}" if messages else "none shown"
    tree = summary_tree(store.db, conversation_id)
    view = context_view(store.db, store.config, conversation_id, budget)
    ctx_rows = [(n, it.type if it.type == "summary" else f"message ({it.role})",
                 it.id, it.token_count, cut(it.content, CONTEXT_CUT, url(
                     f"{base}/{'summary' if it.type == 'summary' else 'message'}/{it.id}",
                     agent=view_agent))) for n, it in enumerate(view.items, 1)]
    files = large_files(store.db, conversation_id=conversation_id)
    file_rows = [(f.file_id, f.file_name, f.mime_type, f.byte_size, f.token_count,
                  f.exploration_summary[:240]) for f in files]
    compact_note = (" Assembly would compact first (the stored context is over the threshold)."
                    if view.would_compact else "")
    return join([
        table(["field", "value"], list(conv.items()), caption="This conversation"),
        Html(f'<h2 id="messages">Messages</h2><p id="message-count" data-total="{total}">'
             f"{total} messages; {shown}</p>"),
        table(["seq", "role", "content", "tokens", "at", "file"], msg_rows,
              caption="Messages, in order", empty="no messages"),
        Html(f'<nav class="pager" aria-label="Pages of messages">{" ".join(nav)}</nav>'),
        Html('<h2 id="dag-title">Summary DAG</h2><p>Each summary lists the summaries it was '
             "condensed from. Rewrite, dissolve and repair show their dry run (the diff and the "
             "token change) before anything is written.</p>"),
        Html(action_box("lcm", "Repair this conversation's fallback summaries (dry run first)",
                        can_write, op="repair", conversation_id=str(conversation_id),
                        agent=view_agent, refused=None if store.llm is not None else
                        "Repair rewrites summaries with an LLM, and this server has none "
                        "configured (set llm_base_url); rewrite and dissolve work without one.")),
        _dag_tree(tree, conversation_id, view_agent, can_write),
        Html(f'<h2 id="context">Context view</h2><p id="context-tokens" data-tokens="{view.total_tokens}" '
             f'data-stored="{view.stored_tokens}">What the model receives next under a budget of '
             f"{view.token_budget} tokens: {len(view.items)} items, {view.total_tokens} tokens "
             f"({view.summary_tokens} in {view.summary_count} summaries, {view.message_tokens} in "
             f"messages; {view.dropped_count} dropped to fit; stored context {view.stored_tokens}, "
             f"threshold {view.threshold_tokens}).{compact_note}</p>"),
        Html(f'<form method="get" action="{url(base)}" aria-label="Context budget">'
             f'<input type="hidden" name="agent" value="{esc(view_agent)}">'
             f'<div class="field"><label for="f-budget">Token budget</label><input id="f-budget" '
             f'name="budget" type="number" min="1" value="{view.token_budget}"></div>'
             '<button type="submit">Show</button></form>'),
        table(["#", "item", "id", "tokens", "text"], ctx_rows, caption="Context items, in order",
              empty="an empty context"),
        Html('<h2 id="files">Large files</h2>'),
        table(["file id", "name", "type", "bytes", "tokens", "exploration summary"], file_rows,
              caption="Large files of this conversation", empty="no large files"),
    ])


def action_box(action: str, label: str, can_write: bool, refused: str | None = None,
               **data: str) -> str:
    """A change behind a dry run: the button asks for the plan, the plan offers Confirm.
    Disabled, with the reason under it, for a read-only key or when ``refused`` says why the
    server cannot do it."""
    attrs = "".join(f' data-{k.replace("_", "-")}="{esc(v)}"' for k, v in data.items())
    if not can_write:
        refused = "Your key is read-only: changes need a key with write rights."
    disabled = "" if refused is None else ' disabled aria-disabled="true"'
    why = "" if refused is None else f'<p class="hint">{esc(refused)}</p>'
    return (f'<div class="action" data-action="{esc(action)}"{attrs}><button type="button" '
            f'class="dry-run"{disabled}>{esc(label)}</button>{why}'
            '<div class="preview" role="status" aria-live="polite"></div></div>')


__all__ = ["MAX_ID", "action_box", "conversation", "conversations_page", "messages_page",
           "render_conversation", "render_item", "render_list"]
