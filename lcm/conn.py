"""The connection seam both engines' handles yield: what lcm's shared SQL needs of a connection.

``Database.atomic()`` yields a :class:`sqlite3.Connection`; ``PgDatabase.atomic()`` yields a
:class:`lcm.pg.db.PgConnection` that runs the same SQLite-dialect text on PostgreSQL. A shared
function (ingest's re-send and replay checks, finding a session's conversation) takes either,
so it is typed :class:`Connection`, not ``sqlite3.Connection``; a function that needs SQLite
itself (FTS5, a progress handler, ``PRAGMA``) keeps ``sqlite3.Connection`` and says so by its
type. Rows are read by position or column name (``sqlite3.Row`` and ``PgRow`` both do).
:class:`Handle` is the database handle itself (:class:`lcm.db.Database`,
:class:`lcm.pg.db.PgDatabase`), for the parts of a store that run on both engines.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

__all__ = ["Connection", "Cursor", "Handle", "Row"]


class Row(Protocol):
    """A result row, read by position or by column name (``sqlite3.Row``, ``lcm.pg.db.PgRow``)."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


@runtime_checkable
class Cursor(Protocol):
    """A statement's result: rows as ``sqlite3.Row``-like values, and the written row's id."""

    @property
    def lastrowid(self) -> int | None: ...

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int, /) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class Connection(Protocol):
    """A connection inside one of lcm's transactions, speaking SQLite's dialect (``?`` marks)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], /) -> object: ...


@runtime_checkable
class Handle(Protocol):
    """A store's database handle: one write transaction at a time, grouped reads, one-shot reads."""

    @property
    def path(self) -> str: ...

    @property
    def is_memory(self) -> bool: ...

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """What this engine raises when a statement fails (a full disk, a locked file, a
        read-only or lost server): a caller that must never fail catches these."""
        ...

    def atomic(self) -> AbstractContextManager[Connection]:
        """A write transaction (a savepoint when nested), rolled back on any error."""
        ...

    def reading(self) -> AbstractContextManager[Connection]:
        """A group of reads that see one state."""
        ...

    def held(self) -> bool:
        """True when the calling thread is inside one of this handle's read groups or
        transactions: a read on another thread would then wait for it to end (SQLite's one
        connection) or not see what it wrote (PostgreSQL's connection per thread)."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ..., /) -> list[Any]: ...

    def one(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def scalar(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def close(self) -> None: ...
