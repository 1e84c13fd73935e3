"""Recall over the DAG: describe an id, expand summaries down to sources, answer a focused question."""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections.abc import Collection

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.errors import LcmError, LcmNotFoundError, LcmValidationError
from lcm.extract import truncate_to_tokens
from lcm.largefiles import FILE_ID_RE, LargeFileStore
from lcm.models import (
    ExpandedMessage,
    ExpandedSummary,
    ExpandQueryResult,
    ExpandResult,
    FileDescription,
    MessageDescription,
    Summary,
    SummaryDescription,
)
from lcm.ranking import bm25_scores, tokenize
from amem.kernel.llm import DeadlineLLM, TextLLM
from lcm.timeutil import display_time
from lcm.tokens import estimate_tokens

log = logging.getLogger(__name__)

__all__ = ["Recall", "row_to_summary", "visible", "SUMMARY_ID_RE", "MESSAGE_ID_RE", "MAX_ROWID",
           "ExpansionFailedError", "ExpansionTimeoutError", "complete_by", "cut_answer"]

# \Z, not $: "msg_1\n" is not an id ($ would match before the newline)
SUMMARY_ID_RE = re.compile(r"^sum_[0-9a-f]{16}\Z")
MESSAGE_ID_RE = re.compile(r"^msg_([0-9]+)\Z")
#: the largest SQLite integer: a bigger id names no row (and would overflow the lookup)
MAX_ROWID = 2**63 - 1
_MAX_SOURCE_IDS = 1000


class ExpansionFailedError(LcmError):
    """No conversation bucket could answer (the model failed, or its reply was unusable): the
    caller gets this code, not a silent stand-in. ``result`` holds what a delegated recall
    reports even then: the empty counters and the ``conversation_breakdown``."""

    code = "expansion_failed"
    result: ExpandQueryResult | None = None


class ExpansionTimeoutError(ExpansionFailedError):
    """The LLM answer did not come within ``timeoutMs`` (or ``delegationTimeoutMs``)."""

    code = "timeout"


def visible(row: sqlite3.Row | None, family: Collection[int] | None) -> sqlite3.Row | None:
    """``row`` when it exists and ``family`` is None or holds its conversation, else None.

    The one place scoped lookups decide: an item of another session family and an item that
    does not exist both come out None, so callers raise one identical not-found error."""
    if row is None or family is None or row["conversation_id"] in family:
        return row
    return None


def row_to_summary(r: sqlite3.Row) -> Summary:
    return Summary(
        r["summary_id"], r["conversation_id"], r["kind"], r["depth"], r["content"], r["token_count"],
        r["earliest_at"], r["latest_at"], r["descendant_count"], r["descendant_token_count"],
        r["source_message_token_count"], r["model"], r["status"], r["created_at"],
    )  # fmt: skip


class Recall:
    def __init__(self, db: Handle, cfg: LcmConfig, files: LargeFileStore, llm: TextLLM | None) -> None:
        self.db = db
        self.cfg = cfg
        self.files = files
        self.llm = llm

    # -- describe ----------------------------------------------------------------------------
    def describe(
        self, id: str, *, offset: int = 0, limit: int = 4000, family: Collection[int] | None = None,
        expand_file: bool = False, expand_file_max_bytes: int | None = None,
    ) -> SummaryDescription | FileDescription | MessageDescription:
        """The item behind ``id``. With ``family`` (conversation ids), an item of any other
        conversation raises exactly the LcmNotFoundError of an id that does not exist.

        ``expand_file`` (files only) adds the file's first ``expand_file_max_bytes`` bytes
        (default ``expandFileMaxBytes``, within 1,024..512,000) as ``content``."""
        if not isinstance(id, str):
            raise LcmValidationError("id must be a string like sum_…, file_… or msg_…", field="id")
        if SUMMARY_ID_RE.match(id):
            return self._describe_summary(id, family)
        if FILE_ID_RE.match(id):
            return self._describe_file(id, offset, limit, family, expand_file, expand_file_max_bytes)
        m = MESSAGE_ID_RE.match(id)
        if m:
            return self._describe_message(id, m.group(1), family)
        raise LcmValidationError(f"not an lcm id: {id!r} (expected sum_<16 hex>, file_<16 hex> or msg_<n>)", field="id")

    def _describe_summary(self, sid: str, family: Collection[int] | None) -> SummaryDescription:
        with self.db.reading() as c:
            row = visible(c.execute("SELECT * FROM summaries WHERE summary_id = ?", (sid,)).fetchone(), family)
            if row is None:
                raise LcmNotFoundError(f"no summary {sid}", id=sid)
            # summary_parents(summary_id, parent_summary_id): a condensed summary and a summary it
            # was condensed from, which lossless-claw calls its parent (what recall walks down)
            parent_ids = [r[0] for r in c.execute(
                "SELECT parent_summary_id FROM summary_parents WHERE summary_id = ? ORDER BY ordinal", (sid,))]
            child_ids = [r[0] for r in c.execute(
                "SELECT summary_id FROM summary_parents WHERE parent_summary_id = ? ORDER BY summary_id", (sid,))]
            msg_ids = [
                r[0]
                for r in c.execute(
                    "WITH RECURSIVE down(id) AS (SELECT ? UNION ALL "
                    "SELECT p.parent_summary_id FROM summary_parents p JOIN down ON p.summary_id = down.id) "
                    "SELECT sm.message_id FROM down JOIN summary_messages sm ON sm.summary_id = down.id "
                    "ORDER BY sm.message_id LIMIT ?",
                    (sid, _MAX_SOURCE_IDS + 1),
                )
            ]
            in_ctx = c.execute("SELECT 1 FROM context_items WHERE summary_id = ?", (sid,)).fetchone() is not None
            shown = msg_ids[:_MAX_SOURCE_IDS]
            file_ids = [r[0] for r in c.execute(
                f"SELECT file_id FROM messages WHERE id IN ({','.join('?' * len(shown))}) "
                "AND file_id IS NOT NULL GROUP BY file_id ORDER BY min(id)", shown)] if shown else []  # fmt: skip
        return SummaryDescription(
            row_to_summary(row), parent_ids, child_ids, shown, len(msg_ids) > _MAX_SOURCE_IDS, in_ctx, file_ids=file_ids
        )

    def _describe_file(self, fid: str, offset: int, limit: int, family: Collection[int] | None,
                       expand_file: bool, max_bytes: int | None) -> FileDescription:  # fmt: skip
        if offset < 0 or not 1 <= limit <= 50000:
            raise LcmValidationError("offset must be >= 0 and limit 1..50000", field="limit")
        if max_bytes is not None and not (isinstance(max_bytes, int) and 1024 <= max_bytes <= 512000):
            raise LcmValidationError(f"expand_file_max_bytes must be 1024..512000, got {max_bytes!r}",
                                     field="expand_file_max_bytes")  # fmt: skip
        row = visible(self.db.one("SELECT * FROM large_files WHERE file_id = ?", (fid,)), family)
        if row is None:
            raise LcmNotFoundError(f"no file {fid}", id=fid)
        text, more = self.files.read_slice(fid, row["storage_path"], offset, limit)
        content, cut = (self.files.read_head(fid, row["storage_path"], max_bytes or self.cfg.expand_file_max_bytes)
                        if expand_file else (None, None))  # fmt: skip
        return FileDescription(
            fid, row["conversation_id"], row["message_id"], row["name"], row["mime_type"], row["size_bytes"],
            row["token_count"], row["exploration_summary"], row["created_at"], offset, text, more,
            storage_name=row["storage_path"].rsplit("/", 1)[-1], content=content, content_truncated=cut,
        )  # fmt: skip

    def _describe_message(self, id: str, digits: str, family: Collection[int] | None) -> MessageDescription:
        # Beyond SQLite's integers no row can exist (the lookup would overflow), and int() of
        # thousands of digits is refused by Python itself: both are simply not found.
        mid = int(digits) if len(digits) <= 19 else MAX_ROWID + 1
        if mid > MAX_ROWID:
            raise LcmNotFoundError(f"no message {id}", id=id)
        with self.db.reading() as c:
            r = visible(c.execute("SELECT * FROM messages WHERE id = ?", (mid,)).fetchone(), family)
            if r is None:
                raise LcmNotFoundError(f"no message {id}", id=id)
            sids = [x[0] for x in c.execute("SELECT summary_id FROM summary_messages WHERE message_id = ?", (mid,))]
            in_ctx = c.execute("SELECT 1 FROM context_items WHERE message_id = ?", (mid,)).fetchone() is not None
        return MessageDescription(
            f"msg_{mid}", r["conversation_id"], r["seq"], r["role"], r["content"], r["token_count"], r["created_at"],
            r["file_id"], sids, in_ctx, name=r["name"], source_role=r["source_role"],
        )  # fmt: skip

    # -- expand ------------------------------------------------------------------------------
    def expand(
        self, seeds: list[str], *, max_depth: int | None, token_cap: int, family: Collection[int] | None = None
    ) -> ExpandResult:
        """Walk down from each seed summary to its source messages, depth-first, in order.

        With ``family``, a seed of another conversation is not found, exactly like a missing one."""
        if max_depth is not None and max_depth < 0:
            raise LcmValidationError("max_depth must be >= 0", field="max_depth")
        if token_cap <= 0:
            raise LcmValidationError("token_cap must be > 0", field="token_cap")
        summaries: list[ExpandedSummary] = []
        messages: list[ExpandedMessage] = []
        used = 0
        truncated = False
        seen: set[str] = set()
        with self.db.reading() as c:
            for sid in seeds:
                if visible(c.execute("SELECT * FROM summaries WHERE summary_id = ?", (sid,)).fetchone(), family) is None:
                    raise LcmNotFoundError(f"no summary {sid}", id=sid)
            stack: list[tuple[str, int]] = [(sid, 0) for sid in reversed(seeds)]
            while stack:
                sid, level = stack.pop()
                if sid in seen:
                    continue
                seen.add(sid)
                row = c.execute("SELECT * FROM summaries WHERE summary_id = ?", (sid,)).fetchone()
                content, tokens = row["content"], row["token_count"]
                if used + tokens > token_cap:
                    truncated = True
                    if level > 0 or used >= token_cap:
                        break
                    # A seed larger than the whole cap: its head, so the cap still holds.
                    content, _ = truncate_to_tokens(content, token_cap - used)
                    tokens = min(estimate_tokens(content), token_cap - used)
                    used += tokens
                    summaries.append(ExpandedSummary(sid, row["kind"], row["depth"], content, tokens, level))
                    break
                used += tokens
                summaries.append(ExpandedSummary(sid, row["kind"], row["depth"], content, tokens, level))
                if max_depth is not None and level >= max_depth:
                    continue
                if row["kind"] == "condensed":
                    kids = [r[0] for r in c.execute(
                        "SELECT parent_summary_id FROM summary_parents WHERE summary_id = ? ORDER BY ordinal", (sid,))]  # fmt: skip
                    stack.extend((k, level + 1) for k in reversed(kids))
                    continue
                for m in c.execute(
                    "SELECT m.* FROM summary_messages sm JOIN messages m ON m.id = sm.message_id "
                    "WHERE sm.summary_id = ? ORDER BY sm.ordinal",
                    (sid,),
                ):
                    if used + m["token_count"] > token_cap:
                        truncated = True
                        break
                    used += m["token_count"]
                    messages.append(_expanded(m, sid))
                if truncated:
                    break
        return ExpandResult(list(seeds), summaries, messages, used, truncated)

    def extractive_answer(
        self, prompt: str, exp: ExpandResult, sources: list[ExpandedMessage], max_tokens: int
    ) -> tuple[str, list[str], bool]:
        passages: list[tuple[str, str]] = []  # (cite id, text)
        for m in sources:
            label = f"msg_{m.id}"
            for para in re.split(r"\n\s*\n|\n(?=[-*#>]|\d+\.)", m.content):
                para = para.strip()
                if para:
                    passages.append((label, para[:1200]))
        for s in exp.summaries:
            for line in s.content.splitlines():
                if line.strip():
                    passages.append((s.id, line.strip()))
        query = tokenize(prompt)
        scores = bm25_scores([tokenize(p) for _, p in passages], query)
        ranked = sorted((i for i in range(len(passages)) if scores[i] > 0), key=lambda i: -scores[i])
        lines: list[str] = []
        cited: list[str] = []
        used = 0
        cut = False
        times = {f"msg_{m.id}": (m.role, display_time(m.created_at, self.cfg.timezone)) for m in sources}
        for i in ranked:
            cite, text = passages[i]
            role, when = times.get(cite, ("summary", ""))
            line = f"- [{cite} {role} {when}] {text}".replace("  ", " ")
            cost = estimate_tokens(line)
            if used + cost > max_tokens:
                cut = True
                continue
            lines.append(line)
            used += cost
            if cite not in cited:
                cited.append(cite)
        if not lines and ranked:
            # Every matching passage is longer than the cap: the best one's head, marked cut
            # (it used to read "nothing matches", which was not true).
            cite, text = passages[ranked[0]]
            head, _ = cut_answer(f"[{cite}] {text}", max_tokens)
            return head, [cite], True
        if not lines:
            return "No stored source passage matches the question.", [], False
        return "Most relevant source passages (best first):\n" + "\n".join(lines), cited, cut


def cut_answer(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text`` cut to about ``max_tokens`` tokens by characters (an answer keeps its first
    words, however small the cap), with an ellipsis; returns (text, was_cut)."""
    if estimate_tokens(text) <= max_tokens:
        return text, False
    keep = max(1, max_tokens * 4)
    while keep > 1 and estimate_tokens(text[:keep] + "…") > max_tokens:
        keep = keep * 3 // 4
    return text[:keep].rstrip() + "…", True


def complete_by(llm: TextLLM, deadline: float, system: str, user: str, max_tokens: int) -> str | None:
    """The model's reply, or None when ``deadline`` comes first.

    A :class:`DeadlineLLM` (amem's client) is given the time left, so the HTTP request itself
    ends at the deadline. A plain TextLLM has no deadline of its own: the call runs in a
    daemon thread the caller stops waiting for at the deadline; the abandoned call ends on the
    model's own timeout and its reply is dropped. An error in the call is raised here, unless
    it came at or after ``deadline``: a :class:`DeadlineLLM` ends its request with an error at
    the time it was given, a moment before the caller's wait ends, and that is the deadline's
    doing (reported as a timeout, not as a failed call).
    """
    box: list[object] = []
    left = deadline - time.monotonic()
    if left <= 0:
        return None

    def run() -> None:
        try:
            if isinstance(llm, DeadlineLLM):
                box.append(llm.complete_within(system, user, max_tokens=max_tokens, seconds=left))
            else:
                box.append(llm.complete(system, user, max_tokens=max_tokens))
        except BaseException as exc:  # handed to the waiting caller below
            box.append(exc)

    worker = threading.Thread(target=run, name="lcm-expand-query", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if not box:
        log.warning("lcm: expand_query model call still running at its deadline; abandoned")
        return None
    if isinstance(box[0], BaseException):
        if isinstance(box[0], Exception) and time.monotonic() >= deadline:
            log.info("lcm: expand_query model call ended at its deadline: %s", box[0])
            return None
        raise box[0]
    return box[0] if isinstance(box[0], str) else ""


def _expanded(m: sqlite3.Row, via: str) -> ExpandedMessage:
    return ExpandedMessage(m["id"], m["conversation_id"], m["role"], m["content"], m["created_at"], m["token_count"], via,
                           m["name"], m["source_role"])  # fmt: skip
