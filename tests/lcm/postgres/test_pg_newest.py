"""Newest-first plans on PostgreSQL (lcm.pg.newest): every plan gives the plain query's rows.

The grep tests' data fit in one window, so only step 1 runs there; here the window and the
cap are shrunk so the index (step 2) and the walk after the window (step 3) answer too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from lcm import LcmStore, ManualClock
from lcm.newest import SOURCES
from lcm.pg.db import PgConnection
from lcm.pg.newest import _scope_rows, matching_ids, newest_matches, newest_scan

KEY, OTHER = "agent:main:s", "agent:other:s"
MSG = SOURCES["message"]
#: (clause over alias t, its parameters): a word in every row, one in every 7th, one in a single
#: old row, one nowhere, a phrase, and substrings (the trigram index: CJK, a regex literal)
MATCHES: list[tuple[str, list[Any]]] = [
    ("t.words @@ lcm_tsq(?)", ["alpha"]), ("t.words @@ lcm_tsq(?)", ["beta"]), ("t.words @@ lcm_tsq(?)", ["gamma"]),
    ("t.words @@ lcm_tsq(?)", ["delta"]), ("t.words @@ lcm_tsq(?)", ["alpha beta"]),
    ("t.content ILIKE ? ESCAPE '\\'", ["%数据库%"]), ("t.content ILIKE ? ESCAPE '\\'", ["%item 1%"]),
]  # fmt: skip


def _text(i: int) -> str:
    return (f"alpha {'beta ' if i % 7 == 0 else ''}item {i}" + (" gamma" if i == 3 else "")
            + (" 数据库迁移" if i % 5 == 1 else ""))  # fmt: skip


@pytest.fixture
def pg(make_pg_store: Callable[..., LcmStore], clock: ManualClock) -> LcmStore:
    store = make_pg_store()
    clock.set(datetime(2026, 1, 1, tzinfo=timezone.utc))
    for b in range(6):  # batches share a time: ties are broken by id
        store.ingest(KEY if b % 3 else OTHER, [{"role": "user", "content": _text(b * 10 + i)} for i in range(10)])
        clock.advance(60)
    # an import of old messages: ids no longer follow time
    store.ingest(KEY, [{"role": "user", "content": _text(100 + i), "created_at": f"2020-01-0{i + 1}T00:00:00Z"}
                       for i in range(5)])  # fmt: skip
    return store


def _scopes(store: LcmStore) -> list[tuple[str, list[Any]]]:
    conv = int(store.db.scalar("SELECT min(conversation_id) FROM messages"))
    return [("TRUE", []), ("t.conversation_id IN (?)", [conv]), ("t.created_at >= ?", ["2026-01-01T00:02:00"])]


def _plain(c: PgConnection, match: str, mparams: list[Any], where: str, params: list[Any], n: int) -> list[int]:
    sql = f"SELECT t.id FROM messages t WHERE {match} AND {where} ORDER BY t.created_at DESC, t.id DESC LIMIT ?"
    return [int(r[0]) for r in c.execute(sql, [*mparams, *params, n]).fetchall()]


# window 1-3 and cap 10,000: the index (step 3) for the rare terms; cap 0 or 1, or every scope
# small: the walk after the window (step 2) for every term the window did not fill; window
# 10,000: step 1 only
@pytest.mark.parametrize(("window", "cap", "small"), [(1, 10_000, 0), (3, 10_000, 0), (3, 0, 0), (1, 1, 0),
                                                      (3, 10_000, 10_000), (10_000, 0, 0)])  # fmt: skip
def test_every_plan_gives_the_plain_querys_rows(pg: LcmStore, window: int, cap: int, small: int) -> None:
    answered = 0
    with pg.db.reading() as c:
        for (match, mparams), (where, params), n in itertools.product(MATCHES, _scopes(pg), (1, 4, 50)):
            want = _plain(c, match, mparams, where, params, n)  # type: ignore[arg-type]
            got = newest_matches(c, MSG, match, mparams, where, params, n, window=window, cap=cap,  # type: ignore[arg-type]
                                 small_scope=small)  # fmt: skip
            assert [int(r["id"]) for r in got] == want, (match, mparams, where, n)
            assert all(r["content"] for r in got)  # whole rows, not ids
            answered += bool(want)
    assert answered > 30  # real answers compared, not empty lists


def test_the_scope_estimate_is_the_planners(pg: LcmStore) -> None:
    # step 2 walks a scope the planner expects to be small: its estimate, not a count
    with pg.db.reading() as c:
        c.execute("ANALYZE messages")
        everything, one = (_scope_rows(c, MSG, where, params) for where, params in _scopes(pg)[:2])  # type: ignore[arg-type]
    assert everything == pytest.approx(65, abs=1) and 0 < one < everything


@pytest.mark.parametrize(("window", "cap", "small"), [(2, 10_000, 0), (2, 0, 0), (2, 10_000, 10_000), (10_000, 0, 0)])
def test_a_scan_reads_every_match_once_newest_first(pg: LcmStore, window: int, cap: int, small: int) -> None:
    # a regex scan reads step 1's rows, then the rest from a cursor: together every match, once
    with pg.db.reading() as c:
        for (match, mparams), (where, params), n in itertools.product(MATCHES, _scopes(pg), (1, 3)):
            every = _plain(c, match, mparams, where, params, 10_000)  # type: ignore[arg-type]
            first, rest = newest_scan(c, MSG, match, mparams, where, params, n, window=window, cap=cap,  # type: ignore[arg-type]
                                      small_scope=small)  # fmt: skip
            more = [] if rest is None else [int(r["id"]) for r in c.execute(*rest).fetchall()]
            assert [int(r["id"]) for r in first] + more == every, (match, mparams, where, n)
            assert rest is not None or len(every) <= window  # no rest only when the window saw the scope


def test_matching_ids_are_every_match_under_the_cap(pg: LcmStore) -> None:
    with pg.db.reading() as c:
        c.execute("SET LOCAL enable_seqscan = off")  # a setting of the caller's (an administrator's) stays
        for (match, mparams), (where, params) in itertools.product(MATCHES, _scopes(pg)):
            every = _plain(c, match, mparams, where, params, 10_000)  # type: ignore[arg-type]
            assert matching_ids(c, MSG, match, mparams, where, params) == every  # type: ignore[arg-type]
            assert matching_ids(c, MSG, match, mparams, where, params, cap=0) == (None if every else [])  # type: ignore[arg-type]
            # the planner settings it forces are restored: the next plain query still walks the index
            assert c.execute("SHOW enable_indexscan").fetchone()[0] == "on"
            assert c.execute("SHOW enable_seqscan").fetchone()[0] == "off"
