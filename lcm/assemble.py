"""Assembly: the ordered context a model sees — summaries as tagged blocks, then the fresh tail.

The budget is filled newest-first (the protected tail before anything older), and the
result is printed in chronological order. Without prompt-aware eviction the kept prefix
depends only on stored state, so it stays byte-identical between turns until compaction
rewrites it — which is what provider prompt caches need.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from html import escape

from amem.kernel.clock import Clock
from amem.kernel.text import HAN
from lcm.compact_driver import CompactionDriver, check_runtime
from lcm.compaction import Item, load_items, resolve_params, tail_start
from lcm.config import LcmConfig
from lcm.conn import Connection, Handle
from lcm.models import AssembledContext, AssembledItem
from lcm.scopes import Scopes
from lcm.timeutil import display_time, iso
from lcm.tokens import estimate_tokens

__all__ = ["Assembler", "render_summary", "build_context", "prompt_terms"]

_WORD = re.compile(rf"[\w./-]{{3,}}|[{HAN}]{{2,}}")


def render_summary(row: sqlite3.Row, tz: str) -> str:
    attrs = (
        f'id="{row["summary_id"]}" kind="{row["kind"]}" depth="{row["depth"]}" '
        f'earliest="{escape(display_time(row["earliest_at"], tz))}" latest="{escape(display_time(row["latest_at"], tz))}"'
    )
    return f"<summary {attrs}>\n{row['content']}\n</summary>"


def prompt_terms(prompt: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(prompt)}


def _relevance(text: str, terms: set[str]) -> int:
    lowered = text.lower()
    return sum(1 for t in terms if t in lowered)


def build_context(
    c: Connection,
    conversation_id: int,
    budget: int,
    *,
    fresh_tail_count: int,
    fresh_tail_max_tokens: int | None,
    tz: str,
    prompt: str | None,
    prompt_aware: bool,
) -> tuple[list[AssembledItem], int, int, int, str]:
    """Returns ``(items, summary_count, tail_count, dropped_count, prefix_hash)``."""
    items = load_items(c, conversation_id)
    start = tail_start(items, fresh_tail_count, fresh_tail_max_tokens)
    msg_ids = [it.message_id for it in items if it.type == "message"]
    sum_ids = [it.summary_id for it in items if it.type == "summary"]
    messages: dict[int, sqlite3.Row] = {}
    for i in range(0, len(msg_ids), 500):
        msg_part = msg_ids[i : i + 500]
        q = ",".join("?" * len(msg_part))
        messages.update({r["id"]: r for r in c.execute(f"SELECT id, role, content FROM messages WHERE id IN ({q})", msg_part)})
    summaries: dict[str, sqlite3.Row] = {}
    for i in range(0, len(sum_ids), 500):
        sum_part = sum_ids[i : i + 500]
        q = ",".join("?" * len(sum_part))
        summaries.update({r["summary_id"]: r for r in c.execute(f"SELECT * FROM summaries WHERE summary_id IN ({q})", sum_part)})

    def render(it: Item) -> AssembledItem:
        if it.type == "summary":
            text = render_summary(summaries[str(it.summary_id)], tz)
            return AssembledItem("summary", str(it.summary_id), "user", text, estimate_tokens(text))
        row = messages[int(it.message_id or 0)]
        return AssembledItem("message", f"msg_{row['id']}", row["role"], row["content"], it.tokens)

    rendered = [render(it) for it in items]
    keep: set[int] = set()
    used = 0
    # The tail goes in first, newest first; the newest message is kept even over budget.
    for idx in range(len(items) - 1, start - 1, -1):
        cost = rendered[idx].token_count
        if keep and used + cost > budget:
            break
        keep.add(idx)
        used += cost
    tail_count = len(keep)
    older = list(range(start - 1, -1, -1))  # newest first
    if prompt_aware and prompt:
        terms = prompt_terms(prompt)
        fits_all = used + sum(rendered[i].token_count for i in older) <= budget
        if terms and not fits_all:
            older.sort(key=lambda i: (-_relevance(rendered[i].content, terms), -i))
    for idx in older:
        cost = rendered[idx].token_count
        if used + cost > budget:
            if not (prompt_aware and prompt):
                break  # chronological eviction: stop at the first item that does not fit
            continue
        keep.add(idx)
        used += cost
    chosen = [rendered[i] for i in sorted(keep)]
    summary_ids = [it.id for it in chosen if it.type == "summary"]
    prefix_hash = hashlib.sha256("\n".join(summary_ids).encode()).hexdigest()[:16]
    return chosen, len(summary_ids), tail_count, len(items) - len(keep), prefix_hash


class Assembler:
    """:meth:`lcm.LcmStore.assemble`: the threshold's compaction (now, or as debt), then the context."""

    def __init__(self, db: Handle, config: LcmConfig, clock: Clock, scopes: Scopes, compaction: CompactionDriver) -> None:
        self.db = db
        self.config = config
        self.clock = clock
        self.scopes = scopes
        self.compaction = compaction

    def assemble(self, session_key: str, token_budget: int, *, prompt: str | None, model: str | None,
                 context_window: int | None) -> AssembledContext:  # fmt: skip
        budget = self.compaction.budget(token_budget)
        assert budget is not None
        runtime = check_runtime(model, context_window)
        conv_id = self.scopes.active_id(session_key)
        if conv_id is None:
            return AssembledContext(None, budget, 0, [], 0, 0, 0, "")
        params = resolve_params(self.config, session_key, model=runtime[0], context_window=runtime[1])
        context_tokens = self.compaction.compactor.context_tokens
        tokens = context_tokens(conv_id)
        compacted = debt = False
        warnings: list[str] = []
        if tokens >= params.context_threshold * budget:
            if tokens > budget or self.config.proactive_threshold_compaction_mode == "inline":
                res = self.compaction.run(conv_id, session_key, budget, force=False, until_under=None, runtime=runtime)
                compacted = res.ran
                warnings += res.warnings
                if tokens > budget and context_tokens(conv_id) > budget:
                    res = self.compaction.run(conv_id, session_key, budget, force=True, until_under=budget,
                                              runtime=runtime)  # fmt: skip
                    compacted = compacted or res.ran
                    warnings += res.warnings
            else:
                now = iso(self.clock.now())
                with self.db.atomic() as c:
                    c.execute(
                        "INSERT INTO compaction_debt(conversation_id, reason, token_budget, status, created_at, updated_at) "
                        "VALUES (?, 'threshold', ?, 'pending', ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
                        "token_budget = excluded.token_budget, status = 'pending', updated_at = excluded.updated_at",
                        (conv_id, budget, now, now),
                    )
                debt = True
        with self.db.reading() as c:
            items, n_sum, n_tail, dropped, prefix = build_context(
                c, conv_id, budget, fresh_tail_count=params.fresh_tail_count,
                fresh_tail_max_tokens=self.config.fresh_tail_max_tokens, tz=self.config.timezone,
                prompt=prompt, prompt_aware=self.config.prompt_aware_eviction,
            )  # fmt: skip
        if dropped:
            warnings.append(f"{dropped} older context items did not fit the budget")
        total = sum(it.token_count for it in items)
        return AssembledContext(conv_id, budget, total, items, n_sum, n_tail, dropped, prefix, compacted, debt, warnings)
