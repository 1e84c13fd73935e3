"""Fixtures of the PostgreSQL tests: one throwaway cluster per session, a fresh database per test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from tests.pgcluster import PgCluster, start_cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    # Never a skip: a machine without the server binaries fails here, saying what to install.
    cluster = start_cluster(external_url=os.environ.get("AMEM_TEST_PG_URL") or None)
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    url = pg_cluster.create_database()
    yield url
    pg_cluster.drop_database(url)


@pytest.fixture(scope="session")
def pg_shared_url(pg_cluster: PgCluster) -> str:
    """One migrated database for the tests that only need an empty store (emptied per test)."""
    url = pg_cluster.create_database("lcm_shared")
    LcmStore(url).close()
    return url


@pytest.fixture
def pg_clean_url(pg_shared_url: str) -> str:
    """The shared database with every lcm table emptied and its ids restarted at 1 (a few ms,
    where a fresh database costs ~300 ms); tests that change the schema use ``pg_url``.

    DELETE, not TRUNCATE: TRUNCATE gives every table and index new files (~150 ms a test)."""
    import psycopg

    with psycopg.connect(pg_shared_url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'lcm_migrations'")]
        conn.execute("SET CONSTRAINTS ALL DEFERRED")
        # referenced rows last; the word totals after the rows whose delete triggers update them
        for table in sorted(tables, key=lambda t: (t == "conversations", t == "lcm_word_totals")):
            conn.execute(f'DELETE FROM "{table}"')
        conn.execute("SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, 1, false) "
                     "FROM pg_sequences WHERE schemaname = 'public' AND sequencename NOT LIKE 'lcm_migrations%'")
    return pg_shared_url


@pytest.fixture
def make_pg_store(pg_clean_url: str, clock: ManualClock) -> Iterator[Callable[..., LcmStore]]:
    stores: list[LcmStore] = []

    def make(**overrides: Any) -> LcmStore:
        store = LcmStore(pg_clean_url, LcmConfig(**overrides), clock=clock)
        stores.append(store)
        return store

    yield make
    for s in stores:
        s.close()
