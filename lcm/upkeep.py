"""Upkeep: paying the work ingest and assembly deferred (compaction debt, trigram and embedding debt) and retention.

Two payers: :meth:`Upkeep.after_turn` pays one session's debt right after a turn (bounded like
one nightly payment), :meth:`Upkeep.maintenance` pays every active conversation's and applies
retention (the nightly job). A payment never fails its caller: a failure is kept on the debt
row and in the failure record, and comes back in the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from amem.kernel.clock import Clock
from lcm.compact_driver import CompactionDriver
from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.db import sqlite_only
from lcm.errors import LcmValidationError
from lcm.events import EventLog
from lcm.failures import FailureLog
from lcm.largefiles import LargeFileStore
from lcm.models import CompactionResult, EmbedReport, MaintenanceResult, RetentionResult
from lcm.ops import apply_retention
from lcm.semantic import NIGHTLY_EMBED_SECONDS, SemanticIndex
from lcm.timeutil import iso
from lcm.trigram import PAY_CHUNK, index_pending

__all__ = ["TrigramDebt", "Upkeep", "sqlite_trigram_debt"]

log = logging.getLogger(__name__)


class TrigramDebt(Protocol):
    """Indexes up to ``limit`` messages ingest left out of the trigram index (within
    ``deadline_s``); returns how many it indexed."""

    def __call__(self, *, limit: int | None, deadline_s: float | None) -> int: ...


def sqlite_trigram_debt(db: Handle) -> TrigramDebt:
    """SQLite's payer: ``lcm.trigram.index_pending`` (batched, resumable at its watermark)."""

    def pay(*, limit: int | None, deadline_s: float | None) -> int:
        return index_pending(sqlite_only(db, "index_trigrams"), limit=limit, deadline_s=deadline_s)

    return pay


class Upkeep:
    """Debt payment and retention for one store.

    ``size_of`` and ``reclaim`` are another engine's database size and space reclaim for
    retention (``lcm.ops.apply_retention``; None: SQLite's file size and vacuum).
    """

    def __init__(
        self, db: Handle, config: LcmConfig, clock: Clock, files: LargeFileStore, events: EventLog,
        failures: FailureLog, compaction: CompactionDriver, semantic: SemanticIndex, trigrams: TrigramDebt, *,
        size_of: Callable[[], int] | None = None, reclaim: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self.config = config
        self.clock = clock
        self.files = files
        self.events = events
        self.failures = failures
        self.compaction = compaction
        self.semantic = semantic
        self.trigrams = trigrams
        self.size_of = size_of
        self.reclaim = reclaim

    def _now(self) -> str:
        return iso(self.clock.now())

    def embed_pending(self, *, limit: int | None = None, deadline_s: float | None = None) -> EmbedReport:
        """:meth:`lcm.LcmStore.embed_pending`: embed what semantic recall cannot see yet, logged."""
        report = self.semantic.embed_pending(limit=limit, deadline_s=deadline_s)
        if report.embedded_messages or report.embedded_summaries:
            self.events.write("embed", **report.to_dict())
        return report

    def index_trigrams(self, *, limit: int | None = None, deadline_s: float | None = None) -> int:
        """:meth:`lcm.LcmStore.index_trigrams`: pay the trigram debt; the number of messages indexed."""
        return self.trigrams(limit=limit, deadline_s=deadline_s)

    def apply_retention(self, *, dry_run: bool = False) -> RetentionResult:
        """:meth:`lcm.LcmStore.apply_retention`: the retention rules, logged when they deleted."""
        res = apply_retention(
            self.db, self.files, max_age_days=self.config.retention_archived_max_age_days,
            max_bytes=self.config.retention_max_database_bytes, now=self.clock.now(), dry_run=dry_run,
            size_of=self.size_of, reclaim=self.reclaim,
        )  # fmt: skip
        if res.deleted_conversations:
            self.events.write("retention", **res.to_dict())
        return res

    def pay_debt(self, conv_id: int, session_key: str | None, budget: int) -> tuple[CompactionResult, str | None]:
        """One conversation's deferred compaction: a sweep (bounded by ``sweepDeadlineMs`` and
        ``maxSweepIterations``); the debt row is deleted when it ran, marked failed when not."""
        with self.db.atomic() as c:
            c.execute("UPDATE compaction_debt SET status = 'running', updated_at = ? WHERE conversation_id = ?",
                      (self._now(), conv_id))  # fmt: skip
        try:
            res = self.compaction.run(conv_id, session_key, budget, force=False)
            with self.db.atomic() as c:
                c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conv_id,))
            return res, None
        except Exception as exc:  # one conversation's failure must not stop the others
            log.warning("lcm: paying the compaction debt of conversation %s failed: %s", conv_id, exc)
            failure = f"{type(exc).__name__}: {exc}"
            with self.db.atomic() as c:
                c.execute("UPDATE compaction_debt SET status = 'failed', last_error = ?, updated_at = ? "
                          "WHERE conversation_id = ?", (failure, self._now(), conv_id))  # fmt: skip
            tokens = self.compaction.compactor.context_tokens(conv_id)
            return CompactionResult(conv_id, False, "debt-failed", tokens, tokens, warnings=[failure]), failure

    def pay_trigrams(self, *, limit: int | None) -> str | None:
        """A bounded payment of the trigram debt that never fails the caller; the failure, if any."""
        try:
            self.index_trigrams(limit=limit)
            return None
        except Exception as exc:  # grep still reads the pending tail; status shows the debt
            log.warning("lcm: paying the trigram index debt failed: %s", exc)
            failure = f"{type(exc).__name__}: {exc}"
            self.failures.record("trigram", failure)
            return failure

    def after_turn(self, session_key: str) -> CompactionResult | None:
        """:meth:`lcm.LcmStore.after_turn`: the trigram debt's chunk, then the session's compaction debt."""
        if not isinstance(session_key, str) or not session_key:
            raise LcmValidationError("after_turn needs a session_key", field="session_key")
        self.pay_trigrams(limit=PAY_CHUNK)
        row = self.db.one(
            "SELECT d.conversation_id, d.token_budget FROM compaction_debt d JOIN conversations c "
            "ON c.id = d.conversation_id AND c.active = 1 WHERE c.session_key = ?", (session_key,))  # fmt: skip
        if row is None:
            return None
        res, _ = self.pay_debt(int(row["conversation_id"]), session_key, int(row["token_budget"]))
        return res

    def maintenance(self) -> MaintenanceResult:
        """:meth:`lcm.LcmStore.maintenance`: every debt, retention, the trigram and embedding debt."""
        rows = self.db.query(
            "SELECT d.conversation_id, d.token_budget, c.session_key FROM compaction_debt d "
            "JOIN conversations c ON c.id = d.conversation_id AND c.active = 1 ORDER BY d.updated_at"
        )
        results: list[CompactionResult] = []
        failures: dict[str, str] = {}
        for r in rows:
            conv_id = int(r["conversation_id"])
            res, failure = self.pay_debt(conv_id, r["session_key"], int(r["token_budget"]))
            if failure is None:
                results.append(res)
            else:
                failures[str(conv_id)] = failure
        retention = self.apply_retention()
        trigram_failure = self.pay_trigrams(limit=None)
        if trigram_failure is not None:
            failures["trigram"] = trigram_failure
        embedding = None
        if self.semantic.embedder is not None:
            try:
                embedding = self.embed_pending(deadline_s=NIGHTLY_EMBED_SECONDS)
            except Exception as exc:  # the rest of the night's work is done; say what failed
                log.warning("lcm: embedding during maintenance failed: %s", exc)
                failures["embedding"] = f"{type(exc).__name__}: {exc}"
                self.failures.record("embedding", failures["embedding"])
        return MaintenanceResult(results, failures, retention, embedding)
