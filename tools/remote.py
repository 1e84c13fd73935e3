"""The ``amem`` CLI through a running ``amem serve --http``: the server record and the client.

The embedded store belongs to one process. While ``amem serve`` holds it, the read commands
(and ``add``/``delete``) ask that server over MCP (streamable HTTP, the official SDK client)
instead of failing with "store busy":

* **The record.** ``amem serve`` writes ``<home>/server.json`` (``transport``, ``url``, ``pid``,
  a random ``token``, ``started``): atomically (a temporary file renamed over it), mode 0600,
  removed on a clean exit. A stdio server writes one too, without url or token, so the CLI
  can say why it cannot reach it.
* **Finding it.** Only when the store is locked (or ``--server URL`` is given). A record is
  used only if it belongs to this user and no one else can read it, its pid is alive and is
  the lock's holder, and its url is on this machine (127.0.0.1, ::1 or localhost); otherwise it
  is ignored with a message on stderr and the store-busy error stands.
* **Proof before any secret.** The record's secret is an owner key for the server's life, so
  the CLI sends it only to the server that wrote the record: it first asks
  ``GET /amem/proof?nonce=N`` (no secret sent) and checks the answer is
  HMAC(record secret, N) from the recorded pid (``tools.http_guard.proof_of``). A process that
  took the port of a killed server cannot answer it. A record whose pid is dead or whose
  server answers wrongly is removed, with a message; one whose server does not answer yet (it
  is starting) is only ignored.
* **Identity.** Every request carries ``X-Amem-Agent`` set to the agent the CLI would use
  locally, so the server answers exactly as that agent. With the record's secret the CLI is
  the owner (the store-wide reports behind ``amem status`` and ``amem doctor`` open); with an
  explicit ``--server`` it sends the key of ``AMEM_SERVER_TOKEN``, or the record's secret
  when the record names that very url and its server proves itself.
"""

from __future__ import annotations

import hmac
import http.client
import json
import logging
import os
import secrets
import socket
import stat
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator
from urllib.parse import quote, urlsplit

from amem.atomicfile import write_text_atomic

log = logging.getLogger(__name__)

RECORD_NAME = "server.json"
#: the resources only the record's token opens (see tools.mcp_server)
OWNER_STATUS, OWNER_DOCTOR = "amem://owner/status", "amem://owner/doctor"
_LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


@dataclass(frozen=True)
class ServerRecord:
    """What ``<home>/server.json`` says about the server holding the store."""

    transport: str
    pid: int
    url: str | None = None
    token: str | None = None
    started: float = 0.0
    #: "keys" (every caller needs a key) or "none" (``--insecure-no-auth``)
    auth: str = "keys"


def record_path(home: str | Path) -> Path:
    return Path(home).expanduser() / RECORD_NAME


@contextmanager
def serving_record(home: str | Path, *, transport: str, url: str | None = None,
                   insecure: bool = False) -> Iterator[str | None]:
    """Write the record for the life of a server; yields its token (``None`` on stdio).

    Removed on the way out, unless another server has replaced it since.
    """
    token = secrets.token_urlsafe(32) if transport == "http" else None
    record = ServerRecord(transport, os.getpid(), url, token, time.time(),
                          "none" if insecure else "keys")
    path = record_path(home)
    write_text_atomic(path, json.dumps(asdict(record)))
    log.info("server record %s written: %s", path, "the amem CLI uses this server while it runs"
             if token else "the CLI will say this stdio server holds the store")
    try:
        yield token
    finally:
        current = load_record(path)
        if current is not None and current.pid == record.pid and current.token == token:
            path.unlink(missing_ok=True)


def load_record(path: Path) -> ServerRecord | None:
    """The record at ``path`` as written, unchecked (``find_server`` checks it); ``None``
    when there is none or it does not parse."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            data = json.loads(handle.read(65536).decode("utf-8"))
        return ServerRecord(transport=str(data["transport"]), pid=int(data["pid"]),
                            url=data.get("url"), token=data.get("token"),
                            started=float(data.get("started") or 0),
                            auth=str(data.get("auth") or "keys"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_server(home: str | Path, holder_pid: int | None = None, *,
                prove: bool = True) -> ServerRecord | None:
    """The live server that holds the store under ``home``, or ``None`` (why: said on stderr).

    ``prove=False`` skips the HTTP server's proof: only for a caller that sends the server
    nothing (a message naming the server that holds the store's lock, ``holder_pid``)."""
    path = record_path(home)
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return _ignore(path, "it is not a regular file (a symbolic link is never followed)")
    if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
        return _ignore(path, "it is not a private file of this user (mode 0600, owned by you)")
    record = load_record(path)
    if record is None:
        return _ignore(path, "it cannot be read as a server record")
    if not _alive(record.pid):
        return _remove(path, record, f"its server (pid {record.pid}) is no longer running")
    if holder_pid is not None and holder_pid != record.pid:
        return _ignore(path, f"it names pid {record.pid}, but pid {holder_pid} holds the store")
    if record.transport == "http" and (not record.url or not is_local(record.url)):
        return _ignore(path, f"its url {record.url!r} is not on this machine")
    if record.transport == "http" and prove:
        return verified(path, record)
    return record


def clear_stale(home: str | Path) -> None:
    """Remove the record of a server that died without removing it (``kill -9``), with a
    message; called by a command that opened the store itself, so no server holds it."""
    path = record_path(home)
    record = load_record(path)
    if record is not None and not _alive(record.pid):
        _remove(path, record, f"its server (pid {record.pid}) is no longer running")


def verified(path: Path, record: ServerRecord) -> ServerRecord | None:
    """``record`` if the server at its url proves it wrote it (module docstring); else
    ``None``, the record removed when the answer shows it stale."""
    assert record.url is not None
    if not _alive(record.pid):
        return _remove(path, record, f"its server (pid {record.pid}) is no longer running")
    if not record.token:
        return _ignore(path, "it holds no secret to check its server with")
    nonce = secrets.token_hex(16)
    parts = urlsplit(record.url)
    try:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=5)
        try:
            conn.request("GET", f"/amem/proof?nonce={nonce}")  # no secret in this request
            answer = conn.getresponse()
            body = answer.read(4096)
        finally:
            conn.close()
    except (OSError, http.client.HTTPException) as exc:
        return _ignore(path, f"its server at {record.url} does not answer ({exc}); if it is "
                             "starting, try again")
    try:
        data = json.loads(body.decode("utf-8"))
        proof, pid = str(data["proof"]), int(data["pid"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return _remove(path, record, f"whatever listens at {record.url} is not the amem server "
                                     "that wrote it (no proof)")
    from .http_guard import proof_of

    if not hmac.compare_digest(proof, proof_of(record.token, nonce)) or pid != record.pid:
        return _remove(path, record, f"whatever listens at {record.url} is not the amem server "
                                     f"that wrote it (pid {pid}, a wrong proof); its secret was "
                                     "not sent")
    return record


def _remove(path: Path, record: ServerRecord, why: str) -> ServerRecord | None:
    """Remove a stale record (unless a new server has replaced it meanwhile) and say why."""
    current = load_record(path)
    if current == record:
        path.unlink(missing_ok=True)
        print(f"amem: removed {path}: {why}", file=sys.stderr)
    else:
        _ignore(path, why)
    return None


def _ignore(path: Path, why: str) -> ServerRecord | None:
    """Say why the record is not used (on stderr: the CLI's output stays clean); ``None``."""
    print(f"amem: ignoring {path}: {why}", file=sys.stderr)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not a server of ours
        return False
    return True


def is_local(url: str) -> bool:
    return (urlsplit(url).hostname or "") in _LOCAL_HOSTS


# ------------------------------------------------------------------------------ the client


class RemoteError(Exception):
    """The server refused or failed a call: ``code`` as in the tools' error results."""

    def __init__(self, message: str, *, code: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class RemoteServer:
    """A running ``amem serve --http`` as one agent: tool calls and resource reads over MCP.

    Each public method is one MCP session (a few milliseconds on this machine).
    """

    def __init__(self, url: str, *, agent_id: str, token: str | None = None,
                 timeout: float = 120.0) -> None:
        self.url = url
        self.agent_id = agent_id
        self.token = token
        self.timeout = timeout

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool's structured result; a tool error raises :class:`RemoteError`."""
        return self._run(lambda client: _call(client, name, arguments))

    def read(self, uri: str) -> dict[str, Any]:
        """One JSON resource (``amem://status``, or an owner report with the token)."""
        return self._run(lambda client: _read(client, uri))

    def list_page(self, limit: int, offset: str | None) -> dict[str, Any]:
        """``memory_list``, with the full content of the notes it shows clipped (one session)."""
        async def work(client: Any) -> dict[str, Any]:
            args: dict[str, Any] = {"limit": limit}
            if offset is not None:
                args["offset"] = offset
            page = await _call(client, "memory_list", args)
            for row in page["notes"]:
                if row.get("truncated"):
                    row["content"] = (await _call(client, "memory_get", {"id": row["id"]}))["content"]
            return page

        return self._run(work)

    def _headers(self) -> dict[str, str]:
        # percent-escaped: the server reads the header as UTF-8 with escapes (tools.tenancy)
        headers = {"X-Amem-Agent": quote(self.agent_id, safe="")}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _run(self, work: Callable[[Any], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        import anyio

        async def session() -> dict[str, Any]:
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            # a local server is reached directly: a proxy from the environment would see
            # the key (and would not be the server the record names)
            async with httpx2.AsyncClient(headers=self._headers(), timeout=self.timeout,
                                          trust_env=not is_local(self.url)) as http, \
                    Client(streamable_http_client(self.url, http_client=http)) as client:
                return await work(client)

        try:
            return anyio.run(session)
        except RemoteError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the transport's failures, unwrapped
            inner = _leaf(exc)
            if isinstance(inner, RemoteError):
                raise inner from None
            if isinstance(inner, (KeyboardInterrupt, SystemExit)):
                raise inner from None
            raise RemoteError(f"the amem server at {self.url} did not answer ({type(inner).__name__}: "
                              f"{inner})", code="unavailable") from None


def _leaf(exc: BaseException) -> BaseException:
    """The first real failure inside anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _call(client: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    data = result.structured_content
    if data is None:
        data = json.loads(result.content[0].text)
    if result.is_error:
        error = data.get("error", {})
        raise RemoteError(str(error.get("message", "the server refused the call")),
                          code=str(error.get("code", "error")), field=error.get("field"))
    return dict(data)


async def _read(client: Any, uri: str) -> dict[str, Any]:
    from mcp.shared.exceptions import MCPError

    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        raise RemoteError(exc.message, code=str(data.get("code", "error")),
                          field=data.get("field")) from None
    return dict(json.loads(result.contents[0].text))


def port_is_open(url: str) -> bool:
    """Whether something accepts connections at ``url``'s host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2):
            return True
    except OSError:
        return False
