"""A PostgreSQL server that goes away while a store is open: every call waited the whole 30 s of
the pool's retries, then said "no connection available", as if the pool were only busy.

The server is reached through a small TCP relay the test owns, so "the server goes away" is the
relay closing (its listening socket and every relayed connection), and the shared test cluster
keeps running for the other tests.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import StoreUnavailableError

KEY = "agent:a1:main"


class Relay:
    """Relays 127.0.0.1:<port> to the server until ``close()``, which refuses and drops everything."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            server = socket.create_connection(self._target)
            self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        # shutdown first: close() alone leaves an accept() blocked in another thread taking the
        # next connection (the kernel socket lives while the call holds it)
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for s in self._open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.fixture
def relayed(pg_clean_url: str) -> Iterator[tuple[Relay, str]]:
    parts = urlsplit(pg_clean_url)
    relay = Relay(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = f"{parts.username}@127.0.0.1:{relay.port}" if parts.username else f"127.0.0.1:{relay.port}"
    yield relay, urlunsplit(parts._replace(netloc=netloc))
    relay.close()


def test_a_server_gone_away_is_said_at_once_not_after_the_pools_wait(
        relayed: tuple[Relay, str], clock: ManualClock) -> None:
    relay, url = relayed
    store = LcmStore(url, LcmConfig(log_file_enabled=False), clock=clock)
    try:
        assert store.ingest(KEY, [{"role": "user", "content": "before the server went away"}]).stored == 1
        relay.close()
        with pytest.raises(StoreUnavailableError) as gone:
            for _ in range(2):  # the first call may find its pooled connection dropped mid-use
                store.ingest(KEY, [{"role": "user", "content": "while it is away"}])
        said = str(gone.value)
        # the pool's wait says "no connection ... available within 30 s": not reached
        assert "does not answer" in said or "dropped the connection" in said, said
        if "dropped the connection" in said:  # the next call finds no server behind the pool
            with pytest.raises(StoreUnavailableError, match="does not answer"):
                store.ingest(KEY, [{"role": "user", "content": "while it is away"}])
    finally:
        store.close()


def test_a_busy_pool_still_waits_for_a_connection(pg_clean_url: str, clock: ManualClock,
                                                  make_pg_store: Callable[..., LcmStore]) -> None:
    """The server answers: a call whose pool is busy waits for a connection and is served."""
    store = make_pg_store()
    store.ingest(KEY, [{"role": "user", "content": "hello"}])
    db = store.db
    held = threading.Semaphore(0)
    release = threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with db.reading():  # type: ignore[attr-defined]
                held.release()
                release.wait(10)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    holders = [threading.Thread(target=hold) for _ in range(8)]  # the pool's max_size
    for t in holders:
        t.start()
    for _ in holders:  # every pooled connection is out
        assert held.acquire(timeout=10)
    timer = threading.Timer(2.5, release.set)  # past the first wait and the server's answer
    timer.start()
    try:
        assert [i.content for i in store.assemble(KEY, 1000).items] == ["hello"]
    finally:
        release.set()
        for t in holders:
            t.join(10)
    assert not errors
