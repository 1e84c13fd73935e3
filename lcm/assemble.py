"""Assembly: the ordered context a model sees — summaries as tagged blocks, then the fresh tail.

The budget is filled newest-first (the protected tail before anything older), and the
result is printed in chronological order. Without prompt-aware eviction the kept prefix
depends only on stored state, so it stays byte-identical between turns until compaction
rewrites it — which is what provider prompt caches need.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from amem.kernel.clock import Clock
from amem.kernel.text import HAN
from lcm.compact_driver import CompactionDriver, Runtime, check_runtime
from lcm.compaction import Item, resolve_params, tail_start
from lcm.config import LcmConfig
from lcm.conn import Connection, Handle
from lcm.errors import LcmValidationError
from lcm.models import AssembledContext, AssembledItem
from lcm.scopes import Scopes
from lcm.sessions import check_session_key, find_active
from lcm.timeutil import display_time, iso
from lcm.tokens import estimate_tokens

__all__ = ["Assembler", "LoadedContext", "render_summary", "load_context", "build_context", "prompt_terms"]

_WORD = re.compile(rf"[\w./-]{{3,}}|[{HAN}]{{2,}}")


def render_summary(row: Mapping[str, Any], tz: str) -> str:
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


#: the context items with everything rendering needs, in one statement: on PostgreSQL every
#: statement is a round trip, and the two ``IN`` lists of 500 ids this replaced cost more than
#: the join (the rows are unpacked, never read by name or index: a PgRow read either way goes
#: through Python, 14 reads a row)
_CONTEXT_ROWS = (
    "SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id, coalesce(m.token_count, s.token_count, 0), "
    "m.role, s.depth, m.id, m.content, s.summary_id, s.kind, s.earliest_at, s.latest_at, s.content, "
    "m.name, m.source_role "
    "FROM context_items ci LEFT JOIN messages m ON m.id = ci.message_id "
    "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
    "WHERE ci.conversation_id = ? ORDER BY ci.ordinal"
)


@dataclass(frozen=True)
class LoadedContext:
    """A conversation's context items (as :func:`lcm.compaction.load_items` gives them) with
    the message and summary rows they point at, read by one statement."""

    items: list[Item]
    messages: dict[int, tuple[str, str, str | None, str | None]]  # id -> (role, content, name, source_role)
    summaries: dict[str, dict[str, Any]]  # summary id -> the columns render_summary reads

    @property
    def tokens(self) -> int:
        """What :meth:`lcm.compaction.Compactor.context_tokens` counts for these items."""
        return sum(it.tokens for it in self.items)


def load_context(c: Connection, conversation_id: int) -> LoadedContext:
    items: list[Item] = []
    messages: dict[int, tuple[str, str, str | None, str | None]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    for (ordinal, kind, mid, sid, tokens, role, depth, m_id, m_content, s_id, s_kind, earliest, latest, s_content,
         name, source_role) in c.execute(_CONTEXT_ROWS, (conversation_id,)):  # fmt: skip
        items.append(Item(ordinal, kind, mid, sid, tokens, role, depth))
        if m_id is not None:
            messages[m_id] = (role, m_content, name, source_role)
        if s_id is not None:
            summaries[s_id] = {"summary_id": s_id, "kind": s_kind, "depth": depth, "earliest_at": earliest,
                               "latest_at": latest, "content": s_content}  # fmt: skip
    return LoadedContext(items, messages, summaries)


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
    loaded: LoadedContext | None = None,
) -> tuple[list[AssembledItem], int, int, int, str]:
    """Returns ``(items, summary_count, tail_count, dropped_count, prefix_hash)``. ``loaded``:
    the conversation's items already read in this transaction by :func:`load_context`."""
    if loaded is None:
        loaded = load_context(c, conversation_id)
    items, messages, summaries = loaded.items, loaded.messages, loaded.summaries
    start = tail_start(items, fresh_tail_count, fresh_tail_max_tokens)

    def render(it: Item) -> AssembledItem:
        if it.type == "summary":
            text = render_summary(summaries[str(it.summary_id)], tz)
            return AssembledItem("summary", str(it.summary_id), "user", text, estimate_tokens(text))
        mid = int(it.message_id or 0)
        role, content, name, source_role = messages[mid]
        return AssembledItem("message", f"msg_{mid}", role, content, it.tokens, name, source_role)

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
                 context_window: int | None, provider: str | None = None, cache_read_tokens: int | None = None,
                 cache_write_tokens: int | None = None, read_only: bool = False) -> AssembledContext:  # fmt: skip
        check_session_key(session_key)
        budget = self.compaction.budget(token_budget)
        assert budget is not None
        runtime = check_runtime(model, context_window)
        telemetry = _telemetry(provider, cache_read_tokens, cache_write_tokens)
        build = functools.partial(
            build_context, budget=budget, fresh_tail_max_tokens=self.config.fresh_tail_max_tokens,
            tz=self.config.timezone, prompt=prompt, prompt_aware=self.config.prompt_aware_eviction,
        )  # fmt: skip
        # The usual turn (under the threshold) is one read transaction: the active conversation,
        # its items with their rows, the token count and the context from those same rows. It
        # used to be three transactions reading the items twice (a round trip each on
        # PostgreSQL, and the rows converted twice).
        with self.db.reading() as c:
            self.prepare_read(c)
            row = find_active(c, session_key, None)
            if row is None:  # said, not only empty: a mistyped key reads as a new session
                return AssembledContext(None, budget, 0, [], 0, 0, 0, "", warnings=[
                    f"no active conversation for session key {session_key[:200]!r}: nothing to assemble"])
            conv_id = int(row["id"])
            params = resolve_params(self.config, session_key, model=runtime[0], context_window=runtime[1])
            loaded = load_context(c, conv_id)
            tokens = loaded.tokens
            built = None
            if tokens < params.context_threshold * budget:
                built = build(c, conv_id, fresh_tail_count=params.fresh_tail_count, loaded=loaded)
        compacted = debt = False
        warnings: list[str] = []
        decision = "below-threshold"
        if built is None and read_only:
            # the caller may change nothing (a read-only key): the context as it stands
            warnings.append("read-only caller: at the threshold, not compacted and no debt recorded")
            decision = "read-only"
        elif built is None and self.scopes.session_mode(session_key) != "normal":
            # a stateless session reads its context but never compacts it nor records debt
            warnings.append("stateless session (statelessSessionPatterns): at the threshold, not compacted")
            decision = "stateless"
        elif built is None:
            compacted, debt = self._compact_or_defer(conv_id, session_key, budget, tokens, runtime, warnings,
                                                     telemetry)  # fmt: skip
            decision = "compacted" if compacted else "debt-recorded" if debt else "threshold-reached"
        # Every decision names the threshold rule that made it, "below threshold" included, so
        # an operator can tell why a conversation was (not) compacted on a given turn.
        self.compaction.events.write(
            "compaction_decision", conversation_id=conv_id, session_key=session_key, decision=decision,
            rule=params.rule or "contextThreshold", context_threshold=params.context_threshold,
            tokens=tokens, budget=budget, threshold_tokens=int(params.context_threshold * budget))  # fmt: skip
        if built is None:
            with self.db.reading() as c:
                self.prepare_read(c)
                built = build(c, conv_id, fresh_tail_count=params.fresh_tail_count)
        items, n_sum, n_tail, dropped, prefix = built
        if dropped:
            warnings.append(f"{dropped} older context items did not fit the budget")
        total = sum(it.token_count for it in items)
        over = total > budget
        if over:
            warnings.append(f"over budget: the newest message alone holds {items[-1].token_count} tokens, more "
                            f"than the budget of {budget}; it is kept whole (the turn needs it), so the context "
                            f"is {total} tokens")
        return AssembledContext(conv_id, budget, total, items, n_sum, n_tail, dropped, prefix, compacted, debt, warnings,
                                over)

    def prepare_read(self, c: Connection) -> None:
        """Run first in each of assembly's read transactions: an engine whose planner needs a
        setting for the context statement sets it here (lcm.pg's does). Nothing on SQLite."""

    def _compact_or_defer(self, conv_id: int, session_key: str, budget: int, tokens: int, runtime: Runtime,
                          warnings: list[str], telemetry: tuple[str | None, int | None, int | None] = (None, None, None),
                          ) -> tuple[bool, bool]:  # fmt: skip
        """The threshold is reached: compact now (over the budget, or in ``inline`` mode) or
        record the debt. Returns ``(compacted, debt)``; appends the runs' warnings."""
        context_tokens = self.compaction.compactor.context_tokens
        if tokens > budget or self.config.proactive_threshold_compaction_mode == "inline":
            res = self.compaction.run(conv_id, session_key, budget, force=False, until_under=None, runtime=runtime)
            compacted = res.ran
            warnings += res.warnings
            if tokens > budget and context_tokens(conv_id) > budget:
                res = self.compaction.run(conv_id, session_key, budget, force=True, until_under=budget,
                                          runtime=runtime)  # fmt: skip
                compacted = compacted or res.ran
                warnings += res.warnings
            return compacted, False
        now = iso(self.clock.now())
        with self.db.atomic() as c:
            # The host's provider, model and prompt-cache telemetry of this turn stay on the row
            # (the newest turn's, as the budget): what the debt was recorded under.
            c.execute(
                "INSERT INTO compaction_debt(conversation_id, reason, token_budget, status, created_at, updated_at, "
                "model, provider, cache_read_tokens, cache_write_tokens) "
                "VALUES (?, 'threshold', ?, 'pending', ?, ?, ?, ?, ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
                "token_budget = excluded.token_budget, status = 'pending', updated_at = excluded.updated_at, "
                "model = excluded.model, provider = excluded.provider, "
                "cache_read_tokens = excluded.cache_read_tokens, cache_write_tokens = excluded.cache_write_tokens",
                (conv_id, budget, now, now, runtime[0], *telemetry),
            )
        return False, True


def _telemetry(provider: str | None, cache_read: int | None, cache_write: int | None,
               ) -> tuple[str | None, int | None, int | None]:  # fmt: skip
    """The host's provider and prompt-cache token counts of this turn, checked."""
    if provider is not None and (not isinstance(provider, str) or not provider.strip() or len(provider) > 200):
        raise LcmValidationError("provider must be a non-empty string of at most 200 characters", field="provider")
    for name, value in (("cache_read_tokens", cache_read), ("cache_write_tokens", cache_write)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise LcmValidationError(f"{name} must be an integer >= 0", field=name)
    return provider, cache_read, cache_write
