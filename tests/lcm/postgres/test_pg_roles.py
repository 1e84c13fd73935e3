"""Who may open a PostgreSQL store, and what a refused connection says: at once, with the server's reason."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import LcmConfigError, LcmEngineError
from lcm.pg.db import PgDatabase

from ..conftest import chat

KEY = "agent:main:roles"


def _with_user(url: str, user: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://{user}@", 1)


def test_an_app_role_without_create_uses_a_migrated_database_and_is_told_when_it_cannot_migrate(
        pg_url: str, clock: ManualClock) -> None:  # fmt: skip
    role = f"lcm_app_{uuid.uuid4().hex[:8]}"
    LcmStore(pg_url, clock=clock).close()  # migrated by the owner
    with psycopg.connect(pg_url, autocommit=True) as owner:
        owner.execute(f"CREATE ROLE {role} LOGIN")
        owner.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")  # PostgreSQL 15's default, on any version
        owner.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        owner.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        owner.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
        owner.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}")
    app = _with_user(pg_url, role)
    try:
        with LcmStore(app, LcmConfig(log_file_enabled=False), clock=clock) as store:
            assert store.ingest(KEY, chat(4)).stored == 4
            assert [h.id for h in store.grep("module_2", mode="full_text", session_key=KEY).hits] == ["msg_3"]
        with psycopg.connect(pg_url, autocommit=True) as owner:  # a migration this role cannot make
            owner.execute("DELETE FROM lcm_migrations WHERE seq = (SELECT max(seq) FROM lcm_migrations)")
        with pytest.raises(LcmEngineError, match=r"needs 1 migration\(s\) .* this role may not make them") as err:
            LcmStore(app, clock=clock)
        assert "open it once as the database owner" in str(err.value)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as owner:
            owner.execute(f"DROP OWNED BY {role}")
            owner.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize(("suffix", "reason"), [
    ("/lcm_no_such_database", 'database "lcm_no_such_database" does not exist'),
    ("/postgres?sslmode=require", "server does not support SSL, but SSL was required"),
    ("/postgres?no_such_option=1", 'invalid URI query parameter: "no_such_option"'),
])  # fmt: skip
def test_a_refusal_no_retry_fixes_is_said_at_once(pg_url: str, suffix: str, reason: str) -> None:
    base = pg_url.rsplit("/", 1)[0]
    started = time.monotonic()
    with pytest.raises(LcmConfigError) as err:
        PgDatabase(base + suffix, connect_timeout_s=10)
    assert time.monotonic() - started < 3 and reason in str(err.value) and err.value.key == "databasePath"
    assert "cannot reach" not in str(err.value)


def test_an_unknown_role_is_named(pg_url: str) -> None:
    with pytest.raises(LcmConfigError, match='role "nobody_here" does not exist'):
        PgDatabase(_with_user(pg_url, "nobody_here"), connect_timeout_s=10)
