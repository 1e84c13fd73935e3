"""The lcm tests re-run on PostgreSQL: ``store`` and ``make_store`` hand out PostgreSQL stores here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import UnsupportedOnEngineError
from tests.pgcluster import PgCluster


@pytest.fixture
def make_store(pg_clean_url: str, pg_cluster: PgCluster, clock: ManualClock, tmp_path: Path) -> Iterator[Callable[..., LcmStore]]:
    stores: list[LcmStore] = []
    extra: list[str] = []

    def make(path: str = ":memory:", llm: Any = None, **overrides: Any) -> LcmStore:
        # ":memory:" or a file both mean "a fresh store": the emptied shared database; large
        # files go where a SQLite store at that path keeps them
        files = tmp_path / "lcm-files" if path == ":memory:" else Path(path).parent / "lcm-files"
        overrides.setdefault("large_files_dir", str(files))
        # a second store in one test is a second, independent database, as on SQLite
        url = pg_clean_url if not stores else pg_cluster.create_database()
        if stores:
            extra.append(url)
        store = LcmStore(url, LcmConfig(**overrides), llm=llm, clock=clock)
        stores.append(store)
        return store

    yield make
    for s in stores:
        s.close()
    for url in extra:
        pg_cluster.drop_database(url)


@pytest.fixture
def open_again(pg_clean_url: str, clock: ManualClock) -> Iterator[Callable[[LcmStore], LcmStore]]:
    """Another handle on the (first) store's database: a second host with its own pool."""
    opened: list[LcmStore] = []

    def again(store: LcmStore) -> LcmStore:
        other = LcmStore(pg_clean_url, store.config, clock=clock)
        opened.append(other)
        return other

    yield again
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[..., LcmStore]) -> LcmStore:
    return make_store()


#: tests of SQLite machinery with no PostgreSQL meaning (lcm.newest's FTS5 row-id shortcuts,
#: read through ``store.db.conn``; the log file beside the database file), and one whose 400-message compaction costs ~14 s on the server for what the other
#: compaction tests already cover there
SQLITE_ONLY = {
    "test_newest_first_is_right_after_an_import_of_older_messages": "lcm.newest reads FTS5 through db.conn",
    "test_newest_first_matches_a_reference_in_any_time_order": "lcm.newest reads FTS5 through db.conn",
    "test_newest_first_sql_reads_large_and_small_match_sets_in_time_order": "lcm.newest builds FTS5 SQL",
    "test_long_conversation_stays_fully_reachable": "too slow for the suite on PostgreSQL; needs status too",
    "test_event_log_is_json_lines": "the default log sits next to the database file; a server has none",
    "test_doctor_finds_each_kind_of_damage": "damages the SQLite file through db.conn",
    "test_rows_out_of_time_order_is_a_finding_not_damage": "SQLite's newest-first shortcut; PostgreSQL reads its time index",
}
#: tests that reach an operation not ported to PostgreSQL yet: they must raise
#: UnsupportedOnEngineError (strict: once it is ported, the test passes and this list must shrink)
UNPORTED: dict[str, str] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kept, dropped = [], []
    for item in items:
        name = getattr(item, "originalname", item.name)
        if Path(str(item.fspath)).parent != here:
            kept.append(item)
        elif name in SQLITE_ONLY or not {"store", "make_store"} & set(getattr(item, "fixturenames", ())):
            # (a test that takes neither fixture opens no PostgreSQL store: it runs in tests/lcm)
            dropped.append(item)
        else:
            if name in UNPORTED:
                item.add_marker(pytest.mark.xfail(raises=UnsupportedOnEngineError, strict=True,
                                                  reason=f"{UNPORTED[name]} is not ported to PostgreSQL yet"))  # fmt: skip
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
