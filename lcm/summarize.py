"""Summaries: the LLM (normal prompt, then aggressive) with a deterministic extractive fallback.

Every result says how it was made (``model``) and whether it is degraded (``status`` is
``fallback`` when the LLM was configured but not used successfully, ``truncated`` when an
oversized reply was cut). Degraded content also carries a text marker so doctor can find
it even in copies.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from amem.kernel.breaker import CircuitBreaker
from amem.kernel.clock import Clock
from amem.kernel.llm import TextLLM
from lcm.config import LcmConfig
from lcm.extract import (
    FALLBACK_MARKER,
    FOOTER_PREFIX,
    SourceUnit,
    extractive_summary,
    salient_terms,
    truncate_to_tokens,
)
from lcm.operator.prompts import PromptSet, load_prompts, previous_context_block, uses_previous
from lcm.tokens import estimate_tokens

log = logging.getLogger(__name__)

__all__ = ["Summarizer", "SummaryDraft", "strip_injected_tags"]

_REFUSAL = re.compile(r"^\s*(i'?m sorry|i cannot|i can'?t|as an ai|sorry, i)", re.IGNORECASE)


def strip_injected_tags(text: str, tags: Sequence[str]) -> str:
    """Drop ``<tag ...>...</tag>`` blocks injected by memory plugins (summarizer input only).

    Linear on any text: a lazy ``<tag>.*?</tag>`` rescans to the end from every unclosed
    opening tag. Here each opening tag looks for its closing tag once, and once one has none,
    no later one can (the same blocks ``re.sub`` with ``.*?`` would drop).
    """
    for tag in tags:
        t = re.escape(tag)
        opening = re.compile(rf"<{t}(?:\s[^<>]*)?>", re.IGNORECASE)
        closing = re.compile(rf"</{t}\s*>", re.IGNORECASE)
        kept: list[str] = []
        pos = 0
        while (start := opening.search(text, pos)) is not None:
            end = closing.search(text, start.end())
            if end is None:
                break
            kept.append(text[pos : start.start()])
            pos = end.end()
        text = "".join(kept) + text[pos:]
        text = re.sub(rf"<{t}(?:\s[^<>]*)?/>", "", text, flags=re.IGNORECASE)
    return text


@dataclass(frozen=True)
class SummaryDraft:
    content: str
    token_count: int
    model: str
    status: str  # ok | fallback | truncated
    attempts: tuple[str, ...]  # what was tried, e.g. ("normal:error", "aggressive:garbage", "fallback")


_AGGRESSIVE = (
    "Summarize the conversation below as briefly as possible: only facts, decisions, names, "
    "numbers, dates, paths, commands and errors, one per line. Never refuse, never add commentary. "
    f"Finish with a line starting '{FOOTER_PREFIX}'."
)


class Summarizer:
    """Makes leaf and condensed summaries; holds the circuit breaker and the spend guard."""

    def __init__(self, cfg: LcmConfig, llm: TextLLM | None, clock: Clock) -> None:
        self.cfg = cfg
        #: the system prompt of each level (leaf, d1, d2, d3+): ``summaryPromptsDir`` or built-in
        self.prompts = load_prompts(cfg.summary_prompts_dir) if cfg.summary_prompts_dir else PromptSet.default()
        self.llm = llm
        self.clock = clock
        # Counted on the store's clock (not monotonic time) so a test's ManualClock moves the
        # cooldown. Used only when the LLM has no breaker of its own (see ``_shared_breaker``).
        self._breaker = CircuitBreaker(cfg.circuit_breaker_threshold, cfg.circuit_breaker_cooldown_ms / 1000,
                                       clock=self._now, name="the summary LLM")
        # The spend guard (summaryMaxCallsPerWindow) counts per session: one busy conversation
        # backs off alone instead of starving every other session's summaries.
        self._calls: dict[object, deque[float]] = {}
        self._spend_until: dict[object, float] = {}
        #: the newest LLM error (``type: message``), for the failure record of a fallback summary
        self.last_error = ""

    # -- the LLM guards ---------------------------------------------------------------
    def _now(self) -> float:
        return self.clock.now().timestamp()

    @property
    def _shared_breaker(self) -> CircuitBreaker | None:
        """The breaker of an LLM client that has one (``amem.llm.LLMClient``), else None.

        A client with its own breaker is shared with the note store: one count of failures
        for one endpoint. This class then only reads it, instead of keeping a second count.
        """
        breaker = getattr(self.llm, "breaker", None)
        return breaker if isinstance(breaker, CircuitBreaker) else None

    def llm_available(self, session: object = None) -> tuple[bool, str]:
        """Whether a summary call may go out now for ``session`` (a conversation id; None for
        calls of no session): the LLM exists, its circuit is closed, and this session is under
        ``summaryMaxCallsPerWindow`` calls in ``summaryCallWindowMs`` (else it backs off)."""
        if self.llm is None:
            return False, "no-llm"
        now = self._now()
        breaker = self._shared_breaker or self._breaker
        if breaker.state == "open":
            return False, "circuit-open"
        if now < self._spend_until.get(session, 0.0):
            return False, "spend-backoff"
        self._spend_until.pop(session, None)
        window = self.cfg.summary_call_window_ms / 1000
        for key in list(self._calls):  # forget sessions whose calls all left the window
            calls = self._calls[key]
            while calls and calls[0] < now - window:
                calls.popleft()
            if not calls:
                del self._calls[key]
        calls = self._calls.get(session, deque())
        if len(calls) >= self.cfg.summary_max_calls_per_window:
            self._spend_until[session] = now + self.cfg.summary_spend_backoff_ms / 1000
            log.warning("lcm: summary spend guard opened for conversation %s (%d calls in window)", session,
                        len(calls))  # fmt: skip
            return False, "spend-backoff"
        return True, ""

    def _call(self, system: str, user: str, max_tokens: int, session: object = None) -> str | None:
        assert self.llm is not None
        self._calls.setdefault(session, deque()).append(self._now())
        started = time.monotonic()
        try:
            reply = self.llm.complete(system, user, max_tokens=max_tokens)
        except Exception as exc:  # any failure of the seam is a failed attempt
            log.warning("lcm: summary LLM call failed: %s: %s", type(exc).__name__, exc)
            self.last_error = f"{type(exc).__name__}: {exc}"
            if self._shared_breaker is None:  # else the client's own breaker counted it
                self._breaker.record_failure()
            return None
        self._breaker.record_success()
        if time.monotonic() - started > self.cfg.summary_timeout_ms / 1000:
            # amem's runtime passes summaryTimeoutMs to the client as the call's deadline; an
            # LLM given directly to LcmStore may not honour one, so it is at least reported.
            log.warning("lcm: summary call exceeded summaryTimeoutMs; result kept")
        return reply if isinstance(reply, str) else None

    @staticmethod
    def _usable(reply: str | None, source_tokens: int) -> bool:
        if reply is None or not reply.strip() or not re.search(r"\w", reply):
            return False
        if _REFUSAL.match(reply):
            return False
        # A "summary" longer than what it summarizes is not a summary (tiny sources excepted).
        return not (source_tokens > 200 and estimate_tokens(reply) >= source_tokens)

    # -- public -------------------------------------------------------------------------
    def summarize(
        self, units: list[SourceUnit], *, kind: str, header: str, target_cap: int | None = None,
        depth: int = 0, session: object = None, previous: str | None = None,
    ) -> SummaryDraft:
        """Summarize ``units`` (messages for a leaf, child summaries for a condensed node).

        ``depth`` is the depth of the summary being written: it picks the prompt level
        (``lcm.operator.prompts.level_for``). ``session`` (the conversation id) is what the
        spend guard counts the calls against. ``previous`` is the preceding summary of the same
        level (``previous_context``); it goes to the leaf and d1 prompts only, capped at the
        level's configured target (``leafTargetTokens`` / ``condensedTargetTokens``), and never into an extractive summary (no model reads it there).
        """
        tags = self.cfg.strip_injected_context_tags
        clean = [SourceUnit(u.id, u.role, u.created_at, strip_injected_tags(u.text, tags)) for u in units]
        target = self.cfg.leaf_target_tokens if kind == "leaf" else self.cfg.condensed_target_tokens
        source_tokens = sum(estimate_tokens(u.text) for u in clean)
        target = min(target, max(64, source_tokens // 2)) if source_tokens > 128 else target
        if target_cap is not None:
            target = min(target, target_cap)
        available, why = self.llm_available(session)
        attempts: list[str] = []
        if available:
            transcript = "\n\n".join(f"[{u.role} {u.created_at}] {u.text}" for u in clean)
            extra = f"\n\nAdditional instructions: {self.cfg.custom_instructions}" if self.cfg.custom_instructions else ""
            before = ""
            if previous and uses_previous(kind, depth):
                cap = self.cfg.leaf_target_tokens if kind == "leaf" else self.cfg.condensed_target_tokens
                before = previous_context_block(truncate_to_tokens(strip_injected_tags(previous, tags), cap)[0])
            for name, system, tgt in (("normal", self.prompts.system_for(kind, depth), target), ("aggressive", _AGGRESSIVE, max(64, target // 2))):
                if not self.llm_available(session)[0]:
                    attempts.append(f"{name}:skipped")
                    break
                prompt = f"Target length: about {tgt} tokens.{extra}\n\n{before}{header}\n\n{transcript}"
                reply = self._call(system, prompt, tgt * 2, session)
                if not self._usable(reply, source_tokens):
                    attempts.append(f"{name}:{'error' if reply is None else 'unusable'}")
                    continue
                assert reply is not None
                return self._finish(reply.strip(), clean, header, tgt, tuple([*attempts, name]))
            status, model = "fallback", "extractive-fallback"
            log.warning("lcm: LLM summary failed (%s); using deterministic fallback", ", ".join(attempts))
        else:
            if why != "no-llm":
                attempts.append(why)
            status = "ok" if why == "no-llm" else "fallback"
            model = "extractive" if why == "no-llm" else "extractive-fallback"
        budget = target if status == "ok" else min(target, self.cfg.fallback_budget)
        text = extractive_summary(clean, budget, header=header)
        if status == "fallback":
            text = f"{FALLBACK_MARKER} {text}"
        text, cut = truncate_to_tokens(text, budget * 2)
        return SummaryDraft(text, estimate_tokens(text), model, "truncated" if cut else status, (*attempts, "extractive"))

    def _finish(self, reply: str, units: list[SourceUnit], header: str, target: int, attempts: tuple[str, ...]) -> SummaryDraft:
        if FOOTER_PREFIX.lower() not in reply.lower():
            terms = salient_terms([u.text for u in units], exclude=reply)
            if terms:
                reply = f"{reply}\n{FOOTER_PREFIX} {', '.join(terms)}"
        if header and not reply.startswith(header):
            reply = f"{header}\n{reply}"
        ceiling = int(target * self.cfg.summary_max_overage_factor)
        reply, cut = truncate_to_tokens(reply, ceiling)
        model = self.cfg.summary_model or str(getattr(self.llm, "model", "") or "llm")
        return SummaryDraft(reply, estimate_tokens(reply), model, "truncated" if cut else "ok", attempts)
