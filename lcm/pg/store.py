"""PgLcmStore: :class:`lcm.LcmStore` on a PostgreSQL server; what is not ported yet raises, naming itself."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from amem.kernel.clock import Clock, SystemClock
from amem.kernel.llm import TextLLM
from lcm.config import LcmConfig
from lcm.convlock import compaction_wait_s
from lcm.errors import LcmValidationError, UnsupportedOnEngineError
from lcm.events import EventLog
from lcm.normalize import normalize_messages
from lcm.largefiles import open_file_store
from lcm.models import DoctorReport, IngestResult, StatusReport
from lcm.pg.assemble import PgAssembler
from lcm.pg.db import LOCK_COMPACTION, LOCK_CONVERSATION, LOCK_SESSION, PgDatabase, lock_key
from lcm.ops import doctor as ops_doctor
from lcm.ops import status as ops_status
from lcm.pg.ingest import refuse_files_without_dir, store_messages_pg
from lcm.pg.schema import applied_pg_migrations, migrate_pg
from lcm.pg.search import pg_grep
from lcm.pg.semantic import PgSemanticIndex
from lcm.sessions import check_title, resolve_conversation
from lcm.store import LcmStore
from lcm.vectors import TextEmbedder

__all__ = ["PgLcmStore", "PORTED"]

log = logging.getLogger(__name__)

#: the public methods of LcmStore that work on PostgreSQL today; every other one raises
#: UnsupportedOnEngineError naming itself (a test walks LcmStore's methods to keep this honest)
PORTED = frozenset({"close", "conversation", "conversations", "ingest", "grep", "session_keys", "reset", "new_context",
                    "compact", "compact_until_under", "after_turn", "assemble", "describe", "expand", "expand_query",
                    "status", "apply_retention", "maintenance", "doctor", "doctor_clean", "index_trigrams",
                    "embed_pending", "place_before"})
_ENGINE = "postgresql"


def _no_trigram_debt(*, limit: int | None, deadline_s: float | None) -> int:
    """Nothing to pay: the server keeps its pg_trgm GIN index current inline (0 indexed)."""
    return 0


def _autovacuum_reclaims() -> None:
    """Retention's reclaim step: the server's autovacuum reclaims the space (``size_after``
    shrinks only once it has run)."""


def _unsupported(operation: str) -> NoReturn:
    raise UnsupportedOnEngineError(
        f"lcm: {operation} is not available on PostgreSQL yet (works today: {', '.join(sorted(PORTED))}); "
        "use a SQLite store for it", operation=operation, engine=_ENGINE)  # fmt: skip


class PgLcmStore(LcmStore, url_schemes=("postgresql", "postgres")):
    """An :class:`LcmStore` whose database is a PostgreSQL server (``LcmStore("postgresql://...")``).

    Large payloads go to ``config.large_files_dir`` (a directory every host must share); with
    none configured, a message over the large-file threshold is refused, not kept in a
    temporary directory that would vanish.
    """

    #: ingest's rows go in by COPY (False: executemany; the benchmark measures both in one run)
    _copy_ingest = True
    #: the server's handle (LcmStore's parts take any lcm.conn.Handle; the steps here use its
    #: advisory locks and COPY)
    db: PgDatabase

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
        cfg = config or self._from_env or LcmConfig()  # LcmStore(): the CLI's settings
        url = str(path) if path is not None else cfg.database_path
        if path is not None and cfg.database_path and str(path) != cfg.database_path:
            raise ValueError(f"path {path!r} contradicts config.database_path {cfg.database_path!r}")
        if embedder is not None and not isinstance(embedder, TextEmbedder):
            raise ValueError("embedder must have model_id, dim and embed(texts, kind)")
        self.config = cfg
        self.clock = clock or SystemClock()
        self.llm = llm
        self.db = PgDatabase(url)
        try:
            migrate_pg(self.db, self._now())
        except BaseException:
            self.db.close()
            raise
        # no data directory every host shares: without largeFilesDir a temporary one (ingest
        # refuses a large payload then, rather than keep it where other hosts cannot read it)
        self.files, self._tmpdir = open_file_store(cfg.large_files_dir, None)
        self.events = EventLog(cfg.log_file or None if cfg.log_file_enabled else None, self.clock,
                               cfg.log_max_file_bytes, cfg.log_retention_days)  # fmt: skip
        # the parts run lcm's shared SQL through the PostgreSQL handle (lcm.pg.db.translate)
        db = self.db
        try:
            self._build_parts(PgSemanticIndex(db, cfg, embedder), expansion_llm,
                              compaction_lock=lambda conv_id: db.advisory_lock(
                                  LOCK_COMPACTION, lock_key(str(conv_id)), wait_s=compaction_wait_s(cfg),
                                  what=f"the compaction lock of conversation {conv_id}"),
                              trigrams=_no_trigram_debt, size_of=db.size_bytes, reclaim=_autovacuum_reclaims,
                              text_grep=functools.partial(pg_grep, db, cfg))  # grep modes full_text and regex
        except BaseException:
            # a part refusing its config (summaryPromptsDir) must not leak the pool
            self.close()
            raise
        # the shared assembly, its context statement kept off parallel plans (lcm.pg.assemble)
        self.assembler = PgAssembler(db, cfg, self.clock, self.scopes, self.compaction)
        self.semantic.bind(self._now(), switch=switch_embedder)

    def ingest(
        self, session_key: str | None, messages: Sequence[Mapping[str, Any]], *, session_id: str | None = None,
        title: str | None = None,
    ) -> IngestResult:
        """:meth:`LcmStore.ingest`, safe for several processes writing one conversation at once.

        Each batch is one transaction holding two advisory locks (the session, then the
        conversation), so a concurrent writer waits and then sees this batch as already stored.
        """
        if not self.config.enabled:
            return IngestResult(None, 0, 0, ignored=True)
        mode = self.scopes.session_mode(session_key)
        if mode != "normal":
            return IngestResult(None, 0, 0, ignored=mode == "ignored", stateless=mode == "stateless")
        now = self._now()
        batch = normalize_messages(messages, now, session_id=session_id)
        check_title(title)
        for field, text in [("session_key", session_key), ("session_id", session_id), ("title", title),
                            *((f"messages[{i}]", v) for i, m in enumerate(batch)
                              for v in (m.content, m.stable_event_key, m.name))]:  # fmt: skip
            if text is not None and "\x00" in text:
                raise LcmValidationError(f"{field} contains a NUL character (U+0000), which PostgreSQL text cannot "
                                         "hold; nothing was stored", field=field)  # fmt: skip
        if self._tmpdir is not None:
            refuse_files_without_dir(batch, self.config.large_file_threshold_tokens,
                                     lambda i, _: (f"messages[{i}]", f"messages[{i}]"), "this batch")
        if session_key is None and session_id is None:
            raise LcmValidationError("need a session_key or a session_id", field="session_key")
        name = f"key:{session_key}" if session_key is not None else f"id:{session_id}"
        with self.db.atomic() as c:
            c.execute("SELECT pg_advisory_xact_lock(?::int4, ?::int4)", (LOCK_SESSION, lock_key(name)))
            conv_id, created, archived = resolve_conversation(c, session_key, session_id, now, title)
            c.execute("SELECT pg_advisory_xact_lock(?::int4, ?::int4)", (LOCK_CONVERSATION, lock_key(str(conv_id))))
            ids, skipped, file_ids = store_messages_pg(c, conv_id, batch, self.config, self.files, now,
                                                       copy=self._copy_ingest)  # fmt: skip
        if ids or created:
            self.events.write("ingest", conversation_id=conv_id, stored=len(ids), skipped=skipped, files=file_ids)
        return IngestResult(conv_id, len(ids), skipped, ids, file_ids, new_conversation=created, archived_conversation_id=archived)

    def status(self) -> StatusReport:
        """:meth:`LcmStore.status` with the server's database size (no trigram debt: the server
        indexes inline)."""
        db = self.db
        report = ops_status(self.db, self.files, size_bytes=db.size_bytes(), migrations=applied_pg_migrations(db))
        embedding = self.semantic.status()
        debt = report.debt
        if debt is not None and embedding.model_id is not None:
            debt = dataclasses.replace(debt, embedding=embedding.debt)
        # no largeFilesDir: say none, not the temporary directory standing in for it
        files_dir = None if self._tmpdir is not None else report.large_files_dir
        event_log = None if self.events.path is None else str(self.events.path)
        return dataclasses.replace(report, embedding=embedding, debt=debt, ignored_keys=list(self.config.ignored_keys),
                                   enabled=self.config.enabled, engine="postgresql", large_files_dir=files_dir,
                                   event_log=event_log)  # fmt: skip

    def doctor(self, *, top: int = 10) -> DoctorReport:
        """:meth:`LcmStore.doctor` without the SQLite file's own checks (``sqlite_quick_check``,
        ``fts_out_of_sync``, ``rows_out_of_time_order``): the server keeps its pages and indexes;
        those keys are absent. Without ``largeFilesDir`` the files are not checked (a warning)."""
        if isinstance(top, bool) or not isinstance(top, int) or top < 0:
            raise LcmValidationError(f"top must be an integer >= 0; got {top!r}", field="top")
        return ops_doctor(self.db, self.files, top=top, sqlite_checks=False, files_configured=self._tmpdir is None)


def _raiser(name: str) -> Callable[..., NoReturn]:
    def method(self: PgLcmStore, *args: Any, **kwargs: Any) -> NoReturn:
        _unsupported(name)

    method.__name__ = name
    method.__doc__ = f"Not available on PostgreSQL yet: raises UnsupportedOnEngineError (operation {name!r})."
    return method


# Every public method of LcmStore not ported (including ones added later) raises by name.
for _name in dir(LcmStore):
    if not _name.startswith("_") and _name not in PORTED and callable(getattr(LcmStore, _name)):
        setattr(PgLcmStore, _name, _raiser(_name))
