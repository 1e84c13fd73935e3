"""Rewrite and repair summaries: re-summarize from their sources with the current prompts, planned first.

API (stable since the ``kit-repair`` tag). Build a :class:`RepairKit` from a store's parts
(``RepairKit.of(store)``), ask it for a plan, show the plan, and give the plan back to
:meth:`RepairKit.apply` to write exactly what was shown:

- ``plan_rewrite(summary_id)``: one summary.
- ``plan_rewrite_depth(conversation_id, depth)``: every summary at ``depth`` of a conversation.
- ``plan_rewrite_all(conversation_id)``: every summary, bottom-up (by depth, then time).
- ``plan_rewrite_subtree(summary_id)``: the summary and everything it was built from, bottom-up.
- ``plan_repair(conversation_id=None, summary_id=None)``: the summaries a configured LLM did not
  write (``status`` fallback, the fallback marker, or ``model`` extractive: written while no LLM
  was configured) and truncated ones, rewritten by the LLM. It needs an LLM
  (:class:`RepairUnavailableError` otherwise); a summary the LLM fails on again is skipped.

Planning calls the summarizer (the LLM when one is configured) and writes nothing. Bottom-up
plans summarize a condensed summary from the *planned* text of its sources, so its new text is
what the sources will say after ``apply``. A new text is skipped (``skipped`` with the reason)
when it is unchanged, when the LLM failed (``status`` fallback: a rewrite never degrades a
summary) or when no LLM is configured and the summary was written by one.

``apply(plan)`` writes the plan in one transaction: each summary only if its text is still the
one planned from (else :class:`lcm.errors.ConcurrentChangeError` and nothing is written), then
the ``descendant_token_count`` of every summary above a changed one. The search indexes follow
the text (their triggers); the summary's vector is dropped and re-embedded by the next
``embed_pending``.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lcm.compaction import Compactor, Item, previous_summary, summary_header
from lcm.config import LcmConfig
from lcm.conn import Connection, Handle
from lcm.errors import ConcurrentChangeError, LcmError, LcmNotFoundError, LcmValidationError
from lcm.extract import FALLBACK_MARKER
from lcm.models import _Dict
from lcm.operator.browse import positive_int, require_conversation
from lcm.operator.prompts import level_for, uses_previous
from lcm.summarize import Summarizer

if TYPE_CHECKING:
    from lcm.store import LcmStore

log = logging.getLogger(__name__)

__all__ = ["RepairKit", "RewritePlan", "SummaryRewrite", "Skipped", "RepairUnavailableError",
           "EXTRACTIVE_MODELS", "summary_diff"]  # fmt: skip

#: the kit's summarizer's spend window: no cap in practice (see :meth:`RepairKit.of`)
OPERATOR_CALLS_PER_WINDOW = 1_000_000
#: the ``model`` of summaries no LLM wrote (lcm.summarize)
EXTRACTIVE_MODELS = ("extractive", "extractive-fallback")
_COLS = ("summary_id, conversation_id, kind, depth, content, token_count, model, status, earliest_at, pk, "
         "descendant_token_count")  # fmt: skip


class RepairUnavailableError(LcmError):
    """Repair upgrades summaries with the LLM and this store has none configured."""

    code = "llm_unavailable"


@dataclass(frozen=True)
class SummaryRewrite(_Dict):
    summary_id: str
    conversation_id: int
    kind: str
    depth: int
    #: the prompt level used (leaf, d1, d2, d3+)
    level: str
    old_content: str
    new_content: str
    old_token_count: int
    new_token_count: int
    old_model: str
    new_model: str
    old_status: str
    new_status: str
    attempts: list[str]
    diff: str


@dataclass(frozen=True)
class Skipped(_Dict):
    summary_id: str
    reason: str


@dataclass(frozen=True)
class RewritePlan(_Dict):
    """What a rewrite or repair would write (``applied`` once :meth:`RepairKit.apply` wrote it)."""

    operation: str  # rewrite | depth | all | subtree | repair
    conversation_id: int | None
    rewrites: list[SummaryRewrite]
    skipped: list[Skipped] = field(default_factory=list)
    applied: bool = False

    @property
    def token_delta(self) -> int:
        """Summary tokens after minus before, over the summaries rewritten."""
        return sum(r.new_token_count - r.old_token_count for r in self.rewrites)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "token_delta": self.token_delta}


def summary_diff(old: str, new: str, name: str) -> str:
    """A unified diff of a summary's text, line by line."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"{name} (stored)", f"{name} (rewritten)"))  # fmt: skip


class RepairKit:
    """Plans and applies summary rewrites over one store's database, config and compactor.

    Args:
        db: the store's handle (either engine).
        config: the store's config (timezone of the header line).
        compactor: the store's compactor: its summarizer (LLM, prompts, guards), its source
            loading, its clock and event log.
    """

    def __init__(self, db: Handle, config: LcmConfig, compactor: Compactor) -> None:
        self.db = db
        self.config = config
        self.compactor = compactor
        self.summarizer = compactor.summarizer

    @classmethod
    def of(cls, store: LcmStore) -> RepairKit:
        """The kit over ``store``'s database, config, LLM and clock, with a summarizer of its own.

        Its own, so the per-window spend guard (``summaryMaxCallsPerWindow``, 24 calls in ten
        minutes by default) does not cut an operator's rewrite of 40 summaries in two: the guard
        bounds what compaction spends unasked, while a plan's calls are bounded by the plan itself
        (at most two per summary, listed before anything is written). The circuit breaker still
        applies: an LLM client with its own breaker (amem's) shares it with the store.
        """
        cfg = dataclasses.replace(store.config, summary_max_calls_per_window=OPERATOR_CALLS_PER_WINDOW)
        summarizer = Summarizer(cfg, store.llm, store.clock)
        return cls(store.db, store.config, Compactor(store.db, store.config, summarizer, store.clock, store.events))

    # -- choosing the summaries -------------------------------------------------------------
    def _rows(self, where: str, params: Sequence[Any]) -> list[Any]:
        # bottom-up: sources before what was built from them, then by time
        return self.db.query(f"SELECT {_COLS} FROM summaries WHERE {where} ORDER BY depth, earliest_at, pk", params)

    def _one(self, summary_id: str) -> Any:
        if not isinstance(summary_id, str) or not summary_id:
            raise LcmValidationError(f"summary_id must be a summary id (sum_...); got {summary_id!r}", field="summary_id")
        rows = self._rows("summary_id = ?", (summary_id,))
        if not rows:
            raise LcmNotFoundError(f"no summary {summary_id}", id=summary_id)
        return rows[0]

    def _conversation(self, conversation_id: int) -> None:
        with self.db.reading() as c:
            require_conversation(c, conversation_id)

    def plan_rewrite(self, summary_id: str) -> RewritePlan:
        row = self._one(summary_id)
        return self._plan("rewrite", int(row[1]), [row])

    def plan_rewrite_depth(self, conversation_id: int, depth: int) -> RewritePlan:
        self._conversation(conversation_id)
        positive_int(depth, "depth", zero=True)
        return self._plan("depth", conversation_id, self._rows("conversation_id = ? AND depth = ?", (conversation_id, depth)))

    def plan_rewrite_all(self, conversation_id: int) -> RewritePlan:
        self._conversation(conversation_id)
        return self._plan("all", conversation_id, self._rows("conversation_id = ?", (conversation_id,)))

    def plan_rewrite_subtree(self, summary_id: str) -> RewritePlan:
        root = self._one(summary_id)
        ids = {summary_id}
        frontier = [summary_id]
        with self.db.reading() as c:
            while frontier:
                q = ",".join("?" * len(frontier))
                found = [str(r[0]) for r in c.execute(
                    f"SELECT parent_summary_id FROM summary_parents WHERE summary_id IN ({q})", frontier)]  # fmt: skip
                frontier = [s for s in found if s not in ids]
                ids.update(frontier)
        q = ",".join("?" * len(ids))
        return self._plan("subtree", int(root[1]), self._rows(f"summary_id IN ({q})", sorted(ids)))

    def plan_repair(self, conversation_id: int | None = None, summary_id: str | None = None) -> RewritePlan:
        """The summaries no LLM wrote (or whose reply was cut), rewritten by the configured LLM.

        Raises:
            RepairUnavailableError: no LLM is configured (nothing to upgrade them with).
        """
        if self.summarizer.llm is None:
            raise RepairUnavailableError("repair rewrites summaries with the LLM and none is configured "
                                         "(set llm_base_url / an LLM for the store)")  # fmt: skip
        marks = ("(status IN ('fallback', 'truncated') OR model IN (?, ?) OR instr(content, ?) > 0)",
                 [*EXTRACTIVE_MODELS, FALLBACK_MARKER])  # fmt: skip
        if summary_id is not None:
            row = self._one(summary_id)
            rows = self._rows(f"summary_id = ? AND {marks[0]}", (summary_id, *marks[1]))
            plan = self._plan("repair", int(row[1]), rows, upgrade=True)
            if rows:
                return plan
            return dataclasses.replace(plan, skipped=[Skipped(summary_id, "nothing to repair: an LLM wrote it")])
        if conversation_id is not None:
            self._conversation(conversation_id)
            return self._plan("repair", conversation_id,
                              self._rows(f"conversation_id = ? AND {marks[0]}", (conversation_id, *marks[1])), upgrade=True)
        return self._plan("repair", None, self._rows(marks[0], marks[1]), upgrade=True)

    # -- planning ----------------------------------------------------------------------------
    def _sources(self, row: Any) -> tuple[list[Item], str | None]:
        """The summary's sources as compaction items (in their order), or why they cannot be read."""
        sid = str(row[0])
        with self.db.reading() as c:
            if row[2] == "leaf":
                rows = c.execute(
                    "SELECT m.id, m.token_count, m.role FROM summary_messages sm JOIN messages m ON m.id = sm.message_id "
                    "WHERE sm.summary_id = ? ORDER BY sm.ordinal", (sid,)).fetchall()  # fmt: skip
                want = c.execute("SELECT count(*) FROM summary_messages WHERE summary_id = ?", (sid,)).fetchone()[0]
                chunk = [Item(0, "message", int(r[0]), None, int(r[1]), r[2], None) for r in rows]
            else:
                rows = c.execute(
                    "SELECT s.summary_id, s.token_count, s.depth FROM summary_parents p JOIN summaries s "
                    "ON s.summary_id = p.parent_summary_id WHERE p.summary_id = ? ORDER BY p.ordinal", (sid,)).fetchall()  # fmt: skip
                want = c.execute("SELECT count(*) FROM summary_parents WHERE summary_id = ?", (sid,)).fetchone()[0]
                chunk = [Item(0, "summary", None, str(r[0]), int(r[1]), None, int(r[2])) for r in rows]
        if not chunk or len(chunk) != int(want):
            return chunk, f"its sources are missing ({len(chunk)} of {want} found): see doctor"
        return chunk, None

    def _plan(self, operation: str, conversation_id: int | None, rows: Sequence[Any], *, upgrade: bool = False) -> RewritePlan:
        planned: dict[str, str] = {}
        rewrites: list[SummaryRewrite] = []
        skipped: list[Skipped] = []
        for row in rows:
            sid, conv, kind, depth, old = str(row[0]), int(row[1]), str(row[2]), int(row[3]), str(row[4])
            chunk, broken = self._sources(row)
            if broken:
                skipped.append(Skipped(sid, broken))
                continue
            units, meta = self.compactor.units_for(chunk, conv)
            # a source rewritten earlier in this plan is summarized as it will read after apply
            units = [dataclasses.replace(u, text=planned[u.id]) if u.id in planned else u for u in units]
            header = summary_header(chunk, meta, self.config.timezone)
            # the summary before this one, as compaction hands it (as it will read after apply)
            previous = None
            if uses_previous(kind, depth):
                with self.db.reading() as c:
                    found = previous_summary(c, conv, kind, depth, str(row[8]), before_pk=int(row[9]))
                previous = (planned.get(found[0], found[1])) if found else None
            draft = self.summarizer.summarize(units, kind=kind, header=header, depth=depth, previous=previous)
            reason = self._refusal(row, draft.model, draft.status, draft.content, upgrade)
            if reason:
                skipped.append(Skipped(sid, f"{reason} (attempts: {', '.join(draft.attempts)})"))
                continue
            planned[sid] = draft.content
            rewrites.append(SummaryRewrite(
                sid, conv, kind, depth, level_for(kind, depth), old, draft.content, int(row[5]), draft.token_count,
                str(row[6]), draft.model, str(row[7]), draft.status, list(draft.attempts),
                summary_diff(old, draft.content, sid)))  # fmt: skip
        log.info("lcm: %s plan: %d rewrites, %d skipped", operation, len(rewrites), len(skipped))
        return RewritePlan(operation, conversation_id, rewrites, skipped)

    def _refusal(self, row: Any, model: str, status: str, content: str, upgrade: bool) -> str:
        """Why a new draft must not replace the stored summary ("" when it may)."""
        if status == "fallback":
            why = self.summarizer.last_error
            return "the LLM failed; the stored summary is kept" + (f": {why}" if why else "")
        if model in EXTRACTIVE_MODELS and (upgrade or str(row[6]) not in EXTRACTIVE_MODELS):
            return "no LLM wrote the new text" if upgrade else "no LLM is configured and an LLM wrote the stored summary"
        if content == str(row[4]):
            return "unchanged"
        return ""

    # -- writing -----------------------------------------------------------------------------
    def apply(self, plan: RewritePlan) -> RewritePlan:
        """Write ``plan`` in one transaction (see the module docstring); returns it marked applied.

        Raises:
            ConcurrentChangeError: a summary changed since it was planned; nothing is written.
            LcmValidationError: the plan was applied already.
        """
        if plan.applied:
            raise LcmValidationError("this plan was applied already; plan again", field="plan")
        with self.db.atomic() as c:
            for r in plan.rewrites:
                cur = c.execute(
                    "UPDATE summaries SET content = ?, token_count = ?, model = ?, status = ? "
                    "WHERE summary_id = ? AND content = ?",
                    (r.new_content, r.new_token_count, r.new_model, r.new_status, r.summary_id, r.old_content))
                if cur.rowcount != 1:
                    raise ConcurrentChangeError(f"summary {r.summary_id} changed (or went) since it was planned; plan again")
            refresh_descendant_tokens(c, [r.summary_id for r in plan.rewrites])
        self.compactor.events.write(plan.operation if plan.operation == "repair" else "rewrite",
                                    operation=plan.operation, conversation_id=plan.conversation_id,
                                    summaries=[r.summary_id for r in plan.rewrites],
                                    token_delta=plan.token_delta)  # fmt: skip
        return dataclasses.replace(plan, applied=True)


def refresh_descendant_tokens(c: Connection, changed: Sequence[str]) -> None:
    """Recount ``descendant_token_count`` of every summary built (at any remove) from ``changed``.

    A condensed summary's count is the sum over its sources of their own tokens and their
    descendants' (as compaction writes it), so the summaries above are recounted lowest depth
    first: each sum then reads sources that are already right.
    """
    ancestors: set[str] = set()
    frontier = list(dict.fromkeys(changed))
    while frontier:
        q = ",".join("?" * len(frontier))
        above = {str(r[0]) for r in c.execute(
            f"SELECT DISTINCT summary_id FROM summary_parents WHERE parent_summary_id IN ({q})", frontier)}  # fmt: skip
        frontier = sorted(above - ancestors)
        ancestors |= above
    if not ancestors:
        return
    q = ",".join("?" * len(ancestors))
    ordered = [str(r[0]) for r in c.execute(
        f"SELECT summary_id FROM summaries WHERE summary_id IN ({q}) ORDER BY depth, pk", sorted(ancestors))]  # fmt: skip
    for sid in ordered:
        c.execute(
            "UPDATE summaries SET descendant_token_count = (SELECT coalesce(sum(s.token_count + "
            "s.descendant_token_count), 0) FROM summary_parents p JOIN summaries s ON s.summary_id = "
            "p.parent_summary_id WHERE p.summary_id = ?) WHERE summary_id = ?", (sid, sid))  # fmt: skip
