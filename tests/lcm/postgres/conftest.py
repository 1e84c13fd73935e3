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


@pytest.fixture
def make_pg_store(pg_url: str, clock: ManualClock) -> Iterator[Callable[..., LcmStore]]:
    stores: list[LcmStore] = []

    def make(**overrides: Any) -> LcmStore:
        store = LcmStore(pg_url, LcmConfig(**overrides), clock=clock)
        stores.append(store)
        return store

    yield make
    for s in stores:
        s.close()
