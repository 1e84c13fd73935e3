"""The PostgreSQL handle of lcm: a psycopg 3 pool, the dialect adapter, and the same atomic() as SQLite."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from lcm.convlock import wait_for
from lcm.errors import (LcmEngineError, LcmValidationError, StoreBusyError, StoreUnavailableError,
                        UnsupportedOnEngineError)
from lcm.pg.probe import probe, unreachable_reason
from lcm.pg.url import is_postgres_url, redact_url

__all__ = ["PgDatabase", "PgRow", "row_class", "translate", "redact_url", "is_postgres_url", "lock_key"]

#: tables whose integer key the server assigns (an identity column): an INSERT into one of
#: them without RETURNING gets ``RETURNING <key>`` so ``cursor.lastrowid`` works as on SQLite
_KEYED = {"conversations": "id", "messages": "id", "summaries": "pk", "lcm_failures": "id"}
_INSERT = re.compile(r"^\s*INSERT\s+(OR\s+(IGNORE|REPLACE)\s+)?INTO\s+(\w+)", re.IGNORECASE)
#: advisory lock classes (the first of the two int4 keys), so lcm's locks never meet each other's
LOCK_MIGRATE, LOCK_SESSION, LOCK_CONVERSATION, LOCK_COMPACTION = 1, 2, 3, 4
#: one embedding run at a time per database (lcm.pg.semantic)
LOCK_EMBED = 5

#: seconds a call waits for a pooled connection before asking whether the server is there
_FIRST_WAIT_S = 1.0
#: seconds a call waits for a pooled connection in all, while the server answers
_POOL_WAIT_S = 30.0


def lock_key(text: str) -> int:
    """A stable signed 32-bit key for an advisory lock on a name (same in every process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big", signed=True)


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """SQLite's dialect as lcm writes it -> PostgreSQL's: the few differences lcm's shared SQL has.

    ``?`` -> ``%s`` outside string literals (a literal ``%`` doubles), ``INSERT OR IGNORE`` ->
    ``ON CONFLICT DO NOTHING``, ``char(n)`` -> ``chr(n)``, ``instr(a, b)`` -> ``strpos(a, b)``, ``WHERE 1`` -> ``WHERE TRUE``.
    Anything SQLite-only that is not
    rewritten here (``INSERT OR REPLACE``, ``PRAGMA``, FTS5 ``MATCH``) is refused by name rather
    than sent to the server to fail obscurely.
    """
    m = _INSERT.match(sql)
    if m and m.group(2) and m.group(2).upper() == "REPLACE":
        raise UnsupportedOnEngineError(
            "INSERT OR REPLACE has no PostgreSQL translation; write an explicit ON CONFLICT upsert",
            operation="INSERT OR REPLACE", engine="postgresql")  # fmt: skip
    upper = sql.upper()
    for word in ("PRAGMA", " MATCH ", "SQLITE_MASTER", "BM25("):
        if word in upper:
            raise UnsupportedOnEngineError(f"SQLite-only SQL ({word.strip()}) sent to PostgreSQL: {sql[:120]!r}",
                                           operation=word.strip(), engine="postgresql")  # fmt: skip
    out: list[str] = []
    quoted = False
    for ch in sql:
        if ch == "'":
            quoted = not quoted  # '' inside a literal flips twice: still right
        if ch == "?" and not quoted:
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    text = re.sub(r"\binstr\(", "strpos(", re.sub(r"\bchar\(", "chr(", "".join(out)))
    text = re.sub(r"\bWHERE 1(?=\s|$)", "WHERE TRUE", text)  # SQLite's "always" (an integer) is no boolean here
    if m and m.group(1):
        text = _INSERT.sub(lambda x: f"INSERT INTO {x.group(3)}", text, count=1).rstrip().rstrip(";")
        text += " ON CONFLICT DO NOTHING"
    return text


class PgRow(tuple):  # type: ignore[type-arg]
    """A result row readable by position and by column name, like ``sqlite3.Row``.

    Each column list has its own subclass holding the name index (:func:`row_class`), so a row
    is built by tuple's own constructor and carries no ``__dict__``: building rows through a
    Python ``__new__`` that stored the index on each was about a quarter of a 1,000-row read.
    """

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}
    _names: ClassVar[tuple[str, ...]] = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


@functools.lru_cache(maxsize=512)
def row_class(names: tuple[str, ...]) -> type[PgRow]:
    """The :class:`PgRow` subclass of one column list; cached, since lcm sends a few dozen
    distinct statements. A repeated name reads its first column and ``keys()`` lists every
    column, as ``sqlite3.Row`` does (the last column and the distinct names before), so a
    ``SELECT a.*, b.*`` reads the same on both engines."""
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)
    return type("PgRow", (PgRow,), {"__slots__": (), "_index": index, "_names": names})


def _row_factory(cursor: Any) -> Any:
    return row_class(tuple(col.name for col in cursor.description or []))


class PgCursor:
    """The part of ``sqlite3.Cursor`` lcm's shared SQL uses: fetch*, iteration, lastrowid."""

    def __init__(self, cur: Any, lastrowid: int | None = None) -> None:
        self._cur = cur
        self.lastrowid = lastrowid
        self.rowcount: int = cur.rowcount

    def fetchone(self) -> PgRow | None:
        row: PgRow | None = self._cur.fetchone() if self._cur.description else None
        return row

    def fetchall(self) -> list[PgRow]:
        return list(self._cur.fetchall()) if self._cur.description else []

    def fetchmany(self, size: int) -> list[PgRow]:
        return list(self._cur.fetchmany(size))

    def __iter__(self) -> Iterator[PgRow]:
        return iter(self.fetchall())

    def close(self) -> None:
        self._cur.close()


def _no_nul(params: Sequence[Any]) -> None:
    """PostgreSQL text cannot hold U+0000 (SQLite can): refuse it by name instead of a driver error."""
    for p in params:  # a plain loop: this runs for every field of every row ingest sends
        if isinstance(p, str) and "\x00" in p:
            raise LcmValidationError("text with a NUL character (U+0000) cannot be stored or searched on PostgreSQL")


@functools.lru_cache(maxsize=1024)
def _numbered(text: str) -> str:
    """A :func:`translate` result with PostgreSQL's own ``$1, $2, ...`` markers for a raw cursor.

    psycopg parses a query's ``%s`` markers on every call once it has more than 50 parameters
    (its cache stops there), and ingest's re-send and replay probes have 100 to 200: that
    parsing was about 40% of ingest's client CPU. The translation here is cached per text.
    """
    out: list[str] = []
    n = 0
    i = 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair == "%%":
            out.append("%")
            i += 2
        elif pair == "%s":
            n += 1
            out.append(f"${n}")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class PgConnection:
    """A pooled psycopg connection speaking lcm's SQLite dialect through :func:`translate`."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        m = _INSERT.match(sql)
        key = _KEYED.get(m.group(3).lower()) if m else None
        text = translate(sql)
        returning = key is not None and "RETURNING" not in text.upper() and "ON CONFLICT" not in text
        if returning:
            text += f" RETURNING {key}"
        _no_nul(params)
        import psycopg

        cur = psycopg.RawCursor(self.raw, row_factory=_row_factory)
        with _unavailable():
            cur.execute(_numbered(text), list(params))
        lastrowid = None
        if returning:
            row = cur.fetchone()
            lastrowid = None if row is None else int(row[0])
        return PgCursor(cur, lastrowid)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        for r in rows:
            _no_nul(r)
        with _unavailable(), self.raw.cursor() as cur:
            cur.executemany(translate(sql), [list(r) for r in rows])

    def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """``COPY table (columns) FROM STDIN`` of ``rows`` inside the current transaction: one
        stream instead of one statement per row (constraints and indexes apply as for INSERT).
        The names are lcm's own, never a caller's: checked so they cannot carry SQL."""
        for name in (table, *columns):
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                raise ValueError(f"not a plain SQL name: {name!r}")
        for r in rows:
            _no_nul(r)
        with _unavailable(), self.raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)


def _numbers_as_python(conn: Any) -> None:
    """Read ``numeric`` as ``int`` (or ``float`` when it has a fraction), as SQLite answers.

    lcm stores integers and reals only, but PostgreSQL's ``sum()`` of a bigint is a
    ``numeric``, which psycopg reads as ``Decimal``: status and doctor then served token counts
    as ``Decimal`` to Python callers and as strings in JSON, mixed with ints in one list. One
    loader on every pooled connection fixes each such query, present and future.
    """
    from psycopg.adapt import Loader

    class NumberLoader(Loader):
        def load(self, data: Any) -> int | float:
            text = bytes(data)
            return float(text) if any(ch in text for ch in b".eEN") else int(text)  # N: NaN

    conn.adapters.register_loader("numeric", NumberLoader)


#: what to do about a text whose words make a full-text vector over the server's 1 MB
_TSVECTOR_ADVICE = (" (a message's words make its full-text index entry, a tsvector, over 1 MB: a message over "
                    "largeFileThresholdTokens is kept as a large file instead, so lower that threshold below its size)")


@contextmanager
def _unavailable() -> Iterator[None]:
    """A lost server is a StoreUnavailableError (its transaction was rolled back by the server); a
    value over one of its limits an LcmValidationError; a lock wait it gave up a StoreBusyError."""
    import psycopg

    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        # the role's grants, said as such (it was an "unexpected InsufficientPrivilege" with raw SQL)
        raise LcmEngineError(f"lcm: the database role may not do this: {exc.diag.message_primary} (grant it "
                             "SELECT, INSERT, UPDATE, DELETE on lcm's tables and USAGE on their sequences)") from exc
    except psycopg.errors.ProgramLimitExceeded as exc:
        # a value over one of the server's limits: the input, not a lost server (psycopg counts
        # it among its OperationalErrors); the server rolled the transaction back
        raise LcmValidationError(f"lcm: the PostgreSQL server refused a value over one of its limits: "
                                 f"{exc.diag.message_primary}; nothing of this transaction was stored"
                                 + (_TSVECTOR_ADVICE if "tsvector" in str(exc.diag.message_primary) else "")) from exc
    except psycopg.errors.LockNotAvailable as exc:
        # a lock wait the server gave up (its lock_timeout): another session holds what this one
        # needs, as SQLite's busy wait running out, not a lost server
        raise StoreBusyError(f"lcm: another session held a lock this one waited for past the server's "
                             f"lock_timeout ({exc.diag.message_primary}); nothing of this transaction was "
                             "written: run it again once the other is done", path="") from exc
    except psycopg.OperationalError as exc:
        if isinstance(exc, psycopg.errors.QueryCanceled):
            raise  # a statement_timeout: the caller's deadline, not a lost server
        raise StoreUnavailableError(f"lcm: the PostgreSQL server dropped the connection: {exc}") from exc


class PgDatabase:
    """The PostgreSQL counterpart of :class:`lcm.db.Database`: ``atomic()``, ``reading()``, ``query``.

    One pooled connection per thread for the length of a transaction; a nested ``atomic()`` on
    the same thread is a savepoint on that connection (psycopg's ``transaction()`` nests).
    """

    engine = "postgresql"
    is_memory = False

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What a failed statement raises here (lcm.conn.Handle.errors): the driver's errors, and
        a lost server as :class:`lcm.errors.StoreUnavailableError`."""
        import psycopg

        return (psycopg.Error, StoreUnavailableError)

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 8, connect_timeout_s: float = 10.0) -> None:
        import psycopg_pool

        self.url = url
        self.path = redact_url(url)
        self._local = threading.local()
        self.lock = threading.RLock()  # for code that groups reads under the store's lock
        self._pool = psycopg_pool.ConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, kwargs={"autocommit": True},
            check=psycopg_pool.ConnectionPool.check_connection, name="lcm", configure=_numbers_as_python)  # fmt: skip
        probe(url, self.path, connect_timeout_s)  # a wrong password or database: said now, not retried for 10 s
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailableError(
                f"lcm: cannot reach the PostgreSQL server at {self.path} within {connect_timeout_s:g} s "
                "(is it running, and does the URL name the right host, port, user and database?)"
            ) from exc

    def _checkout(self) -> tuple[Any, Any]:
        """A pooled connection (its context manager, entered, and the connection).

        A server that went away made every call wait the whole 30 s for the pool's retries: after
        a short wait one direct connection tells a server that is gone (raised at once, with
        libpq's reason) from a pool that is only busy (waited on for the rest).
        """
        import psycopg_pool

        ctx = self._pool.connection(timeout=_FIRST_WAIT_S)
        try:
            return ctx, ctx.__enter__()
        except psycopg_pool.PoolTimeout:
            pass
        reason = unreachable_reason(self.url, _FIRST_WAIT_S)
        if reason is not None:
            raise StoreUnavailableError(f"lcm: the PostgreSQL server at {self.path} does not answer ({reason}); "
                                        "nothing was read or written: retry when it is back")
        ctx = self._pool.connection(timeout=_POOL_WAIT_S - _FIRST_WAIT_S)
        try:
            return ctx, ctx.__enter__()
        except psycopg_pool.PoolTimeout as exc:
            raise StoreUnavailableError(f"lcm: no connection to {self.path} available within {_POOL_WAIT_S:g} s "
                                        "(every pooled connection stayed busy)") from exc

    @contextmanager
    def _connection(self) -> Iterator[PgConnection]:
        current: PgConnection | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        ctx, raw = self._checkout()
        self._local.conn = PgConnection(raw)
        try:
            yield self._local.conn
        except BaseException as exc:
            self._local.conn = None
            ctx.__exit__(type(exc), exc, exc.__traceback__)
            raise
        else:
            self._local.conn = None
            ctx.__exit__(None, None, None)

    @contextmanager
    def atomic(self) -> Iterator[PgConnection]:
        """A write transaction (a savepoint when nested); rolled back on any error, by the server
        too when the connection drops, so a batch is stored whole or not at all."""
        with self._connection() as conn, _unavailable(), conn.raw.transaction():
            yield conn

    @contextmanager
    def reading(self) -> Iterator[PgConnection]:
        """A group of reads in one transaction (so ``SET LOCAL`` and server cursors work)."""
        with self._connection() as conn, _unavailable(), conn.raw.transaction():
            yield conn

    def held(self) -> bool:
        """True when this thread has a connection out (inside ``reading`` or ``atomic``):
        another thread's read would take another connection and not see this transaction."""
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def advisory_lock(self, kind: int, key: int, *, wait_s: float | None = None, what: str = "an advisory lock",
                      ) -> Iterator[None]:  # fmt: skip
        """Hold a session-level advisory lock ``(kind, key)`` for the block, on a connection of its
        own (the block's transactions come and go). Another process asking for it waits; a
        killed holder's session ends and the server releases the lock.

        ``wait_s``: wait at most that long, saying after a few seconds that it waits for
        ``what`` (:func:`lcm.convlock.wait_for`), then raise :class:`lcm.errors.StoreBusyError`;
        None waits as long as the holder holds it, silently.
        """
        ctx, holder = self._checkout()
        try:
            with _unavailable():
                if wait_s is None:
                    holder.execute("SELECT pg_advisory_lock(%s::int4, %s::int4)", [kind, key])
                else:
                    def try_lock() -> bool:
                        row = holder.execute("SELECT pg_try_advisory_lock(%s::int4, %s::int4)", [kind, key]).fetchone()
                        return bool(row[0])

                    wait_for(try_lock, what=what, path=self.path, limit_s=wait_s)
            try:
                yield
            finally:
                with _unavailable():
                    holder.execute("SELECT pg_advisory_unlock(%s::int4, %s::int4)", [kind, key])
        except BaseException as exc:
            ctx.__exit__(type(exc), exc, exc.__traceback__)
            raise
        else:
            ctx.__exit__(None, None, None)

    def size_bytes(self) -> int:
        """The database's size on the server (what ``status`` reports as ``size_bytes``)."""
        return int(self.scalar("SELECT pg_database_size(current_database())"))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[PgRow]:
        with self.reading() as c:
            return c.execute(sql, params).fetchall()

    def one(self, sql: str, params: Sequence[Any] = ()) -> PgRow | None:
        with self.reading() as c:
            return c.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def close(self) -> None:
        self._pool.close()
