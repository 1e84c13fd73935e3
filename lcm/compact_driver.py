"""CompactionDriver: when and how hard to compact a conversation, around :class:`lcm.compaction.Compactor`.

The compactor knows how to summarize; this part decides whether a call compacts at all (the
threshold of the budget, ``force``, a target to get under), caps the budget, records a failed or
stopped run, clears the conversation's compaction debt once a run did work, and logs the result.
An engine whose processes share a conversation passes ``lock`` (PostgreSQL's advisory lock).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from lcm.compaction import Compactor, Params, resolve_params
from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.errors import LcmValidationError
from lcm.events import EventLog
from lcm.failures import FailureLog
from lcm.models import CompactionResult
from lcm.scopes import Scopes

__all__ = ["CompactionDriver", "ConversationLock", "Runtime", "check_runtime"]

#: the host's model and context window (``contextThresholdOverrides`` match on them)
Runtime = tuple[str | None, int | None]
#: held around one compaction of a conversation (by id); SQLite's single writer needs none
ConversationLock = Callable[[int], AbstractContextManager[None]]


def _no_lock(conv_id: int) -> AbstractContextManager[None]:
    return nullcontext()


def check_runtime(model: str | None, context_window: int | None) -> Runtime:
    """The host's model and context window, checked (``contextThresholdOverrides`` match them)."""
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise LcmValidationError("model must be a non-empty string", field="model")
    if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int)
                                       or context_window <= 0):
        raise LcmValidationError("context_window must be a positive integer", field="context_window")
    return model, context_window


class CompactionDriver:
    """Runs the compactor on a conversation when a call asks for it or its threshold is reached."""

    def __init__(
        self, db: Handle, config: LcmConfig, compactor: Compactor, scopes: Scopes, events: EventLog,
        failures: FailureLog, *, lock: ConversationLock | None = None,
    ) -> None:
        self.db = db
        self.config = config
        self.compactor = compactor
        self.scopes = scopes
        self.events = events
        self.failures = failures
        self.lock: ConversationLock = lock or _no_lock

    def budget(self, token_budget: int | None) -> int | None:
        """The budget a call may use: the one asked for, capped by ``maxAssemblyTokenBudget``."""
        if token_budget is not None and (isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget <= 0):
            raise LcmValidationError("token_budget must be a positive integer", field="token_budget")
        cap = self.config.max_assembly_token_budget
        if token_budget is None:
            return cap
        return min(token_budget, cap) if cap else token_budget

    def run(
        self, conv_id: int, session_key: str | None, budget: int | None, *, force: bool, until_under: int | None = None,
        runtime: Runtime = (None, None),
    ) -> CompactionResult:
        """One compaction of ``conv_id`` (or a no-op result saying why not), under :attr:`lock`."""
        # One compaction of a conversation at a time where processes share it: each summary
        # step is checked and written in its own transaction, but two runs would summarize the
        # same items and race to replace them.
        with self.lock(conv_id):
            return self._run(conv_id, session_key, budget, force=force, until_under=until_under, runtime=runtime)

    def _run(
        self, conv_id: int, session_key: str | None, budget: int | None, *, force: bool, until_under: int | None,
        runtime: Runtime,
    ) -> CompactionResult:
        params: Params = resolve_params(self.config, session_key, model=runtime[0], context_window=runtime[1])
        before = self.compactor.context_tokens(conv_id)
        if not force and until_under is None:
            if budget is None:
                return CompactionResult(conv_id, False, "no-token-budget", before, before)
            if before < params.context_threshold * budget:
                return CompactionResult(conv_id, False, "below-threshold", before, before)
        reason = "forced" if force else ("until-under" if until_under is not None else "threshold")
        target = self.config.prefix_target_tokens(budget)
        # A summary larger than a quarter of the budget could never share the context with a tail.
        cap = max(64, budget // 4) if budget else None
        try:
            run = self.compactor.run(conv_id, params, target, until_under=until_under, target_cap=cap)
        except Exception as exc:
            self.failures.record("compaction", f"{type(exc).__name__}: {exc}", conv_id)
            raise
        after = self.compactor.context_tokens(conv_id)
        if until_under is not None and after > until_under and run.stopped:
            self.failures.record("compaction", f"compactUntilUnder stopped at {run.stopped} with {after} tokens "
                                 f"over the target of {until_under}", conv_id)
        if run.iterations:
            with self.db.atomic() as c:
                c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conv_id,))
        result = CompactionResult(
            conv_id, run.iterations > 0, reason, before, after, run.leaf, run.condensed, run.fallback, run.truncated,
            run.iterations, run.stopped, run.warnings,
        )  # fmt: skip
        self.events.write("compact", **{k: v for k, v in result.to_dict().items() if k != "warnings"})
        return result

    def compact(self, session_key: str, *, token_budget: int | None, force: bool, model: str | None,
                context_window: int | None) -> CompactionResult:
        """:meth:`lcm.LcmStore.compact`: a sweep of the active conversation at its threshold (or forced)."""
        runtime = check_runtime(model, context_window)
        conv_id = self.scopes.active_id(session_key)
        if conv_id is None:
            return CompactionResult(None, False, "no-conversation", 0, 0)
        if self.scopes.session_mode(session_key) != "normal":  # a session that reads, never writes
            return CompactionResult(conv_id, False, "stateless", 0, 0)
        return self.run(conv_id, session_key, self.budget(token_budget), force=force, runtime=runtime)

    def compact_until_under(self, session_key: str, target_tokens: int) -> CompactionResult:
        """:meth:`lcm.LcmStore.compact_until_under`: sweep until at most ``target_tokens``."""
        if isinstance(target_tokens, bool) or not isinstance(target_tokens, int) or target_tokens <= 0:
            raise LcmValidationError("target_tokens must be a positive integer", field="target_tokens")
        conv_id = self.scopes.active_id(session_key)
        if conv_id is None:
            return CompactionResult(None, False, "no-conversation", 0, 0)
        return self.run(conv_id, session_key, target_tokens, force=True, until_under=target_tokens)
