"""Delegated deep recall: ``expand_query`` over ranked conversation buckets under one deadline.

The steps, as lossless-claw's ``lcm_expand_query`` takes them (see ``docs/lcm-reference.md``):

1. The candidates (given summary ids, summaries a query found, summaries behind the messages
   it found, and those raw messages) are grouped by conversation into **buckets**.
2. The buckets are ranked (:func:`rank_buckets`): given ids first, then more candidates, then
   the newest match, then more message-backed seeds, then the lower conversation id.
3. The top ``max_buckets`` run at once, each in its own worker, under **one shared deadline**
   and drawing on **one shared source-token cap** (:class:`SharedBudget`). With an LLM a
   bucket is a bounded tool loop (``lcm_describe``, ``lcm_expand``, ``lcm_grep``, scoped to the
   bucket's conversation); without one it is the extractive answer over the same sources.
4. A bucket that does not finish by the deadline contributes nothing (its worker's late
   result is dropped, never guessed); one that fails keeps its error code. Buckets past
   ``max_buckets``, or left without tokens, are ``skipped``. Any of these marks ``truncated``.
5. The answers of the buckets that succeeded are merged; when none did, the call raises
   :class:`~lcm.recall.ExpansionTimeoutError` / ``ExpansionFailedError`` carrying the whole
   result (``error``, ``errorCode``, empty counters and the breakdown) as ``.result``.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from amem.kernel.errors import MemoryToolError
from lcm.models import BucketReport, ExpandedMessage, ExpandQueryResult, ExpandResult, GrepResult
from lcm.recall import ExpansionFailedError, ExpansionTimeoutError, Recall, complete_by, cut_answer

log = logging.getLogger(__name__)

__all__ = ["Candidate", "Bucket", "SharedBudget", "Delegator", "rank_buckets", "build_buckets",
           "MAX_BUCKETS", "MAX_TOOL_ROUNDS"]

#: buckets expanded per call (the reference's default); the rest are reported as skipped
MAX_BUCKETS = 3
#: model turns one bucket's sub-agent may take (tool calls plus the answer)
MAX_TOOL_ROUNDS = 6
#: characters of one tool result shown back to the sub-agent
_TOOL_RESULT_CHARS = 6000
_EXPAND_REQUEST = re.compile(r"^\s*EXPAND:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_CITE_RE = re.compile(r"(?:msg_\d+|sum_[0-9a-f]{16})")


class BucketGrep(Protocol):
    """The engine's text grep, as the sub-agent's ``lcm_grep`` calls it (``lcm.queries.TextGrep``)."""

    def __call__(self, pattern: str, *, field: str = "pattern", mode: str, scope: str, conv_ids: list[int] | None,
                 since: str | None, before: str | None, limit: int, sort: str) -> GrepResult: ...  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """One place recall may start from: a summary, or a raw message nothing summarises yet."""

    conversation_id: int
    summary_id: str | None = None
    #: named by the caller (``summaryIds``), not found by a query
    explicit: bool = False
    #: a summary reached through a message the query matched
    message_backed: bool = False
    #: when the matched item was written (ISO 8601); ranks newer matches first
    matched_at: str = ""
    message: sqlite3.Row | None = None


@dataclass
class Bucket:
    """The candidates of one conversation."""

    conversation_id: int
    summary_ids: list[str] = field(default_factory=list)
    messages: list[sqlite3.Row] = field(default_factory=list)
    explicit: int = 0
    message_backed: int = 0
    candidates: int = 0
    newest: str = ""


def build_buckets(candidates: Sequence[Candidate]) -> list[Bucket]:
    """The candidates grouped by conversation, each summary and message once, in input order."""
    buckets: dict[int, Bucket] = {}
    seen: set[tuple[int, str]] = set()
    for c in candidates:
        b = buckets.setdefault(c.conversation_id, Bucket(c.conversation_id))
        key = (c.conversation_id, c.summary_id or f"msg_{c.message['id'] if c.message is not None else ''}")
        if key in seen:
            continue
        seen.add(key)
        b.candidates += 1
        b.newest = max(b.newest, c.matched_at)
        if c.summary_id is not None:
            b.summary_ids.append(c.summary_id)
            b.explicit += c.explicit
            b.message_backed += c.message_backed
        elif c.message is not None:
            b.messages.append(c.message)
    return list(buckets.values())


def rank_buckets(buckets: Sequence[Bucket]) -> list[Bucket]:
    """Best first: more given ids, more candidates, the newest match, more message-backed
    seeds, then the lower conversation id (so equal buckets always come out in one order)."""
    by_id = sorted(buckets, key=lambda b: b.conversation_id)
    by_backed = sorted(by_id, key=lambda b: -b.message_backed)
    by_newest = sorted(by_backed, key=lambda b: b.newest, reverse=True)
    return sorted(by_newest, key=lambda b: (-b.explicit, -b.candidates))


class SharedBudget:
    """One source-token cap that every bucket of a call draws from (thread-safe)."""

    def __init__(self, total: int) -> None:
        self._left = total
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        with self._lock:
            return self._left

    def reserve(self, wanted: int) -> int:
        """Up to ``wanted`` tokens taken from the cap (0 when it is spent)."""
        with self._lock:
            got = max(0, min(wanted, self._left))
            self._left -= got
            return got

    def refund(self, unused: int) -> None:
        with self._lock:
            self._left += max(0, unused)


@dataclass
class _Run:
    """What one bucket's worker has done so far; read by the caller at the deadline."""

    bucket: Bucket
    phase: str = "queued"
    started: float = 0.0
    ended: float = 0.0
    tokens: int = 0
    done: bool = False
    answer: str = ""
    cited: list[str] = field(default_factory=list)
    expanded: int = 0
    truncated: bool = False
    error_code: str | None = None
    error: str | None = None
    conversations: set[int] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _BucketFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Delegator:
    """Runs one delegated recall call (see the module docstring)."""

    def __init__(self, recall: Recall, grep: BucketGrep) -> None:
        self.recall = recall
        self.grep = grep

    def run(
        self, prompt: str, candidates: Sequence[Candidate], *, max_tokens: int, source_cap: int, timeout_ms: int,
        max_buckets: int = MAX_BUCKETS,
    ) -> ExpandQueryResult:
        """Answer ``prompt`` from the ranked buckets of ``candidates`` within ``timeout_ms``."""
        llm = self.recall.llm
        method = "llm" if llm is not None else "extractive"
        warnings: list[str] = []
        if llm is None:
            warnings.append("no LLM configured: the answer is the best-matching source passages, not a synthesis")
        ranked = rank_buckets(build_buckets(candidates))
        if not ranked:
            warnings.append("no source passage matched the question")
            return ExpandQueryResult("No stored source passage matches the question.", [], 0, 0, False, method,
                                     warnings)  # fmt: skip
        began = time.monotonic()
        deadline = began + timeout_ms / 1000
        budget = SharedBudget(source_cap)
        chosen = ranked[:max_buckets]
        runs = [_Run(b) for b in chosen]
        workers = []
        for i, run in enumerate(runs):
            # An even share of the cap for the first expansion, so the first bucket cannot
            # starve the others; what a bucket leaves unused goes back for the sub-agents.
            share = max(1, source_cap // len(runs))
            t = threading.Thread(target=self._guarded, args=(run, prompt, share, budget, deadline, max_tokens),
                                 name=f"lcm-delegate-{i}", daemon=True)  # fmt: skip
            workers.append(t)
            t.start()
        for t in workers:
            t.join(max(0.0, deadline - time.monotonic()))
        now = time.monotonic()
        reports: list[BucketReport] = []
        ok: list[_Run] = []
        for run in runs:
            with run.lock:  # the worker may still be running: read one consistent state
                reports.append(self._report(run, now, timeout_ms))
                if run.done and run.error_code is None:
                    ok.append(run)
        for b in ranked[max_buckets:]:
            reports.append(BucketReport(b.conversation_id, "skipped", b.summary_ids[:20], "queued", 0, 0,
                                        error_code="bucket_limit",
                                        error=f"not expanded: only the best {max_buckets} conversations are read"))  # fmt: skip
        partial = any(r.status != "success" for r in reports)
        if not ok:
            first = next((r for r in reports if r.status == "failed"), reports[0])
            code = first.error_code or "expansion_failed"
            message = first.error or "no conversation bucket could be expanded"
            result = ExpandQueryResult("", [], 0, 0, True, method, warnings, [], reports, message, code)
            raise _failure(code, message, result)
        answer, cut = self._merge(prompt, ok, reports, max_tokens)
        cited = list(dict.fromkeys(c for r in ok for c in r.cited))
        convs = sorted(set().union(*(r.conversations for r in ok)))
        if not cited and llm is None:
            warnings.append("no source passage matched the question")
        if partial:
            warnings.append("partial: some conversations were skipped or failed; see conversationBreakdown")
        total = sum(r.tokens for r in ok)
        truncated = cut or partial or any(r.truncated for r in ok)
        return ExpandQueryResult(answer, cited, sum(r.expanded for r in ok), total, truncated, method, warnings,
                                 convs, reports)  # fmt: skip

    # -- one bucket ------------------------------------------------------------------------------
    def _guarded(self, run: _Run, prompt: str, share: int, budget: SharedBudget, deadline: float,
                 max_tokens: int) -> None:  # fmt: skip
        run.started = time.monotonic()
        try:
            self._bucket(run, prompt, share, budget, deadline, max_tokens)
        except _BucketFailed as exc:
            self._fail(run, exc.code, str(exc))
        except Exception as exc:  # the model or the store may fail in any way: a code, not a crash
            code = exc.code if isinstance(exc, ExpansionFailedError) else "expansion_failed"
            log.warning("lcm: delegated recall of conversation %s failed: %s", run.bucket.conversation_id, exc)
            self._fail(run, code, f"{type(exc).__name__}: {exc}"[:500])
        finally:
            with run.lock:
                run.ended = time.monotonic()
                run.done = True

    @staticmethod
    def _fail(run: _Run, code: str, message: str) -> None:
        with run.lock:
            run.error_code, run.error = code, message

    def _bucket(self, run: _Run, prompt: str, share: int, budget: SharedBudget, deadline: float,
                max_tokens: int) -> None:  # fmt: skip
        b = run.bucket
        family = [b.conversation_id]
        run.phase = "expand"
        granted = budget.reserve(share)
        if granted <= 0:
            raise _BucketFailed("budget_exhausted", "the shared tokenCap was spent by other conversations")
        exp = (self.recall.expand(b.summary_ids, max_depth=None, token_cap=granted, family=family)
               if b.summary_ids else ExpandResult([], [], [], 0, False))  # fmt: skip
        sources = list(exp.messages)
        used = exp.total_tokens
        cut = exp.truncated
        have = {m.id for m in sources}
        for r in b.messages:
            if r["id"] in have:
                continue
            if used + r["token_count"] > granted:
                cut = True
                continue
            sources.append(_expanded(r))
            have.add(r["id"])
            used += r["token_count"]
        budget.refund(granted - used)
        with run.lock:
            run.tokens = used
            run.expanded = len(exp.summaries)
            run.truncated = cut
            run.conversations = {b.conversation_id}
        if time.monotonic() >= deadline:
            raise _BucketFailed("timeout", "the shared deadline passed while expanding")
        run.phase = "answer"
        llm = self.recall.llm
        if llm is None:
            text, cited, answer_cut = self.recall.extractive_answer(prompt, exp, sources, max_tokens)
            with run.lock:
                run.answer, run.cited, run.truncated = text, cited, run.truncated or answer_cut
            return
        _ToolLoop(self, run, prompt, exp, sources, budget, deadline, max_tokens).answer()

    def _report(self, run: _Run, now: float, timeout_ms: int) -> BucketReport:
        b = run.bucket
        elapsed = int(((run.ended if run.done else now) - (run.started or now)) * 1000)
        if not run.done:  # still running at the shared deadline: contributes nothing
            return BucketReport(b.conversation_id, "failed", b.summary_ids[:20], run.phase, elapsed, run.tokens,
                                error_code="timeout",
                                error=f"no answer within {timeout_ms} ms (the shared deadline)")  # fmt: skip
        if run.error_code is not None:
            status = "skipped" if run.error_code == "budget_exhausted" else "failed"
            return BucketReport(b.conversation_id, status, b.summary_ids[:20], run.phase, elapsed, run.tokens,
                                error_code=run.error_code, error=run.error)  # fmt: skip
        return BucketReport(b.conversation_id, "success", b.summary_ids[:20], "done", elapsed, run.tokens,
                            run.expanded, list(run.cited), run.truncated)  # fmt: skip

    @staticmethod
    def _merge(prompt: str, ok: list[_Run], reports: list[BucketReport], max_tokens: int) -> tuple[str, bool]:
        """The answers of the buckets that succeeded, and a note naming the others, cut to
        ``max_tokens`` (the cut is reported as ``truncated``)."""
        if len(ok) == 1 and len(reports) == 1:
            return cut_answer(ok[0].answer, max_tokens)
        parts = [f"Conversation {r.bucket.conversation_id}:\n{r.answer}" for r in ok]
        failed = [f"{r.conversation_id} ({r.status}: {r.error_code})" for r in reports
                  if r.status != "success" and r.error_code != "bucket_limit"]
        unread = [str(r.conversation_id) for r in reports if r.error_code == "bucket_limit"]
        notes = []
        if failed:
            notes.append("not answered from conversations " + ", ".join(failed))
        if unread:  # named up to ten: the breakdown has them all
            more = f" and {len(unread) - 10} more" if len(unread) > 10 else ""
            notes.append(f"{len(unread)} lower-ranked conversations not read ({', '.join(unread[:10])}{more})")
        if notes:
            parts.append(f"Partial coverage for {prompt[:200]!r}: " + "; ".join(notes) + ".")
        return cut_answer("\n\n".join(parts), max_tokens)


class _ToolLoop:
    """One bucket's sub-agent: a bounded loop of model turns, each a tool call or the answer.

    The model gets the question, the bucket's expanded sources and the three tools; each turn
    it replies with one JSON object, ``{"tool": "lcm_expand", "arguments": {...}}`` or
    ``{"answer": "...", "citedIds": [...]}`` (a plain-text reply is taken as the answer, and
    ``EXPAND: <ids>`` as an ``lcm_expand`` call). The tools see only the bucket's conversation;
    ``lcm_expand`` draws on the shared cap."""

    def __init__(self, owner: Delegator, run: _Run, prompt: str, exp: ExpandResult, sources: list[ExpandedMessage],
                 budget: SharedBudget, deadline: float, max_tokens: int) -> None:  # fmt: skip
        self.owner = owner
        self.run = run
        self.prompt = prompt
        self.budget = budget
        self.deadline = deadline
        self.max_tokens = max_tokens
        self.family = [run.bucket.conversation_id]
        self.known = {f"msg_{m.id}" for m in sources} | {s.id for s in exp.summaries}
        blocks = ([f"[{s.id} summary depth {s.depth}]\n{s.content}" for s in exp.summaries]
                  + [f"[msg_{m.id} {m.role} {m.created_at}]\n{m.content}" for m in sources])  # fmt: skip
        self.transcript = [f"Question: {prompt}", f"Conversation: {run.bucket.conversation_id}",
                           "Seed summaries: " + (", ".join(run.bucket.summary_ids) or "(none)"),
                           "Sources:\n" + "\n\n".join(blocks)]  # fmt: skip

    def answer(self) -> None:
        llm = self.owner.recall.llm
        assert llm is not None
        system = (
            "You answer one question from a stored conversation, using only its sources. You may "
            "call tools first, one per reply, as JSON: {\"tool\": \"lcm_describe\", \"arguments\": "
            "{\"id\": \"sum_...\"}}, {\"tool\": \"lcm_expand\", \"arguments\": {\"summaryIds\": "
            "[\"sum_...\"]}} (the original messages under summaries) or {\"tool\": \"lcm_grep\", "
            "\"arguments\": {\"pattern\": \"words\"}}. When you can answer, reply with JSON "
            "{\"answer\": \"...\", \"citedIds\": [\"msg_12\", \"sum_...\"]}, citing the ids used "
            "in square brackets in the answer too. Never guess what the sources do not say."
        )
        for _round in range(MAX_TOOL_ROUNDS):
            if time.monotonic() >= self.deadline:
                raise _BucketFailed("timeout", "the shared deadline passed before the answer")
            self.run.phase = "answer"
            reply = complete_by(llm, self.deadline, system, "\n\n".join(self.transcript), self.max_tokens)
            if reply is None or time.monotonic() > self.deadline:
                raise _BucketFailed("timeout", "the model did not answer before the shared deadline")
            if not reply.strip():
                raise _BucketFailed("invalid_reply", "the model gave an empty reply")
            action = _parse(reply)
            if action is None:  # plain text: the answer itself
                self._finish(reply.strip(), _CITE_RE.findall(reply))
                return
            if "answer" in action:
                text = action.get("answer")
                if not isinstance(text, str) or not text.strip():
                    raise _BucketFailed("invalid_reply", f"the model's JSON has no answer: {reply[:200]!r}")
                cited = action.get("citedIds")
                ids = [c for c in cited if isinstance(c, str)] if isinstance(cited, list) else []
                self._finish(text.strip(), ids + _CITE_RE.findall(text))
                return
            tool, args = action.get("tool"), action.get("arguments")
            self.transcript.append(f"Your call: {json.dumps(action)[:500]}\nResult: {self._call(tool, args)}")
        raise _BucketFailed("no_answer", f"no answer after {MAX_TOOL_ROUNDS} model turns")

    def _finish(self, text: str, ids: list[str]) -> None:
        # Only ids the sub-agent was shown are cited: an id the model made up is dropped.
        cited = [c for c in dict.fromkeys(ids) if c in self.known]
        with self.run.lock:
            self.run.answer, self.run.cited = text, cited

    def _call(self, tool: Any, args: Any) -> str:
        """One tool call, scoped to the bucket; an error is shown to the model, not raised."""
        args = args if isinstance(args, dict) else {}
        self.run.phase = str(tool)[:40]
        try:
            if tool == "lcm_describe":
                out: Any = self.owner.recall.describe(str(args.get("id", "")), family=self.family).to_dict()
            elif tool == "lcm_expand":
                out = self._expand(args.get("summaryIds"))
            elif tool == "lcm_grep":
                pattern = args.get("pattern")
                if not isinstance(pattern, str) or not pattern.strip():
                    return "error: lcm_grep needs a pattern"
                res = self.owner.grep(pattern, mode="full_text", scope="both", conv_ids=self.family, since=None,
                                      before=None, limit=20, sort="relevance")  # fmt: skip
                self.known |= {h.id for h in res.hits}
                out = [{"id": h.id, "type": h.kind, "snippet": h.snippet} for h in res.hits]
            else:
                return f"error: unknown tool {str(tool)[:40]!r}; use lcm_describe, lcm_expand or lcm_grep"
        except MemoryToolError as exc:
            return f"error ({exc.code}): {exc}"
        return json.dumps(out, ensure_ascii=False, default=str)[:_TOOL_RESULT_CHARS]

    def _expand(self, ids: Any) -> Any:
        wanted = [i for i in ids if isinstance(i, str) and i in self.known] if isinstance(ids, list) else []
        if not wanted:
            return "error: name summaryIds you were shown"
        granted = self.budget.reserve(self.budget.left)
        if granted <= 0:
            with self.run.lock:
                self.run.truncated = True
            return "error: the shared tokenCap is spent; answer from what you have"
        more = self.owner.recall.expand(wanted, max_depth=None, token_cap=granted, family=self.family)
        self.budget.refund(granted - more.total_tokens)
        self.known |= {f"msg_{m.id}" for m in more.messages} | {s.id for s in more.summaries}
        with self.run.lock:
            self.run.tokens += more.total_tokens
            self.run.expanded += len(more.summaries)
            self.run.truncated = self.run.truncated or more.truncated
        return {"messages": [{"id": f"msg_{m.id}", "role": m.role, "createdAt": m.created_at, "content": m.content}
                             for m in more.messages], "truncated": more.truncated}  # fmt: skip


def _parse(reply: str) -> dict[str, Any] | None:
    """The JSON action in a reply (bare or fenced), ``EXPAND: ids`` as an lcm_expand call, or
    None for a plain-text answer."""
    want = _EXPAND_REQUEST.search(reply)
    if want:
        return {"tool": "lcm_expand", "arguments": {"summaryIds": re.findall(r"sum_[0-9a-f]{16}", want.group(1))}}
    text = reply.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and ("tool" in value or "answer" in value) else None


def _failure(code: str, message: str, result: ExpandQueryResult) -> Exception:
    cls = ExpansionTimeoutError if code == "timeout" else ExpansionFailedError
    exc = cls(message)
    exc.result = result
    if code != cls.code:
        exc.code = code  # a bucket's own code (invalid_reply, no_answer, budget_exhausted)
    return exc


def _expanded(m: sqlite3.Row) -> ExpandedMessage:
    return ExpandedMessage(m["id"], m["conversation_id"], m["role"], m["content"], m["created_at"], m["token_count"], "",
                           m["name"], m["source_role"])  # fmt: skip
