"""Compaction: leaf passes over old raw messages, then condensation of same-depth summaries.

Summaries are made outside any transaction (an LLM call may take a minute); each one is
then written in one atomic step together with its DAG edges and the context-item swap,
after checking that the items it replaces are still there. A crash at any point leaves
either the old items or the new summary, never a half.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field

from amem.kernel.clock import Clock
from lcm.config import LcmConfig, ThresholdOverride
from lcm.conn import Connection, Handle
from lcm.errors import ConcurrentChangeError
from lcm.events import EventLog
from lcm.extract import SourceUnit
from lcm.failures import record_failure
from lcm.operator.prompts import uses_previous
from lcm.sessions import glob_match
from lcm.summarize import Summarizer, SummaryDraft
from lcm.timeutil import display_time, iso

log = logging.getLogger(__name__)

__all__ = ["Item", "Params", "Compactor", "load_items", "tail_start", "resolve_params", "summary_header",
           "previous_summary"]


@dataclass(frozen=True)
class Item:
    ordinal: int
    type: str  # message | summary
    message_id: int | None
    summary_id: str | None
    tokens: int
    role: str | None
    depth: int | None

    @property
    def key(self) -> tuple[str, object]:
        return (self.type, self.message_id if self.type == "message" else self.summary_id)


@dataclass(frozen=True)
class Params:
    """Per-conversation values after ``contextThresholdOverrides``."""

    context_threshold: float
    fresh_tail_count: int
    leaf_chunk_tokens: int
    rule: str = ""


def resolve_params(
    cfg: LcmConfig, session_key: str | None, *, model: str | None = None, context_window: int | None = None
) -> Params:
    """The ``contextThresholdOverrides`` rule for this session, model and context window.

    As the reference: every matcher of a rule must match (AND), a rule's specificity is model
    100 + sessionPattern 50 + each window bound 20, the most specific rule wins and the earliest
    breaks a tie. ``model`` and ``context_window`` are what the host says (``assemble`` /
    ``compact``); a rule asking for one the host did not give does not match (the token budget
    is never taken for the window).
    """
    best: tuple[int, int, ThresholdOverride] | None = None
    for i, rule in enumerate(cfg.context_threshold_overrides):
        score = _rule_score(rule, session_key, model, context_window)
        if score is not None and (best is None or score > best[0]):
            best = (score, i, rule)
    if best is None:
        return Params(cfg.context_threshold, cfg.fresh_tail_count, cfg.leaf_chunk_tokens)
    _, i, rule = best
    return Params(
        rule.context_threshold,
        rule.fresh_tail_count or cfg.fresh_tail_count,
        rule.leaf_chunk_tokens or cfg.leaf_chunk_tokens,
        rule.name or f"rule{i}",
    )


def _rule_score(rule: ThresholdOverride, session_key: str | None, model: str | None,
                context_window: int | None) -> int | None:
    """The rule's specificity when all its matchers match, else None (pure)."""
    score = 0
    if rule.model is not None:
        if model is None or model.strip().lower() != rule.model.strip().lower():
            return None
        score += 100
    if rule.session_pattern is not None:
        if session_key is None or not glob_match(rule.session_pattern, session_key):
            return None
        score += 50
    low, high = rule.model_context_window_min, rule.model_context_window_max
    for bound, ok in ((low, context_window is not None and low is not None and context_window >= low),
                      (high, context_window is not None and high is not None and context_window <= high)):
        if bound is not None:
            if not ok:
                return None
            score += 20
    return score if score > 0 else None


def load_items(c: Connection, conversation_id: int) -> list[Item]:
    rows = c.execute(
        "SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id, "
        "coalesce(m.token_count, s.token_count, 0), m.role, s.depth "
        "FROM context_items ci LEFT JOIN messages m ON m.id = ci.message_id "
        "LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
        "WHERE ci.conversation_id = ? ORDER BY ci.ordinal",
        (conversation_id,),
    ).fetchall()
    # unpacked, not indexed: a PostgreSQL row read by index goes through Python, 7 reads a row
    return [Item(*r) for r in rows]


def tail_start(items: list[Item], count: int, max_tokens: int | None) -> int:
    """Index of the first item of the protected fresh tail (pure)."""
    msg_idx = [i for i, it in enumerate(items) if it.type == "message"]
    if not msg_idx:
        return len(items)
    protected = msg_idx[-count:] if count > 0 else []
    if max_tokens is not None and protected:
        kept: list[int] = []
        used = 0
        for i in reversed(protected):
            if kept and used + items[i].tokens > max_tokens:
                break  # the newest message is always kept, even over the cap
            kept.append(i)
            used += items[i].tokens
        protected = kept
    start = min(protected) if protected else len(items)
    users = [i for i in msg_idx if items[i].role == "user"]
    if users and users[-1] < start:
        start = users[-1]  # never split the newest user turn
    return start


def previous_summary(c: Connection, conversation_id: int, kind: str, depth: int, earliest: str,
                     before_pk: int | None = None) -> tuple[str, str] | None:
    """The summary before a new one (the reference's ``previous_context``), as (id, text): the
    newest summary of the conversation of the same kind and depth that ends no later than the new
    one begins (with ``before_pk``, a rewrite's own row and later ones are left out), or None."""
    later = " AND pk < ?" if before_pk is not None else ""
    row = c.execute(
        "SELECT summary_id, content FROM summaries WHERE conversation_id = ? AND kind = ? AND depth = ? AND latest_at <= ?"
        f"{later} ORDER BY latest_at DESC, pk DESC LIMIT 1",
        (conversation_id, kind, depth, earliest, *(() if before_pk is None else (before_pk,)))).fetchone()  # fmt: skip
    return None if row is None else (str(row[0]), str(row[1]))


@dataclass
class _Run:
    leaf: list[str] = field(default_factory=list)
    condensed: list[str] = field(default_factory=list)
    fallback: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    iterations: int = 0
    sweep_iterations: int = 0
    target_cap: int | None = None
    stopped: str = ""
    warnings: list[str] = field(default_factory=list)


def summary_header(chunk: list[Item], meta: dict[str, object], tz: str) -> str:
    """The first line of a summary of ``chunk`` (what it covers and when); the repair kit's
    rewrite writes the same line (lcm.operator.repair)."""
    span = f"{display_time(str(meta['earliest']), tz)} – {display_time(str(meta['latest']), tz)}"
    if chunk[0].type == "message":
        return f"Summary of {len(chunk)} messages ({span})."
    return f"Summary of {len(chunk)} summaries at depth {chunk[0].depth} ({span})."


class Compactor:
    def __init__(self, db: Handle, cfg: LcmConfig, summarizer: Summarizer, clock: Clock, events: EventLog) -> None:
        self.db = db
        self.cfg = cfg
        self.summarizer = summarizer
        self.clock = clock
        self.events = events

    # -- planning (pure over the item list) ------------------------------------------------
    def _leaf_chunk(self, items: list[Item], params: Params) -> list[Item] | None:
        end = tail_start(items, params.fresh_tail_count, self.cfg.fresh_tail_max_tokens)
        i = 0
        while i < end:
            if items[i].type != "message":
                i += 1
                continue
            chunk: list[Item] = []
            used = 0
            j = i
            while j < end and items[j].type == "message":
                if chunk and used + items[j].tokens > params.leaf_chunk_tokens:
                    break
                chunk.append(items[j])
                used += items[j].tokens
                j += 1
            if len(chunk) >= self.cfg.leaf_min_fanout or used >= params.leaf_chunk_tokens:
                return chunk
            if j < end and items[j].type == "message":
                # Cut by the token cap: the next message does not fit, so this chunk can never
                # grow. Skipping the run here stalled it for good when one message (a large-file
                # reference) is bigger than a whole chunk; now the chunk goes, and the big
                # message, first in the next chunk, is compacted alone.
                return chunk
            while j < end and items[j].type == "message":
                j += 1
            i = j
        return None

    def _condense_group(self, items: list[Item], params: Params, *, pressure: bool) -> list[Item] | None:
        end = tail_start(items, params.fresh_tail_count, self.cfg.fresh_tail_max_tokens)
        fanout = self.cfg.condensed_min_fanout_hard if pressure else self.cfg.condensed_min_fanout
        runs: list[list[Item]] = []
        for it in items[:end]:
            if it.type == "summary" and runs and runs[-1][-1].type == "summary" and runs[-1][-1].depth == it.depth:
                runs[-1].append(it)
            else:
                runs.append([it])
        best: list[Item] | None = None
        for run in runs:
            if run[0].type != "summary" or len(run) < fanout:
                continue
            depth = run[0].depth or 0
            if not pressure and self.cfg.sweep_max_depth != -1 and depth >= self.cfg.sweep_max_depth:
                continue
            group: list[Item] = []
            used = 0
            for it in run:
                if len(group) >= fanout and used + it.tokens > params.leaf_chunk_tokens:
                    break
                group.append(it)
                used += it.tokens
            if best is None or (group[0].depth or 0) < (best[0].depth or 0):
                best = group
        return best

    # -- building and writing one summary ------------------------------------------------
    def units_for(self, chunk: list[Item], conversation_id: int) -> tuple[list[SourceUnit], dict[str, object]]:
        tz = self.cfg.timezone
        with self.db.reading() as c:
            if chunk[0].type == "message":
                msg_ids = [it.message_id for it in chunk]
                q = ",".join("?" * len(msg_ids))
                rows = {r["id"]: r for r in c.execute(f"SELECT * FROM messages WHERE id IN ({q})", msg_ids)}
                ordered = [rows[i] for i in msg_ids]
                # a named speaker opens its text ("alice: ..."), so a summary of a chat of
                # several people still says who said what
                units = [SourceUnit(str(r["id"]), r["role"], display_time(r["created_at"], tz),
                                    f"{r['name']}: {r['content']}" if r["name"] else r["content"]) for r in ordered]
                tokens = sum(r["token_count"] for r in ordered)
                meta = {
                    "earliest": min(r["created_at"] for r in ordered),
                    "latest": max(r["created_at"] for r in ordered),
                    "descendant_count": len(ordered),
                    "descendant_tokens": tokens,
                    "source_tokens": tokens,
                }
            else:
                sum_ids = [it.summary_id for it in chunk]
                q = ",".join("?" * len(sum_ids))
                rows = {r["summary_id"]: r for r in c.execute(f"SELECT * FROM summaries WHERE summary_id IN ({q})", sum_ids)}
                ordered = [rows[i] for i in sum_ids]
                units = [SourceUnit(r["summary_id"], f"d{r['depth']}", display_time(r["earliest_at"], tz), r["content"]) for r in ordered]
                meta = {
                    "earliest": min(r["earliest_at"] for r in ordered),
                    "latest": max(r["latest_at"] for r in ordered),
                    "descendant_count": sum(r["descendant_count"] + 1 for r in ordered),
                    "descendant_tokens": sum(r["token_count"] + r["descendant_token_count"] for r in ordered),
                    "source_tokens": sum(r["source_message_token_count"] for r in ordered),
                    "depth": max(r["depth"] for r in ordered) + 1,
                }
        return units, meta

    def _write(self, conversation_id: int, chunk: list[Item], draft: SummaryDraft, meta: dict[str, object]) -> str:
        sid = "sum_" + secrets.token_hex(8)
        leaf = chunk[0].type == "message"
        now = iso(self.clock.now())
        with self.db.atomic() as c:
            # Optimistic check: the items we summarized must still be exactly where they were.
            for it in chunk:
                row = c.execute(
                    "SELECT item_type, message_id, summary_id FROM context_items WHERE conversation_id = ? AND ordinal = ?",
                    (conversation_id, it.ordinal),
                ).fetchone()
                if row is None or (row[0], row[1] if row[0] == "message" else row[2]) != it.key:
                    raise ConcurrentChangeError(f"context item {it.ordinal} of conversation {conversation_id} changed")
            c.execute(
                "INSERT INTO summaries(summary_id, conversation_id, kind, depth, content, token_count, earliest_at, "
                "latest_at, descendant_count, descendant_token_count, source_message_token_count, model, status, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, conversation_id, "leaf" if leaf else "condensed", 0 if leaf else meta["depth"], draft.content,
                 draft.token_count, meta["earliest"], meta["latest"], meta["descendant_count"],
                 meta["descendant_tokens"], meta["source_tokens"], draft.model, draft.status, now),
            )  # fmt: skip
            if leaf:
                c.executemany(
                    "INSERT INTO summary_messages(summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                    [(sid, it.message_id, n) for n, it in enumerate(chunk)],
                )
            else:
                c.executemany(
                    "INSERT INTO summary_parents(summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                    [(sid, it.summary_id, n) for n, it in enumerate(chunk)],
                )
            q = ",".join("?" * len(chunk))
            c.execute(
                f"DELETE FROM context_items WHERE conversation_id = ? AND ordinal IN ({q})",
                (conversation_id, *[it.ordinal for it in chunk]),
            )
            c.execute(
                "INSERT INTO context_items(conversation_id, ordinal, item_type, summary_id) VALUES (?, ?, 'summary', ?)",
                (conversation_id, chunk[0].ordinal, sid),
            )
        return sid

    def _step(self, conversation_id: int, chunk: list[Item], run: _Run) -> None:
        units, meta = self.units_for(chunk, conversation_id)
        header = summary_header(chunk, meta, self.cfg.timezone)
        kind = "leaf" if chunk[0].type == "message" else "condensed"
        depth = 0 if kind == "leaf" else int(str(meta["depth"]))
        previous = None
        if uses_previous(kind, depth):
            with self.db.reading() as c:
                found = previous_summary(c, conversation_id, kind, depth, str(meta["earliest"]))
            previous = found[1] if found else None
        draft = self.summarizer.summarize(units, kind=kind, header=header, target_cap=run.target_cap,
                                          depth=depth, session=conversation_id, previous=previous)
        sid = self._write(conversation_id, chunk, draft, meta)
        (run.leaf if chunk[0].type == "message" else run.condensed).append(sid)
        if draft.status == "fallback":
            run.fallback.append(sid)
            self._record_fallback(conversation_id, sid, draft)
        elif draft.status == "truncated":
            run.truncated.append(sid)
        run.iterations += 1
        self.events.write(
            "summary", conversation_id=conversation_id, summary_id=sid, kind="leaf" if chunk[0].type == "message" else "condensed",
            sources=len(chunk), tokens=draft.token_count, model=draft.model, status=draft.status,
            attempts=list(draft.attempts),
        )  # fmt: skip

    def summarize_chunk(self, conversation_id: int, chunk: list[Item]) -> tuple[str, str]:
        """Summarize ``chunk`` (contiguous messages, or summaries of any depths) into one summary
        that takes its place in the context, in its own transaction: the operator's steps no
        sweep makes (backfill's single root). Returns (the summary id, its status).

        Raises:
            ConcurrentChangeError: the items are no longer where they were.
        """
        if not chunk or len({it.type for it in chunk}) != 1:
            raise ValueError("a chunk is a non-empty list of messages or of summaries, not both")
        run = _Run()
        self._step(conversation_id, chunk, run)
        sid = (run.leaf or run.condensed)[-1]
        return sid, "fallback" if run.fallback else ("truncated" if run.truncated else "ok")

    def _record_fallback(self, conversation_id: int, sid: str, draft: SummaryDraft) -> None:
        """A configured LLM did not make this summary: keep why, for ``status`` after a restart."""
        why = ", ".join(draft.attempts)
        if any(a.endswith(":error") for a in draft.attempts) and self.summarizer.last_error:
            why += f"; {self.summarizer.last_error}"
        reason = f"summary {sid} fell back to extractive ({why})"
        record_failure(self.db, iso(self.clock.now()), "summary", reason, conversation_id)
        self.events.write("failure", kind="summary", reason=reason, conversation_id=conversation_id)

    # -- sweeps ----------------------------------------------------------------------------
    def sweep(self, conversation_id: int, params: Params, prefix_target: int, deadline: float, run: _Run) -> None:
        """One full sweep: leaf passes, routine condensation, then pressure condensation."""
        for phase in ("leaf", "routine", "pressure"):
            while True:
                if run.sweep_iterations >= self.cfg.max_sweep_iterations:
                    run.stopped = "max-iterations"
                    return
                if time.monotonic() >= deadline:
                    run.stopped = "deadline"
                    return
                with self.db.reading() as c:
                    items = load_items(c, conversation_id)
                if phase == "leaf":
                    chunk = self._leaf_chunk(items, params)
                elif phase == "routine":
                    chunk = self._condense_group(items, params, pressure=False)
                else:
                    end = tail_start(items, params.fresh_tail_count, self.cfg.fresh_tail_max_tokens)
                    prefix = sum(it.tokens for it in items[:end])
                    chunk = self._condense_group(items, params, pressure=True) if prefix > prefix_target else None
                if chunk is None:
                    break
                try:
                    self._step(conversation_id, chunk, run)
                except ConcurrentChangeError as exc:
                    run.warnings.append(str(exc))
                    run.stopped = "concurrent-change"
                    return
                run.sweep_iterations += 1

    def run(
        self,
        conversation_id: int,
        params: Params,
        prefix_target: int,
        *,
        until_under: int | None = None,
        target_cap: int | None = None,
    ) -> _Run:
        """A sweep, or (``until_under``) repeated sweeps until the context fits, under deadlines."""
        run = _Run(target_cap=target_cap)
        start = time.monotonic()
        if until_under is None:
            run.sweep_iterations = 0
            self.sweep(conversation_id, params, prefix_target, start + self.cfg.sweep_deadline_ms / 1000, run)
            return run
        op_deadline = start + self.cfg.compact_until_under_deadline_ms / 1000
        for _round in range(64):
            if self.context_tokens(conversation_id) <= until_under:
                run.stopped = ""
                break
            if time.monotonic() >= op_deadline:
                run.stopped = "deadline"
                break
            before = run.iterations
            run.sweep_iterations = 0
            sweep_deadline = min(op_deadline, time.monotonic() + self.cfg.sweep_deadline_ms / 1000)
            # Later rounds push condensation as hard as the floor allows.
            self.sweep(conversation_id, params, 0 if _round else prefix_target, sweep_deadline, run)
            if run.iterations == before:
                run.stopped = "no-progress"
                break
            if run.stopped in ("deadline", "concurrent-change") and time.monotonic() >= op_deadline:
                break
        if run.stopped:
            log.warning("lcm: compactUntilUnder stopped at %s (conversation %s)", run.stopped, conversation_id)
        return run

    def context_tokens(self, conversation_id: int) -> int:
        with self.db.reading() as c:
            return sum(it.tokens for it in load_items(c, conversation_id))
