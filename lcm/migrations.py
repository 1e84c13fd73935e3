"""Schema migrations: a registry of named functions, each applied in its own transaction with its record row."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from lcm.db import Database
from lcm.errors import SchemaTooNewError

log = logging.getLogger(__name__)

__all__ = ["MIGRATIONS", "migrate", "applied_migrations"]

Migration = Callable[[sqlite3.Connection], None]
#: bytes of pending trigram terms FTS5 holds before it writes a segment (migration 0011)
TRIGRAM_HASHSIZE = 32 * 2**20
MIGRATIONS: dict[str, Migration] = {}


def migration(name: str) -> Callable[[Migration], Migration]:
    """Register ``fn`` under ``name``; names are applied in registration order, once."""

    def wrap(fn: Migration) -> Migration:
        if name in MIGRATIONS:
            raise ValueError(f"duplicate migration name {name!r}")
        MIGRATIONS[name] = fn
        return fn

    return wrap


def _script(c: sqlite3.Connection, sql: str) -> None:
    """Run several statements one by one: executescript() would COMMIT the open transaction."""
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            c.execute(buf)
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf[:80]!r}")


@migration("0001_core_tables")
def _core(c: sqlite3.Connection) -> None:
    _script(c, 
        """
        CREATE TABLE conversations (
            id            INTEGER PRIMARY KEY,
            session_key   TEXT,
            session_id    TEXT,
            active        INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
            archived_at   TEXT,
            archive_cause TEXT,
            title         TEXT,
            created_at    TEXT NOT NULL,
            updated_at    TEXT NOT NULL
        );
        -- One active row per session key: reset archives before it opens a new one.
        CREATE UNIQUE INDEX conversations_one_active ON conversations(session_key)
            WHERE active = 1 AND session_key IS NOT NULL;
        CREATE INDEX conversations_session_id ON conversations(session_id);

        CREATE TABLE messages (
            id               INTEGER PRIMARY KEY,
            conversation_id  INTEGER NOT NULL REFERENCES conversations(id),
            seq              INTEGER NOT NULL,
            role             TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content          TEXT NOT NULL,
            token_count      INTEGER NOT NULL,
            identity_hash    TEXT NOT NULL,
            stable_event_key TEXT,
            file_id          TEXT,
            created_at       TEXT NOT NULL,
            UNIQUE (conversation_id, seq)
        );
        CREATE UNIQUE INDEX messages_stable_key ON messages(conversation_id, stable_event_key)
            WHERE stable_event_key IS NOT NULL;
        CREATE INDEX messages_identity ON messages(conversation_id, identity_hash);
        CREATE INDEX messages_created ON messages(created_at);

        CREATE TABLE summaries (
            pk                          INTEGER PRIMARY KEY,
            summary_id                  TEXT NOT NULL UNIQUE,
            conversation_id             INTEGER NOT NULL REFERENCES conversations(id),
            kind                        TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
            depth                       INTEGER NOT NULL,
            content                     TEXT NOT NULL,
            token_count                 INTEGER NOT NULL,
            earliest_at                 TEXT NOT NULL,
            latest_at                   TEXT NOT NULL,
            descendant_count            INTEGER NOT NULL,
            descendant_token_count      INTEGER NOT NULL,
            source_message_token_count  INTEGER NOT NULL,
            model                       TEXT NOT NULL,
            status                      TEXT NOT NULL DEFAULT 'ok'
                                        CHECK (status IN ('ok', 'fallback', 'truncated')),
            created_at                  TEXT NOT NULL
        );
        CREATE INDEX summaries_conversation ON summaries(conversation_id, depth);

        -- Leaf summary -> the messages it covers, in order.
        CREATE TABLE summary_messages (
            summary_id TEXT NOT NULL,
            message_id INTEGER NOT NULL,
            ordinal    INTEGER NOT NULL,
            PRIMARY KEY (summary_id, ordinal)
        );
        CREATE INDEX summary_messages_message ON summary_messages(message_id);

        -- Condensed summary -> the lower-depth summaries it was built from, in order.
        -- (lossless-claw calls the sources "parents"; describe() follows it: parent_ids.)
        CREATE TABLE summary_parents (
            summary_id        TEXT NOT NULL,
            parent_summary_id TEXT NOT NULL,
            ordinal           INTEGER NOT NULL,
            PRIMARY KEY (summary_id, ordinal)
        );
        CREATE INDEX summary_parents_parent ON summary_parents(parent_summary_id);

        -- What the model sees, in order. Ordinals may have gaps after compaction.
        CREATE TABLE context_items (
            conversation_id INTEGER NOT NULL,
            ordinal         INTEGER NOT NULL,
            item_type       TEXT NOT NULL CHECK (item_type IN ('message', 'summary')),
            message_id      INTEGER,
            summary_id      TEXT,
            PRIMARY KEY (conversation_id, ordinal),
            CHECK ((item_type = 'message') = (message_id IS NOT NULL)),
            CHECK ((item_type = 'summary') = (summary_id IS NOT NULL))
        );

        CREATE TABLE large_files (
            file_id             TEXT PRIMARY KEY,
            conversation_id     INTEGER NOT NULL,
            message_id          INTEGER,
            name                TEXT NOT NULL,
            mime_type           TEXT NOT NULL,
            size_bytes          INTEGER NOT NULL,
            token_count         INTEGER NOT NULL,
            storage_path        TEXT NOT NULL,
            exploration_summary TEXT NOT NULL,
            created_at          TEXT NOT NULL
        );

        -- Deferred compaction: one coalesced row per conversation.
        CREATE TABLE compaction_debt (
            conversation_id INTEGER PRIMARY KEY,
            reason          TEXT NOT NULL,
            token_budget    INTEGER NOT NULL,
            status          TEXT NOT NULL CHECK (status IN ('pending', 'running', 'failed')),
            last_error      TEXT,
            created_at      TEXT NOT NULL,
            updated_at      TEXT NOT NULL
        );
        """
    )


def _fts(c: sqlite3.Connection, table: str, content: str, rowid: str, tokenize: str) -> None:
    c.execute(
        f"CREATE VIRTUAL TABLE {table} USING fts5(content, content='{content}', "
        f"content_rowid='{rowid}', tokenize='{tokenize}')"
    )
    _script(c, 
        f"""
        CREATE TRIGGER {table}_ai AFTER INSERT ON {content} BEGIN
            INSERT INTO {table}(rowid, content) VALUES (new.{rowid}, new.content);
        END;
        CREATE TRIGGER {table}_ad AFTER DELETE ON {content} BEGIN
            INSERT INTO {table}({table}, rowid, content) VALUES ('delete', old.{rowid}, old.content);
        END;
        CREATE TRIGGER {table}_au AFTER UPDATE OF content ON {content} BEGIN
            INSERT INTO {table}({table}, rowid, content) VALUES ('delete', old.{rowid}, old.content);
            INSERT INTO {table}(rowid, content) VALUES (new.{rowid}, new.content);
        END;
        """
    )


@migration("0002_full_text")
def _full_text(c: sqlite3.Connection) -> None:
    # unicode61+porter for words; trigram so CJK text (no spaces between words) is searchable.
    _fts(c, "messages_fts", "messages", "id", "porter unicode61 remove_diacritics 2")
    _fts(c, "messages_tri", "messages", "id", "trigram")
    _fts(c, "summaries_fts", "summaries", "pk", "porter unicode61 remove_diacritics 2")
    _fts(c, "summaries_tri", "summaries", "pk", "trigram")


#: ``lcm_time_order`` rows: a table whose row ids stopped following its time column
TIME_ORDER_TABLES = {"messages": ("id", "created_at"), "summaries": ("pk", "latest_at")}


@migration("0003_time_order")
def _time_order(c: sqlite3.Connection) -> None:
    # grep's newest-first shortcut reads the highest row ids first, which is only right while
    # row ids follow time. An import of old messages, or a summary of an older span written
    # after a newer one, breaks that; these triggers remember it (one index lookup a row).
    c.execute("CREATE INDEX summaries_latest ON summaries(latest_at)")
    c.execute("CREATE TABLE lcm_time_order (name TEXT PRIMARY KEY, out_of_order INTEGER NOT NULL)")
    for table, (rowid, col) in TIME_ORDER_TABLES.items():
        c.execute(
            f"CREATE TRIGGER {table}_time_order AFTER INSERT ON {table} "
            f"WHEN new.{col} < (SELECT max({col}) FROM {table}) BEGIN "
            f"INSERT OR REPLACE INTO lcm_time_order(name, out_of_order) VALUES ('{table}', 1); END"
        )
        # rows stored before this migration: one ordered pass with a running maximum
        late = c.execute(
            f"SELECT 1 FROM (SELECT {col} AS at, max({col}) OVER (ORDER BY {rowid} "
            f"ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before FROM {table}) "
            "WHERE at < before LIMIT 1"
        ).fetchone()
        if late:
            c.execute("INSERT INTO lcm_time_order(name, out_of_order) VALUES (?, 1)", (table,))


@migration("0004_semantic_vectors")
def _semantic_vectors(c: sqlite3.Connection) -> None:
    # One int8 vector per message and per summary (lcm.semantic), tagged with the model that
    # made it: a model change leaves the old vectors in place, unsearched, until re-embedded.
    # What is pending is whatever has no vector of the current model, so ingest writes nothing
    # here; the triggers drop a vector with its item (retention) or when its text changes.
    c.execute("CREATE TABLE lcm_embedder (id INTEGER PRIMARY KEY CHECK (id = 1), model_id TEXT NOT NULL, "
              "dim INTEGER NOT NULL, previous_model_id TEXT, changed_at TEXT NOT NULL)")
    for vec, table, key, rowid in (("message_vectors", "messages", "message_id", "id"),
                                   ("summary_vectors", "summaries", "summary_pk", "pk")):
        c.execute(f"CREATE TABLE {vec} ({key} INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL, "
                  "model_id TEXT NOT NULL, scale REAL NOT NULL, vector BLOB NOT NULL)")
        c.execute(f"CREATE INDEX {vec}_scope ON {vec}(model_id, conversation_id)")
        c.execute(f"CREATE TRIGGER {vec}_ad AFTER DELETE ON {table} BEGIN "
                  f"DELETE FROM {vec} WHERE {key} = old.{rowid}; END")
        c.execute(f"CREATE TRIGGER {vec}_au AFTER UPDATE OF content ON {table} BEGIN "
                  f"DELETE FROM {vec} WHERE {key} = old.{rowid}; END")


@migration("0005_failure_log")
def _failure_log(c: sqlite3.Connection) -> None:
    # The newest failures of lcm's own work (lcm.failures), so status names the last one after a
    # restart; kept to the newest hundred rows by each write.
    c.execute("CREATE TABLE lcm_failures (id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL, "
              "conversation_id INTEGER, reason TEXT NOT NULL)")


@migration("0006_batched_message_index")
def _batched_message_index(c: sqlite3.Connection) -> None:
    # Ingest feeds both message indexes itself, one executemany per batch (lcm.ingest): fed by
    # the insert triggers, FTS5 flushed a segment per row (4x slower). The triggers stay for
    # every other writer and stand aside only while ingest's own transaction holds this flag.
    c.execute("CREATE TABLE lcm_index_deferred (id INTEGER PRIMARY KEY CHECK (id = 1))")
    for table in ("messages_fts", "messages_tri"):
        c.execute(f"DROP TRIGGER {table}_ai")
        c.execute(
            f"CREATE TRIGGER {table}_ai AFTER INSERT ON messages "
            "WHEN NOT EXISTS (SELECT 1 FROM lcm_index_deferred) BEGIN "
            f"INSERT INTO {table}(rowid, content) VALUES (new.id, new.content); END"
        )


@migration("0007_deferred_trigrams")
def _deferred_trigrams(c: sqlite3.Connection) -> None:
    # The message trigram index leaves ingest's path (lcm.trigram): messages above the watermark
    # wait for a payment. The triggers keep the rule "indexed exactly when id <= upto": another
    # writer's insert is indexed (and moves the mark) only when nothing is pending below it, and
    # a delete or an edit touches the index only for a row that is in it.
    c.execute("CREATE TABLE lcm_trigram_indexed (id INTEGER PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL)")
    c.execute("INSERT INTO lcm_trigram_indexed(id, upto) SELECT 1, coalesce(max(id), 0) FROM messages")
    upto = "(SELECT upto FROM lcm_trigram_indexed)"
    for suffix in ("ai", "ad", "au"):
        c.execute(f"DROP TRIGGER messages_tri_{suffix}")
    _script(c, f"""
        CREATE TRIGGER messages_tri_ai AFTER INSERT ON messages
        WHEN NOT EXISTS (SELECT 1 FROM lcm_index_deferred) AND new.id <= {upto} + 1 BEGIN
            INSERT INTO messages_tri(rowid, content) VALUES (new.id, new.content);
            UPDATE lcm_trigram_indexed SET upto = max(upto, new.id);
        END;
        CREATE TRIGGER messages_tri_ad AFTER DELETE ON messages WHEN old.id <= {upto} BEGIN
            INSERT INTO messages_tri(messages_tri, rowid, content) VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER messages_tri_au AFTER UPDATE OF content ON messages WHEN old.id <= {upto} BEGIN
            INSERT INTO messages_tri(messages_tri, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO messages_tri(rowid, content) VALUES (new.id, new.content);
        END;
        """)


@migration("0008_token_counts")
def _token_counts(c: sqlite3.Connection) -> None:
    # PostgreSQL only (lcm.pg.bm25): FTS5 keeps each row's token count for bm25() itself; the
    # PostgreSQL twin stores it so its relevance score is the same BM25.
    del c


@migration("0009_trigram_totals")
def _trigram_totals(c: sqlite3.Connection) -> None:
    # PostgreSQL only (lcm.pg.bm25): FTS5's trigram index keeps its own token total for
    # bm25(messages_tri); the PostgreSQL twin keeps one so CJK relevance is the same BM25.
    del c


@migration("0010_conversation_time_order")
def _conversation_time_order(c: sqlite3.Connection) -> None:
    # PostgreSQL only (lcm.pg.newest): a conversation's messages newest first from an index;
    # SQLite's grep reads FTS5 matches and its newest-first shortcut (lcm.newest) instead.
    del c


@migration("0011_trigram_flush_size")
def _trigram_flush_size(c: sqlite3.Connection) -> None:
    # The trigram debt is paid a large range per transaction (lcm.trigram: up to 100k messages
    # inline). FTS5 flushes its in-memory terms as a new segment every 1 MB by default and then
    # merges those small segments again and again; 32 MB per flush (FTS5's 'hashsize', kept in
    # messages_tri_config) paid 1M messages in 7.6 instead of 12.0 CPU-seconds (benchmarks/RESULTS.md)
    # with the same answers. Memory: a payment holds up to this much pending index in RAM.
    c.execute("INSERT INTO messages_tri(messages_tri, rank) VALUES ('hashsize', ?)", (TRIGRAM_HASHSIZE,))


@migration("0012_ingest_batches")
def _ingest_batches(c: sqlite3.Connection) -> None:
    # The batches of anonymous messages a conversation took lately (lcm.resend): the same batch
    # again within resendWindowSeconds is a host's retry, even after other hosts' messages.
    c.execute("CREATE TABLE lcm_ingest_batches (conversation_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, "
              "seen_at TEXT NOT NULL, PRIMARY KEY (conversation_id, fingerprint))")


@migration("0013_debt_telemetry")
def _debt_telemetry(c: sqlite3.Connection) -> None:
    # What the host said when the debt was recorded (lossless-claw keeps it on the row): its
    # provider and model, and the prompt cache it reported, so an operator can tell a debt
    # recorded under a warm cache (compacting would cost it) from a cold one.
    for column in ("model TEXT", "provider TEXT", "cache_read_tokens INTEGER", "cache_write_tokens INTEGER"):
        c.execute(f"ALTER TABLE compaction_debt ADD COLUMN {column}")


@migration("0014_message_speakers")
def _message_speakers(c: sqlite3.Connection) -> None:
    # What a message said about itself beyond its role and text: the host's ``name`` (the
    # speaker of a multi-party chat, a tool's name) and the role as the host spelled it when it
    # is not the stored one ("developer" is stored as system): both were dropped at ingest.
    c.execute("ALTER TABLE messages ADD COLUMN name TEXT")
    c.execute("ALTER TABLE messages ADD COLUMN source_role TEXT")


def applied_migrations(db: Database) -> list[str]:
    with db.reading() as c:
        c.execute("CREATE TABLE IF NOT EXISTS lcm_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        return [r[0] for r in c.execute("SELECT name FROM lcm_migrations ORDER BY rowid")]


def migrate(db: Database, now_iso: str) -> list[str]:
    """Apply every registered migration not yet recorded; return the names applied.

    Raises:
        SchemaTooNewError: the file records migrations this code does not know: newer code
            migrated it, and writing it with this code's older schema would lose what they
            added (``lcm.pg.schema`` refuses such a database the same way).
    """
    recorded = applied_migrations(db)
    unknown = [name for name in recorded if name not in MIGRATIONS]
    if unknown:
        raise SchemaTooNewError(
            f"lcm: the conversation store {db.path} was migrated by a newer amem (unknown "
            f"migrations: {', '.join(unknown)}); upgrade amem on this host, or open the "
            "store with the version that migrated it", unknown=unknown)
    done = set(recorded)
    applied = []
    for name, fn in MIGRATIONS.items():
        if name in done:
            continue
        with db.atomic() as c:
            # Re-check inside the write lock: another process may have migrated meanwhile.
            if c.execute("SELECT 1 FROM lcm_migrations WHERE name = ?", (name,)).fetchone():
                continue
            fn(c)
            c.execute("INSERT INTO lcm_migrations(name, applied_at) VALUES (?, ?)", (name, now_iso))
        log.info("lcm: applied migration %s", name)
        applied.append(name)
    return applied
