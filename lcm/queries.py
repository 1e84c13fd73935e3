"""Queries: a recall call's argument checks, scope and dispatch (grep, describe, expand, expand_query).

Each call checks every argument before it reads anything (an error must not depend on the
data), resolves its scope through :class:`lcm.scopes.Scopes`, then hands the work to the stage
that does it: the engine's text grep, semantic recall, file grep, or :class:`lcm.recall.Recall`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.errors import LcmNotFoundError, LcmValidationError
from lcm.failures import FailureLog
from lcm.filegrep import grep_files
from lcm.largefiles import FILE_ID_RE, LargeFileStore
from lcm.models import (
    ExpandedMessage,
    ExpandQueryResult,
    ExpandResult,
    FileDescription,
    GrepResult,
    MessageDescription,
    SummaryDescription,
)
from lcm.delegation import Candidate, Delegator
from lcm.recall import SUMMARY_ID_RE, ExpansionFailedError, Recall, _expanded
from lcm.regex import compile_user_regex
from lcm.scopes import Scopes, SessionKeys
from lcm.search import build_fts_query
from lcm.semantic import SemanticIndex
from lcm.timeutil import iso, parse_time

__all__ = ["Queries", "TextGrep"]

_MODES = ("regex", "full_text", "semantic", "hybrid")
_SCOPES = ("messages", "summaries", "both", "files")
_SORTS = ("recency", "relevance", "hybrid")


class TextGrep(Protocol):
    """An engine's ``full_text`` / ``regex`` grep over messages and summaries, bound to its
    handle and config (``lcm.search.grep`` on SQLite, ``lcm.pg.search.pg_grep`` on a server)."""

    def __call__(self, pattern: str, *, field: str = "pattern", mode: str, scope: str, conv_ids: list[int] | None,
                 since: str | None, before: str | None, limit: int, sort: str) -> GrepResult: ...  # fmt: skip


class Queries:
    """The recall calls of :class:`lcm.LcmStore`, checked, scoped and dispatched."""

    def __init__(
        self, db: Handle, config: LcmConfig, files: LargeFileStore, scopes: Scopes, semantic: SemanticIndex,
        recall: Recall, text_grep: TextGrep, failures: FailureLog,
    ) -> None:
        self.db = db
        self.config = config
        self.files = files
        self.scopes = scopes
        self.semantic = semantic
        self.recall = recall
        self.text_grep = text_grep
        self.failures = failures
        self.delegator = Delegator(recall, text_grep)

    def grep(
        self, pattern: str, *, mode: str, scope: str, session_key: SessionKeys, conversation_id: int | None,
        all_conversations: bool, since: str | datetime | None, before: str | datetime | None, limit: int,
        sort: str | None, file_ids: Sequence[str] | None,
    ) -> GrepResult:
        """:meth:`lcm.LcmStore.grep`."""
        if sort is None:
            sort = "relevance" if mode in ("semantic", "hybrid") else "recency"
        if not isinstance(pattern, str) or not pattern.strip():
            raise LcmValidationError("pattern must be a non-empty string", field="pattern")
        for name, value, allowed in (("mode", mode, _MODES), ("scope", scope, _SCOPES), ("sort", sort, _SORTS)):
            if value not in allowed:
                raise LcmValidationError(f"{name} must be one of {list(allowed)}; got {value!r}", field=name)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 200:
            raise LcmValidationError(f"limit must be 1..200; got {limit!r}", field="limit")
        # Refuse a bad pattern before looking at the scope, so errors do not depend on data.
        if mode in ("semantic", "hybrid"):
            self.semantic.need(scope)
            if mode == "hybrid":
                build_fts_query(pattern)
        elif mode == "full_text":
            build_fts_query(pattern)
        else:
            compile_user_regex(pattern)
        since_s = iso(parse_time(since, "since")) if since is not None else None
        before_s = iso(parse_time(before, "before")) if before is not None else None
        # an empty window is a caller's mistake (swapped bounds), refused as amem's search
        # refuses it, not answered with no hits; the stored forms are compared (fixed-width,
        # to the millisecond), so bounds within one millisecond are an empty window too
        if since_s is not None and before_s is not None and since_s >= before_s:
            raise LcmValidationError(f"since ({since_s}) must be earlier than before ({before_s})", field="since")
        if file_ids is not None:
            bad = [f for f in file_ids if not isinstance(f, str) or not FILE_ID_RE.match(f)]
            if scope != "files" or isinstance(file_ids, str) or bad:
                raise LcmValidationError("file_ids must be a list of file_... ids, with scope 'files'", field="file_ids")
        conv_ids = self.scopes.scope(session_key, conversation_id, all_conversations)
        if conv_ids == []:
            if file_ids:
                raise LcmNotFoundError(f"no file {file_ids[0]}", id=file_ids[0])
            return GrepResult(pattern, mode, scope, sort, [], conversation_ids=[])
        if mode in ("semantic", "hybrid"):
            return self._files_unsearched(self.semantic.grep(
                pattern, mode=mode, scope=scope, conv_ids=conv_ids, since=since_s, before=before_s, limit=limit,
                sort=sort), conv_ids)  # fmt: skip
        if scope == "files":
            return grep_files(self.db, self.config, self.files, pattern, mode=mode, conv_ids=conv_ids,
                              file_ids=file_ids, limit=limit)  # fmt: skip
        return self._files_unsearched(self.text_grep(
            pattern, mode=mode, scope=scope, conv_ids=conv_ids, since=since_s, before=before_s, limit=limit,
            sort=sort), conv_ids)  # fmt: skip

    def _files_unsearched(self, result: GrepResult, conv_ids: list[int] | None) -> GrepResult:
        """``result`` with a warning when messages of its scope were stored as files: a message
        over ``largeFileTokenThreshold`` keeps only a reference in the message index, so a word
        inside it is found by ``scope="files"`` alone (a pasted log went unfound, unsaid)."""
        query = "SELECT count(*) FROM large_files WHERE message_id IS NOT NULL"
        chunks = [None] if conv_ids is None else [conv_ids[i:i + 500] for i in range(0, len(conv_ids), 500)]
        n = 0
        with self.db.reading() as c:
            for ids in chunks:  # a few hundred ids a statement: SQLite bounds its parameters
                where = "" if ids is None else f" AND conversation_id IN ({','.join('?' * len(ids))})"
                n += int(c.execute(query + where, list(ids or [])).fetchone()[0])
        if n:
            result.warnings.append(
                f"{n} large message{'s are' if n != 1 else ' is'} stored as {'files' if n != 1 else 'a file'} "
                "and not searched here "
                "(the message index holds a reference to each): scope 'files' (--scope files) searches them")
        return result

    def describe(
        self, id: str, *, offset: int, limit: int, session_key: SessionKeys, conversation_id: int | None,
        expand_file: bool = False, expand_file_max_bytes: int | None = None,
    ) -> SummaryDescription | FileDescription | MessageDescription:
        """:meth:`lcm.LcmStore.describe`."""
        family = self.scopes.family(session_key, conversation_id, False)
        return self.recall.describe(id, offset=offset, limit=limit, family=family, expand_file=expand_file,
                                    expand_file_max_bytes=expand_file_max_bytes)  # fmt: skip

    def _scope(self, summary_ids: Sequence[str] | None, session_key: SessionKeys, conversation_id: int | None,
               all_conversations: bool) -> list[int] | None:  # fmt: skip
        # Given summary ids are looked up by id (a trusted caller may name no scope); a query
        # searches, and a search must always be scoped.
        if summary_ids:
            return self.scopes.family(session_key, conversation_id, all_conversations)
        return self.scopes.scope(session_key, conversation_id, all_conversations)

    def _seeds(
        self, summary_ids: Sequence[str] | None, query: str | None, scope: list[int] | None, *,
        hits: int = 20, max_seeds: int = 5,
    ) -> tuple[list[str], list[sqlite3.Row]]:
        """The summaries to expand, and the raw messages ``query`` found (none when ids are given)."""
        if summary_ids:
            if isinstance(summary_ids, str):
                raise LcmValidationError("summary_ids must be a list of ids", field="summary_ids")
            bad = [s for s in summary_ids if not isinstance(s, str) or not SUMMARY_ID_RE.match(s)]
            if bad:
                raise LcmValidationError(f"not summary ids: {bad}", field="summary_ids")
            return list(dict.fromkeys(summary_ids)), []
        if not query or not query.strip():
            raise LcmValidationError("give summary_ids or a query", field="query")
        res = self.text_grep(query, field="query", mode="full_text", scope="both", conv_ids=scope, since=None,
                             before=None, limit=hits, sort="relevance")  # fmt: skip
        seeds = [h.id for h in res.hits if h.kind == "summary"][:max_seeds]
        msg_ids = [int(h.id[4:]) for h in res.hits if h.kind == "message"]
        rows = []
        if msg_ids:
            q = ",".join("?" * len(msg_ids))
            by_id = {r["id"]: r for r in self.db.query(f"SELECT * FROM messages WHERE id IN ({q})", msg_ids)}
            rows = [by_id[i] for i in msg_ids if i in by_id]
        return seeds, rows

    def _expand_cap(self, requested: int | None, field: str) -> int:
        """The source tokens an expansion may read: ``maxExpandTokens``, or less when asked."""
        if requested is None:
            return self.config.max_expand_tokens
        if isinstance(requested, bool) or not isinstance(requested, int) or requested <= 0:
            raise LcmValidationError(f"{field} must be a positive integer", field=field)
        return min(requested, self.config.max_expand_tokens)

    def expand(
        self, summary_ids: Sequence[str] | None, *, query: str | None, max_depth: int | None, token_cap: int | None,
        session_key: SessionKeys, conversation_id: int | None, all_conversations: bool,
    ) -> ExpandResult:
        """:meth:`lcm.LcmStore.expand`."""
        scope = self._scope(summary_ids, session_key, conversation_id, all_conversations)
        seeds, direct = self._seeds(summary_ids, query, scope)
        cap = self._expand_cap(token_cap, "token_cap")
        res = self.recall.expand(seeds, max_depth=max_depth, token_cap=cap, family=scope)
        if not direct:
            return _capped(res, token_cap, cap)
        # Nothing compacted matches yet: the raw messages found are the sources.
        msgs: list[ExpandedMessage] = list(res.messages)
        used, cut = res.total_tokens, res.truncated
        have = {m.id for m in msgs}
        for r in direct:
            if r["id"] in have:
                continue
            if used + r["token_count"] > cap:
                cut = True
                break
            msgs.append(_expanded(r, ""))
            used += r["token_count"]
        return _capped(ExpandResult(res.seeds, res.summaries, msgs, used, cut, res.warnings), token_cap, cap)

    def expand_query(
        self, prompt: str, *, query: str | None, summary_ids: Sequence[str] | None, max_tokens: int | None,
        session_key: SessionKeys, conversation_id: int | None, all_conversations: bool, token_cap: int | None,
        timeout_ms: int | None,
    ) -> ExpandQueryResult:
        """:meth:`lcm.LcmStore.expand_query`: delegated recall over ranked conversation buckets
        (:mod:`lcm.delegation`); a call no bucket could answer is recorded, then raised."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise LcmValidationError("prompt must be a non-empty string", field="prompt")
        cap = max_tokens if max_tokens is not None else self.config.max_expand_tokens
        if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
            raise LcmValidationError("max_tokens must be a positive integer", field="max_tokens")
        scope = self._scope(summary_ids, session_key, conversation_id, all_conversations)
        source_cap = self._expand_cap(token_cap, "token_cap")
        if timeout_ms is not None and (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0):
            raise LcmValidationError("timeout_ms must be a positive integer", field="timeout_ms")
        # The shared deadline: the caller's timeoutMs, never past delegationTimeoutMs (the
        # tool's default timeoutMs is delegationTimeoutMs + 30 s, the headroom the reference
        # keeps so recall ends before the host's watchdog does).
        limit_ms = min(timeout_ms or self.config.delegation_timeout_ms, self.config.delegation_timeout_ms)
        candidates = self._candidates(summary_ids, query, scope)
        try:
            return self.delegator.run(prompt, candidates, max_tokens=cap, source_cap=source_cap, timeout_ms=limit_ms)
        except ExpansionFailedError as exc:
            self.failures.record("expansion", f"{exc.code}: {exc}")
            raise

    def _candidates(self, summary_ids: Sequence[str] | None, query: str | None,
                    scope: list[int] | None) -> list[Candidate]:  # fmt: skip
        """Where recall may start: the given summaries (checked in scope), or what ``query``
        finds: summaries, the leaf summaries behind the messages it finds, and those messages."""
        # Wider than lcm_expand's five seeds: the hits are spread over conversation buckets.
        seeds, direct = self._seeds(summary_ids, query, scope, hits=50, max_seeds=30)
        out: list[Candidate] = []
        if seeds:
            q = ",".join("?" * len(seeds))
            rows = {r["summary_id"]: r for r in self.db.query(
                f"SELECT summary_id, conversation_id, latest_at, created_at FROM summaries WHERE summary_id IN ({q})",
                seeds)}  # fmt: skip
            for sid in seeds:
                r = rows.get(sid)
                if r is None or (scope is not None and r["conversation_id"] not in scope):
                    raise LcmNotFoundError(f"no summary {sid}", id=sid)
                out.append(Candidate(r["conversation_id"], sid, explicit=bool(summary_ids),
                                     matched_at=r["latest_at"] or r["created_at"] or ""))  # fmt: skip
        if direct:
            q = ",".join("?" * len(direct))
            leaves = self.db.query(
                f"SELECT sm.message_id, sm.summary_id FROM summary_messages sm WHERE sm.message_id IN ({q}) "
                "ORDER BY sm.message_id", [r["id"] for r in direct])  # fmt: skip
            by_msg: dict[int, list[str]] = {}
            for r in leaves:
                by_msg.setdefault(r["message_id"], []).append(r["summary_id"])
            for r in direct:
                for sid in by_msg.get(r["id"], []):
                    out.append(Candidate(r["conversation_id"], sid, message_backed=True, matched_at=r["created_at"]))
                out.append(Candidate(r["conversation_id"], message=r, matched_at=r["created_at"]))
        return out


def _capped(res: ExpandResult, asked: int | None, cap: int) -> ExpandResult:
    """``res`` with a warning when it was cut by ``maxExpandTokens`` below the caller's own
    ``token_cap``: ``truncated`` alone did not say which cap applied."""
    if res.truncated and asked is not None and cap < asked:
        res.warnings.append(f"token_cap {asked} was lowered to maxExpandTokens ({cap}), the most "
                            "one expansion reads; what did not fit is left out")
    return res
