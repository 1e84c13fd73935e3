"""Connection URLs as lcm shows them: every secret masked, every valid libpq form shown as written."""

from __future__ import annotations

import socket

import pytest

from lcm.errors import StoreUnavailableError
from lcm.pg.db import PgDatabase
from lcm.pg.url import redact_url


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://amem:Hunter2pw@db:5432/lcm", "postgresql://amem:***@db:5432/lcm"),
    ("postgresql://amem@db/lcm?password=Hunter2pw", "postgresql://amem@db/lcm?password=***"),
    ("postgres://db/lcm?sslmode=require&sslpassword=keypw&PASSWORD=x#frag",
     "postgres://db/lcm?sslmode=require&sslpassword=***&PASSWORD=***#frag"),
    ("postgresql://u@db/lcm?application_name=a&auth_token=t", "postgresql://u@db/lcm?application_name=a&auth_token=***"),
    # libpq's failover form: several hosts, each with its port
    ("postgresql://amem:pw@10.0.0.1:55439,10.0.0.2:55440/lcm", "postgresql://amem:***@10.0.0.1:55439,10.0.0.2:55440/lcm"),
    ("postgresql://amem:pw@[::1]:55439/lcm", "postgresql://amem:***@[::1]:55439/lcm"),
    ("postgresql://amem@[::1]/lcm?password=pw", "postgresql://amem@[::1]/lcm?password=***"),
    ("postgresql://amem:pw@/lcm?host=/var/run/postgresql", "postgresql://amem:***@/lcm?host=/var/run/postgresql"),
    ("postgresql://db:5432/lcm?sslmode=require", "postgresql://db:5432/lcm?sslmode=require"),
])  # fmt: skip
def test_redact_url_masks_every_secret_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_query_password_never_reaches_the_error_nor_the_path() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for url in (f"postgresql://u@127.0.0.1:{port}/x?password=Hunter2pw",
                f"postgresql://u:Hunter2pw@127.0.0.1:{port},127.0.0.1:{port}/x"):  # fmt: skip
        with pytest.raises(StoreUnavailableError) as err:
            PgDatabase(url, connect_timeout_s=0.2)
        assert "Hunter2pw" not in str(err.value) and "***" in str(err.value)
