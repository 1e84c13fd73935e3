"""How a CLI command reaches the note store: opened here, or through the ``amem serve --http``
that holds it (``tools.remote``).

Routed through the server: ``search``, ``list``, ``get``, ``add`` (not ``--no-enrich``: the tool
always enriches), ``update``, ``delete``, ``history``, ``unsupersede``, ``separate``,
``status``, ``doctor`` and ``export`` (the owner's, page by page). Everything else (import,
consolidate, reembed) needs the store itself: exit 4, saying that the command is not
routed and what to do instead (``common.not_routed``); the
``lcm`` commands open the conversation database, which a server does not lock.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..remote import (RemoteError, RemoteServer, clear_stale, find_server, held_by_server, is_local,
                      load_record, record_path, verified)
from .output import CODE_EXITS, EXIT_BUSY, EXIT_ERROR, CliError, usage_error

if TYPE_CHECKING:
    from amem import MemoryStore
    from amem.errors import StoreLockedError

    from ..runtime import Runtime

#: the environment variable that gives an explicit ``--server`` its key (``amem keys add``)
TOKEN_ENV = "AMEM_SERVER_TOKEN"


def add_server_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", metavar="URL",
                        help="ask this running `amem serve --http` (e.g. "
                             "http://127.0.0.1:8765/mcp); by default the CLI uses the server "
                             "holding the data directory when there is one")


@contextmanager
def open_notes(args: argparse.Namespace, runtime: Runtime
               ) -> Iterator[tuple[MemoryStore | None, RemoteServer | None]]:
    """``(store, None)`` with the runtime's store, or ``(None, server)``: the server named by
    ``--server``, or the one found holding the store (see ``tools.remote``). The runtime's
    owner closes the store."""
    from amem.errors import StoreLockedError

    url = getattr(args, "server", None)
    if url:
        yield None, explicit_server(url, runtime)
        return
    cfg = runtime.settings.amem
    # Asked first, from the record and the lock file: a routed command then imports nothing
    # of the store (its engine and numpy are most of a direct command's start-up)
    holder = held_by_server(cfg.home, cfg.store_path) if cfg.backend == "edge" else None
    if holder is not None:
        server = discovered_server(runtime, holder)
        if server is not None:
            yield None, server
            return
    try:
        store = runtime.memory
    except StoreLockedError as exc:
        # when the server was asked above and did not prove itself, it said why: the lock's
        # error stands without a second message
        server = None if holder is not None else discovered_server(
            runtime, getattr(exc, "holder_pid", None))
        if server is None:
            raise
        yield None, server
        return
    clear_stale(runtime.settings.amem.home)
    yield store, None


def local_store(store: MemoryStore | None) -> MemoryStore:
    """The store ``open_notes`` yielded with no server (it always yields one of the two)."""
    assert store is not None
    return store


def explicit_server(url: str, runtime: Runtime) -> RemoteServer:
    """``--server URL``: the key of ``$AMEM_SERVER_TOKEN``, else the record's secret if the
    record names this very url and its server proves it wrote it (``tools.remote``)."""
    if not url.startswith(("http://", "https://")):
        raise usage_error(f"--server must be an http(s) URL such as http://127.0.0.1:8765/mcp, "
                          f"got {url!r}", "server")
    key = runtime.env.get(TOKEN_ENV)
    if key:
        return RemoteServer(url, agent_id=runtime.agent_id, token=key)
    path = record_path(runtime.settings.amem.home)
    record = load_record(path)
    if record is None or record.url != url:
        raise CliError(f"no key for {url}: set {TOKEN_ENV} to a key issued by `amem keys add` "
                       "(the server record of this data directory names another url)",
                       code="unauthenticated", exit_code=EXIT_ERROR)
    if verified(path, record) is None:
        raise CliError(f"the server at {url} did not prove it is the one in {path}; nothing "
                       "was sent to it", code="unavailable", exit_code=EXIT_ERROR)
    return RemoteServer(url, agent_id=runtime.agent_id, token=record.token)


def discovered_server(runtime: Runtime, holder_pid: int | None) -> RemoteServer | None:
    """The server that holds the store, found by its record; ``None`` when there is none.

    A stdio server holds it too but only its host can talk to it: that is an error that says so.
    """
    record = find_server(runtime.settings.amem.home, holder_pid)
    if record is None:
        return None
    if record.transport != "http" or not record.url:
        raise CliError(f"the store is held by `amem serve` on stdio (pid {record.pid}); a stdio "
                       "server talks only to the host that started it, so this command cannot "
                       "use it. Stop that server (or its host), or run `amem serve --http`, "
                       "which the CLI finds and uses", code="store_locked", exit_code=EXIT_BUSY)
    assert is_local(record.url)  # find_server ignores any other record
    return RemoteServer(record.url, agent_id=runtime.agent_id, token=record.token)


def remote_call(server: RemoteServer, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call, its refusal turned into the CLI's error (same codes, same exits)."""
    return _cli(lambda: server.call(name, arguments))


def remote_read(server: RemoteServer, uri: str) -> dict[str, Any]:
    return _cli(lambda: server.read(uri))


def remote_page(server: RemoteServer, limit: int, offset: str | None) -> dict[str, Any]:
    return _cli(lambda: server.list_page(limit, offset))


def _cli(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        result: dict[str, Any] = work()
    except RemoteError as exc:
        raise CliError(str(exc), code=exc.code, exit_code=CODE_EXITS.get(exc.code, EXIT_ERROR),
                       field=exc.field) from None
    return result
