"""LcmStore: the one entry class of lcm — ingest, compact, assemble, recall and operate a SQLite store."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from amem.kernel.clock import Clock, SystemClock
from amem.kernel.llm import TextLLM
from lcm.assemble import Assembler
from lcm.compact_driver import CompactionDriver, ConversationLock
from lcm.compaction import Compactor
from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.convlock import FileConversationLocks, compaction_wait_s
from lcm.db import Database, sqlite_only
from lcm.errors import LcmValidationError, unopenable
from lcm.events import EventLog
from lcm.failures import FailureLog
from lcm.ingest import store_messages
from lcm.normalize import normalize_messages
from lcm.largefiles import open_file_store
from lcm.migrations import migrate
from lcm.models import (
    AssembledContext,
    CleanReport,
    CompactionResult,
    Conversation,
    DoctorReport,
    EmbedReport,
    ExpandQueryResult,
    ExpandResult,
    FileDescription,
    GrepResult,
    IngestResult,
    MaintenanceResult,
    MessageDescription,
    NewContextResult,
    ResetResult,
    RetentionResult,
    StatusReport,
    SummaryDescription,
)
from lcm.ops import doctor, doctor_clean, status
from lcm.recall import Recall
from lcm.reorder import Placed, place_before
from lcm.queries import Queries, TextGrep
from lcm.scopes import Scopes, SessionKeys
from lcm.search import grep
from lcm.semantic import SemanticIndex
from lcm.sessions import check_title, find_active, reset_conversation, resolve_conversation
from lcm.summarize import Summarizer
from lcm.timeutil import iso
from lcm.trigram import pending_count
from lcm.upkeep import TrigramDebt, Upkeep, sqlite_trigram_debt
from lcm.vectors import TextEmbedder

__all__ = ["LcmStore"]


#: the module of each URL scheme's engine, loaded by the first store opened on such a URL
_ENGINE_MODULES = {"postgresql": "lcm.pg.store", "postgres": "lcm.pg.store"}


class LcmStore:
    """Lossless conversation memory in one SQLite file (or ``":memory:"``).

    Args:
        path: database file path or ``":memory:"``; ``None`` uses ``config.database_path``.
            With neither, the store ``amem lcm ...`` opens, its settings read from the
            environment as the CLI reads them (``AMEM_CONFIG``'s ``[lcm]`` table, ``LCM_*``,
            ``AMEM_LCM_URL``, else ``lcm.db`` in ``AMEM_HOME``: ``lcm.config.environment_config``).
        config: an :class:`LcmConfig`; given, no environment is read (defaults when omitted
            with a path).
        llm: optional summarizer/expansion model; without it summaries are extractive.
        expansion_llm: the model ``expand_query`` uses instead of ``llm`` (``expansionModel``).
        clock: time source (UTC-aware); tests pass a :class:`ManualClock`.
        embedder: the text encoder of semantic recall (``grep`` modes ``semantic`` and
            ``hybrid``, ``embed_pending``); amem hands it the note store's embedder. A store
            whose vectors another embedder made keeps that one: semantic recall and embedding
            raise ``EmbedderMismatchError`` (``status().embedding.given_model_id`` names the
            one given) and nothing is re-embedded, unless ``switch_embedder``.
        switch_embedder: record ``embedder`` as the store's even though its vectors are
            another's: every message and summary is embedded again by ``embed_pending``.

    Raises:
        ValueError: when no path is given by either argument, or the two disagree.
    """

    #: the settings ``LcmStore()`` (no path, no config) read from the environment, or None
    _from_env: LcmConfig | None = None

    #: the store class of each URL scheme another engine serves ("postgresql": lcm.pg.store's).
    #: An engine's subclass registers here as it is defined (``url_schemes=``); the first URL
    #: of a scheme loads its module (``_ENGINE_MODULES``), so this module never imports one at
    #: its own import (no import cycle) and a SQLite user never loads the PostgreSQL driver.
    _engines: ClassVar[dict[str, type[LcmStore]]] = {}

    def __init_subclass__(cls, *, url_schemes: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for scheme in url_schemes:
            LcmStore._engines[scheme] = cls

    def __new__(cls, path: str | Path | None = None, config: LcmConfig | None = None, **kwargs: Any) -> LcmStore:
        from_env = None
        if path is None and config is None:  # the CLI's store, read from the environment
            from lcm.config import environment_config

            from_env = environment_config(os.environ)
        # A URL (as path or config.database_path) opens the engine registered for its scheme.
        target = path if path is not None else (config or from_env or LcmConfig()).database_path
        store = cls._engine_for(target)
        store._from_env = from_env  # read by __init__, so the environment is read once
        return store

    @classmethod
    def _engine_for(cls, target: str | Path | None) -> LcmStore:
        if cls is LcmStore and isinstance(target, str) and "://" in target:
            scheme = target.split("://", 1)[0]
            if scheme not in LcmStore._engines and scheme in _ENGINE_MODULES:
                importlib.import_module(_ENGINE_MODULES[scheme])  # its class registers itself
            if scheme not in LcmStore._engines:
                # never a SQLite file named after a URL a server was meant to serve
                raise ValueError(f"no lcm engine serves {scheme}:// URLs (known: "
                                 f"{', '.join(sorted(LcmStore._engines)) or 'none loaded'}); give a file path or a known URL")
            return super().__new__(LcmStore._engines[scheme])
        return super().__new__(cls)

    def __init__(
        self,
        path: str | Path | None = None,
        config: LcmConfig | None = None,
        *,
        llm: TextLLM | None = None,
        clock: Clock | None = None,
        expansion_llm: TextLLM | None = None,
        embedder: TextEmbedder | None = None,
        switch_embedder: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, LcmConfig):
            raise TypeError(f"config must be an LcmConfig (lcm.load_config() builds one), not {type(config).__name__}")
        if not isinstance(switch_embedder, bool):
            raise ValueError(f"switch_embedder must be True or False, not {switch_embedder!r}")
        if path is not None and (not isinstance(path, (str, Path)) or not str(path).strip()):
            raise ValueError(f"path must be a database file, ':memory:' or a known URL, not {path!r}")
        cfg = config or self._from_env or LcmConfig()
        if path is None:
            if not cfg.database_path:
                raise ValueError("LcmStore needs a path (or config.database_path)")
            path = cfg.database_path
        elif cfg.database_path and str(path) != cfg.database_path:
            raise ValueError(f"path {path!r} contradicts config.database_path {cfg.database_path!r}")
        if llm is not None and not callable(getattr(llm, "complete", None)):
            raise ValueError("llm must have a complete(system, user, *, max_tokens=None) method")
        if embedder is not None and not isinstance(embedder, TextEmbedder):
            raise ValueError("embedder must have model_id, dim and embed(texts, kind)")
        self.config = cfg
        self.clock: Clock = clock or SystemClock()
        self.llm = llm
        try:
            self.db: Handle = Database(path)
        except sqlite3.Error as exc:  # a directory this user cannot write, say
            raise unopenable(str(path), exc) from None
        # No data directory exists for an in-memory store: its files live as long as the store.
        data_dir = None if self.db.is_memory else Path(self.db.path).resolve().parent
        self.files, self._tmpdir = open_file_store(cfg.large_files_dir, data_dir)
        log_path = None
        if cfg.log_file_enabled:
            log_path = cfg.log_file or (str(data_dir / "lcm-log.jsonl") if data_dir is not None else None)
        self.events = EventLog(log_path, self.clock, cfg.log_max_file_bytes, cfg.log_retention_days)
        try:
            migrate(self.db, self._now())
            self._build_parts(SemanticIndex(self.db, cfg, embedder), expansion_llm)
            self.semantic.bind(self._now(), switch=switch_embedder)
        except BaseException as exc:
            # a part refusing its config (summaryPromptsDir) must not leak the open database
            self.close()
            if isinstance(exc, sqlite3.Error):
                raise unopenable(self.db.path, exc) from None
            raise

    def _build_parts(
        self, semantic: SemanticIndex, expansion_llm: TextLLM | None, *, compaction_lock: ConversationLock | None = None,
        trigrams: TrigramDebt | None = None, size_of: Callable[[], int] | None = None,
        reclaim: Callable[[], None] | None = None, text_grep: TextGrep | None = None,
    ) -> None:
        """Build the parts once over ``self.db``, each with what it needs; an engine's store
        (lcm.pg) calls this with its own semantic index and the pieces its engine does differently."""
        cfg, db, clock, events = self.config, self.db, self.clock, self.events
        self.summarizer = Summarizer(cfg, self.llm, clock)
        self.compactor = Compactor(db, cfg, self.summarizer, clock, events)
        self.recall = Recall(db, cfg, self.files, expansion_llm if expansion_llm is not None else self.llm)
        self.semantic = semantic
        self.failures = FailureLog(db, clock, events)
        self.scopes = Scopes(db, cfg)
        if compaction_lock is None:
            # processes sharing the SQLite file (and threads sharing a store) compact a
            # conversation one at a time, as PostgreSQL's hosts do (lcm.convlock)
            compaction_lock = FileConversationLocks(None if db.is_memory else db.path, limit_s=compaction_wait_s(cfg))
        self.compaction = CompactionDriver(db, cfg, self.compactor, self.scopes, events, self.failures,
                                           lock=compaction_lock)  # fmt: skip
        self.assembler = Assembler(db, cfg, clock, self.scopes, self.compaction)
        # the engine's full_text / regex grep over messages and summaries (lcm.pg passes its own)
        self.queries = Queries(db, cfg, self.files, self.scopes, semantic, self.recall,
                               text_grep or functools.partial(grep, db, cfg), self.failures)  # fmt: skip
        self.upkeep = Upkeep(db, cfg, clock, self.files, events, self.failures, self.compaction, semantic,
                             trigrams or sqlite_trigram_debt(db), size_of=size_of, reclaim=reclaim)  # fmt: skip

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database (and remove an in-memory store's files). Safe to call twice; any
        other call afterwards raises ``StoreClosedError``."""
        self.db.close()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> LcmStore:
        return self

    def __reduce__(self) -> Any:
        # pickling failed on the SQLite connection, naming nothing the caller holds
        raise TypeError("an LcmStore cannot be pickled or sent to another process: open the store "
                        "in that process (several processes may share one SQLite file)")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _now(self) -> str:
        return iso(self.clock.now())

    # -- sessions --------------------------------------------------------------------------------
    def conversation(self, session_key: str | None = None, *, session_id: str | None = None) -> Conversation | None:
        """The active conversation for a key (or session id), or None."""
        return self.scopes.conversation(session_key, session_id)

    def conversations(self, session_key: str | None = None) -> list[Conversation]:
        """Every conversation (or the session family of ``session_key``), oldest first."""
        return self.scopes.conversations(session_key)

    def ingest(
        self, session_key: str | None, messages: Sequence[Mapping[str, Any]], *, session_id: str | None = None,
        title: str | None = None,
    ) -> IngestResult:
        """Store new messages of a session; re-sent ones are skipped, replay floods refused.

        ``title`` names the conversation (a chat export's title; ``Conversation.title``).

        Raises:
            LcmValidationError: a malformed message (``.field`` names it); nothing is stored.
            ReplayFloodError: too many identical messages in one second; nothing is stored.
        """
        if not self.config.enabled:
            return IngestResult(None, 0, 0, ignored=True)
        mode = self.scopes.session_mode(session_key)
        if mode != "normal":
            return IngestResult(None, 0, 0, ignored=mode == "ignored", stateless=mode == "stateless")
        now = self._now()
        batch = normalize_messages(messages, now, session_id=session_id)
        check_title(title)
        with sqlite_only(self.db, "ingest").atomic() as c:
            conv_id, created, archived = resolve_conversation(c, session_key, session_id, now, title)
            ids, skipped, file_ids = store_messages(c, conv_id, batch, self.config, self.files, now)
        if ids or created:
            self.events.write("ingest", conversation_id=conv_id, stored=len(ids), skipped=skipped, files=file_ids)
        return IngestResult(conv_id, len(ids), skipped, ids, file_ids, new_conversation=created, archived_conversation_id=archived)

    def place_before(self, session_key: str, placements: Mapping[str, str]) -> Placed:
        """Move messages of ``session_key``'s active conversation to where a re-sent batch puts
        them: each message whose event id is a key of ``placements`` to just before the one
        whose event id is its value (as ingest's ``event_id``); how many moved, and the event
        ids of those that follow a summary in the context, the one they belong before being
        folded into it (:class:`lcm.reorder.Placed`).

        Ingest stores new messages after the conversation's last; a chat export's fork marker
        new to a store that held its branch belongs before the branch's first message. Both
        positions move (``seq`` and the context's raw slots, ``lcm.reorder``), in one
        transaction; a pair naming a message not stored is left alone, one in place is not
        written. A session that only reads (``statelessSessionPatterns``) moves nothing (0).
        """
        if self.scopes.session_mode(session_key) != "normal":
            return Placed(0)
        keys = {f"event:{k}": f"event:{v}" for k, v in placements.items()}
        with self.db.atomic() as c:  # portable SQL (lcm.reorder): both engines
            row = find_active(c, session_key, None)
            if row is None:
                return Placed(0)
            conv_id = int(row["id"])
            placed = place_before(c, conv_id, keys)
        if placed.moved:
            self.events.write("place_before", conversation_id=conv_id, moved=placed.moved,
                              after_summary=len(placed.after_summary))
        return Placed(placed.moved, tuple(k.removeprefix("event:") for k in placed.after_summary))

    def reset(self, session_key: str, cause: str = "reset") -> ResetResult:
        """``/reset``: archive the active conversation of ``session_key`` and open a fresh one
        for the same key (the archived one stays in the session family: recall still reads it)."""
        if not session_key or not isinstance(session_key, str):
            raise LcmValidationError("reset needs a session_key", field="session_key")
        self._writable(session_key, "reset")
        now = self._now()
        with self.db.atomic() as c:
            archived, new_id = reset_conversation(c, session_key, cause, now)
        self.events.write("reset", session_key=session_key, archived=archived, conversation_id=new_id, cause=cause)
        return ResetResult(archived, new_id, cause)

    def new_context(self, session_key: str) -> NewContextResult:
        """``/new``: empty the active context of ``session_key`` (what :meth:`assemble` sends
        the model) and keep the conversation row, its messages and summaries: the next turn
        starts fresh, while recall (grep, describe, expand) still finds everything said."""
        if not session_key or not isinstance(session_key, str):
            raise LcmValidationError("new needs a session_key", field="session_key")
        self._writable(session_key, "new")
        with self.db.atomic() as c:
            row = find_active(c, session_key, None)
            if row is None:
                return NewContextResult(None, 0, 0)
            conv = int(row["id"])
            count, tokens = c.execute(
                "SELECT count(*), coalesce(sum(coalesce(m.token_count, s.token_count, 0)), 0) FROM context_items ci "
                "LEFT JOIN messages m ON m.id = ci.message_id LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
                "WHERE ci.conversation_id = ?", (conv,)).fetchone()  # fmt: skip
            c.execute("DELETE FROM context_items WHERE conversation_id = ?", (conv,))
            # nothing left to compact: the debt it owed is void
            c.execute("DELETE FROM compaction_debt WHERE conversation_id = ?", (conv,))
            c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (self._now(), conv))
        self.events.write("new", session_key=session_key, conversation_id=conv, pruned_items=int(count),
                          pruned_tokens=int(tokens))  # fmt: skip
        return NewContextResult(conv, int(count), int(tokens))

    def _writable(self, session_key: str, what: str) -> None:
        """Refuse a write for a session that may only read (``statelessSessionPatterns``)."""
        mode = self.scopes.session_mode(session_key)
        if mode != "normal":
            patterns = "statelessSessionPatterns" if mode == "stateless" else "ignoreSessionPatterns"
            raise LcmValidationError(f"session {session_key!r} matches {patterns}: it reads but never writes, "
                                     f"so {what} is refused", field="session_key")  # fmt: skip

    # -- compaction ------------------------------------------------------------------------------
    def compact(self, session_key: str, *, token_budget: int | None = None, force: bool = False,
                model: str | None = None, context_window: int | None = None) -> CompactionResult:
        """Run a full sweep when the context is at ``contextThreshold`` of the budget (or ``force``).

        ``model`` and ``context_window`` (the host's model and its window) select
        ``contextThresholdOverrides`` rules that match on them.
        """
        return self.compaction.compact(session_key, token_budget=token_budget, force=force, model=model,
                                       context_window=context_window)  # fmt: skip

    def compact_until_under(self, session_key: str, target_tokens: int) -> CompactionResult:
        """Sweep repeatedly until the context is at most ``target_tokens`` (bounded by its deadline)."""
        return self.compaction.compact_until_under(session_key, target_tokens)

    # -- assembly --------------------------------------------------------------------------------
    def assemble(self, session_key: str, token_budget: int, *, prompt: str | None = None,
                 model: str | None = None, context_window: int | None = None, provider: str | None = None,
                 cache_read_tokens: int | None = None, cache_write_tokens: int | None = None,
                 read_only: bool = False) -> AssembledContext:
        """The ordered context for the next model call within ``token_budget``.

        At ``contextThreshold`` the conversation gets compaction debt (deferred mode, paid by
        :meth:`maintenance`) or is compacted now (inline mode). When the context is already over
        the budget, debt is paid synchronously first (the emergency path). A debt row keeps the
        host's ``model``, ``provider`` and prompt-cache token counts of the turn that recorded it.
        ``read_only``: for a caller that may not change the store (a read-only key): the
        context as it stands, never compacted nor indebted; a warning says when it would be.
        """
        return self.assembler.assemble(session_key, token_budget, prompt=prompt, model=model,
                                       context_window=context_window, provider=provider,
                                       cache_read_tokens=cache_read_tokens,
                                       cache_write_tokens=cache_write_tokens, read_only=read_only)  # fmt: skip

    # -- recall ----------------------------------------------------------------------------------
    def session_keys(self, prefix: str) -> list[str]:
        """The distinct session keys starting with ``prefix`` (exact, no wildcards)."""
        return self.scopes.session_keys(prefix)

    def grep(
        self,
        pattern: str,
        *,
        mode: str = "regex",
        scope: str = "both",
        session_key: SessionKeys = None,
        conversation_id: int | None = None,
        all_conversations: bool = False,
        since: str | datetime | None = None,
        before: str | datetime | None = None,
        limit: int = 50,
        sort: str | None = None,
        file_ids: Sequence[str] | None = None,
    ) -> GrepResult:
        """Search messages and/or summaries of the session family (or one / all conversations).

        ``full_text`` quotes each term as a literal (phrases in double quotes stay phrases) and
        uses the trigram index for CJK; ``regex`` is RE2 (linear time, see ``lcm.regex``) over a
        scan bounded by rows and by ``grep_regex_deadline_ms``, which bounds full-text too.
        ``scope="files"`` reads the stored large files instead (``lcm.filegrep``), only those of
        ``file_ids`` when given; a file outside the scope is not_found like a missing one.
        ``session_key`` may be several keys: the union of their families.
        ``semantic`` ranks by the embedder's cosine (``lcm.semantic``), ``hybrid`` fuses that
        with BM25 over the question's words and each item's date (``lcm.hybrid``); both count what is not embedded yet in
        ``not_embedded``. ``sort`` defaults to ``relevance`` (best match first) for those two
        and to ``recency`` for the others.
        """
        return self.queries.grep(pattern, mode=mode, scope=scope, session_key=session_key,
                                 conversation_id=conversation_id, all_conversations=all_conversations, since=since,
                                 before=before, limit=limit, sort=sort, file_ids=file_ids)  # fmt: skip

    def describe(
        self, id: str, *, offset: int = 0, limit: int = 4000, session_key: SessionKeys = None,
        conversation_id: int | None = None, expand_file: bool = False, expand_file_max_bytes: int | None = None,
    ) -> SummaryDescription | FileDescription | MessageDescription:
        """A summary (content, lineage: ``parent_ids`` it was condensed from, ``child_ids`` condensed
        from it; source message ids), a file (metadata + a slice; with ``expand_file`` its first
        ``expand_file_max_bytes`` bytes, default ``expandFileMaxBytes``), or a message.

        With ``session_key`` (or ``conversation_id``) an id outside that scope raises the very
        same LcmNotFoundError as an id that does not exist: the answer tells nothing about it.
        """
        return self.queries.describe(id, offset=offset, limit=limit, session_key=session_key,
                                     conversation_id=conversation_id, expand_file=expand_file,
                                     expand_file_max_bytes=expand_file_max_bytes)  # fmt: skip

    def expand(
        self,
        summary_ids: Sequence[str] | None = None,
        *,
        query: str | None = None,
        max_depth: int | None = None,
        token_cap: int | None = None,
        session_key: SessionKeys = None,
        conversation_id: int | None = None,
        all_conversations: bool = False,
    ) -> ExpandResult:
        """Walk the DAG down from summaries (given, or found by ``query``) to their source messages."""
        return self.queries.expand(summary_ids, query=query, max_depth=max_depth, token_cap=token_cap,
                                   session_key=session_key, conversation_id=conversation_id,
                                   all_conversations=all_conversations)  # fmt: skip

    def expand_query(
        self,
        prompt: str,
        *,
        query: str | None = None,
        summary_ids: Sequence[str] | None = None,
        max_tokens: int | None = None,
        session_key: SessionKeys = None,
        conversation_id: int | None = None,
        all_conversations: bool = False,
        token_cap: int | None = None,
        timeout_ms: int | None = None,
    ) -> ExpandQueryResult:
        """Answer a focused question from expanded sources (LLM loop, or extractive without one).

        ``max_tokens`` bounds the answer, ``token_cap`` (at most ``maxExpandTokens``) the source
        tokens read, ``timeout_ms`` (at most ``delegationTimeoutMs``) the time the LLM may take.
        """
        return self.queries.expand_query(prompt, query=query, summary_ids=summary_ids, max_tokens=max_tokens,
                                         session_key=session_key, conversation_id=conversation_id,
                                         all_conversations=all_conversations, token_cap=token_cap,
                                         timeout_ms=timeout_ms)  # fmt: skip

    # -- operations --------------------------------------------------------------------------------
    def status(self) -> StatusReport:
        """Counts, the version, the last failure (kept across restarts), the debt owed, and the
        lossless-claw config keys accepted but ignored."""
        report = status(self.db, self.files)
        embedding = self.semantic.status()
        debt = report.debt
        if debt is not None and embedding.model_id is not None:
            debt = dataclasses.replace(debt, embedding=embedding.debt)
        if debt is not None:
            with sqlite_only(self.db, "status").reading() as c:
                debt = dataclasses.replace(debt, trigram=pending_count(c))
        return dataclasses.replace(report, embedding=embedding, debt=debt,
                                   ignored_keys=list(self.config.ignored_keys), enabled=self.config.enabled,
                                   engine="sqlite", event_log=_path_or_none(self.events.path))  # fmt: skip

    def embed_pending(self, *, limit: int | None = None, deadline_s: float | None = None) -> EmbedReport:
        """Embed the messages and summaries semantic recall cannot see yet (off the ingest path).

        Batched and resumable: each batch is stored in its own transaction, so a killed run
        loses at most one batch and the next run embeds only what has no vector.

        Raises:
            EmbedderMissingError: the store was opened without an embedder.
        """
        return self.upkeep.embed_pending(limit=limit, deadline_s=deadline_s)

    def index_trigrams(self, *, limit: int | None = None, deadline_s: float | None = None) -> int:
        """Pay the trigram debt ingest left (``lcm.trigram``); the number of messages indexed.

        Batched and resumable like :meth:`embed_pending`: each batch commits with the
        watermark, so a killed run leaves the index exact and the next run carries on. A server
        keeps its trigram index current inline: nothing to pay there (0 indexed).
        """
        return self.upkeep.index_trigrams(limit=limit, deadline_s=deadline_s)

    def doctor(self, *, top: int = 10) -> DoctorReport:
        """Read-only integrity checks, and the ``top`` worst conversations ranked by severity
        (findings, recorded failures, compaction debt, context size: ``lcm.health``).

        Raises:
            LcmValidationError: ``top`` is not an integer >= 0.
        """
        if isinstance(top, bool) or not isinstance(top, int) or top < 0:
            raise LcmValidationError(f"top must be an integer >= 0; got {top!r}", field="top")
        return doctor(self.db, self.files, top=top)

    def doctor_clean(self, *, apply: bool = False) -> CleanReport:
        """Report of high-confidence cleanup candidates (archived subagent and cron
        conversations, archived ones without a session key, empty ones, large files no row
        names, the ``.tmp`` files of large-file writes killed at their rename); nothing is
        deleted but, with ``apply``, those ``.tmp`` files (``removed_files``)."""
        return doctor_clean(self.db, self.files, apply=apply)

    def apply_retention(self, *, dry_run: bool = False) -> RetentionResult:
        """Apply ``retentionArchivedMaxAgeDays`` and ``retentionMaxDatabaseBytes`` (0 disables each)."""
        return self.upkeep.apply_retention(dry_run=dry_run)

    def after_turn(self, session_key: str) -> CompactionResult | None:
        """Pay the deferred compaction debt of ``session_key``'s active conversation after a turn
        (lossless-claw's afterTurn), so it does not wait for the nightly :meth:`maintenance`.

        It first indexes up to ``lcm.trigram.PAY_CHUNK`` messages of the trigram debt ingest left.
        Bounded like one nightly payment: a single sweep under ``sweepDeadlineMs`` and
        ``maxSweepIterations``. Returns ``None`` when nothing is owed; a failure is kept on the
        debt row (``failed``, paid again by the next turn or night) and comes back as a result
        with reason ``debt-failed`` and the error in ``warnings``, never raised: the turn is stored.
        """
        return self.upkeep.after_turn(session_key)

    def maintenance(self) -> MaintenanceResult:
        """Pay compaction debt of every active conversation, apply retention, pay the trigram and
        embedding debt (nightly job)."""
        return self.upkeep.maintenance()


def _path_or_none(path: Path | None) -> str | None:
    return None if path is None else str(path)
