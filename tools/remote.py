"""The ``amem`` CLI through a running ``amem serve --http``: the server record and the client.

The embedded store belongs to one process. While ``amem serve`` holds it, the read commands
(and ``add``/``delete``) ask that server over MCP (streamable HTTP; a small JSON-RPC client,
``RemoteServer``)
instead of failing with "store busy":

* **The record.** ``amem serve`` writes ``<home>/server.json`` (``transport``, ``url``, ``pid``,
  a random ``token``, ``started``): atomically (a temporary file renamed over it), mode 0600,
  removed on a clean exit. A stdio server writes one too, without url or token, so the CLI
  can say why it cannot reach it.
* **Finding it.** Only when the store is locked (or ``--server URL`` is given). A record is
  used only if it belongs to this user and no one else can read it, its pid is alive and is
  the lock's holder, and its url is on this machine (127.0.0.1, ::1 or localhost); otherwise it
  is ignored with a message on stderr and the store-busy error stands.
* **This directory's.** The record names the data directory it was written in (``home``: its
  device and inode). A copy of the directory (``cp -a``, rsync, a tar restored) made while the
  server ran carries the record, and the store's ``LOCK`` with the server's pid in it; the
  copy's record names another directory, so it is removed and the copy opened as the store it
  is (it was routed to the original's server, which stored the copy's writes in the original).
* **Proof before any secret.** The record's secret is an owner key for the server's life, so
  the CLI sends it only to the server that wrote the record: it first asks
  ``GET /amem/proof?nonce=N`` (no secret sent) and checks the answer is
  HMAC(record secret, N) from the recorded pid (``tools.proof.proof_of``). A process that
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
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit

from amem.atomicfile import write_text_atomic
from amem.kernel.files import flock_holder, private_dir

from .proof import proof_of

log = logging.getLogger(__name__)

RECORD_NAME = "server.json"
#: the resources only the record's token opens (see tools.mcp_server)
OWNER_STATUS, OWNER_DOCTOR = "amem://owner/status", "amem://owner/doctor"
#: one page of every agent's notes, for ``amem export`` while the server holds the store
OWNER_EXPORT = "amem://owner/export"
_LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
#: Linux's table of the file locks held (``flock_holder``); absent elsewhere
_LOCK_TABLE = Path("/proc/locks")


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
    #: the data directory it was written in (``home_identity``); None in records written
    #: before it was kept, which are taken as this directory's
    home: str | None = None


def home_identity(home: str | Path) -> str | None:
    """``device:inode`` of the data directory: the same through another path to it (a link, a
    bind mount), another for a copy of it; None when it cannot be read."""
    try:
        info = os.stat(Path(home).expanduser())
    except OSError:
        return None
    return f"{info.st_dev}:{info.st_ino}"


def _foreign(home: str | Path, record: ServerRecord) -> bool:
    """Whether ``record`` was written in another data directory (this one is a copy)."""
    return record.home is not None and record.home != home_identity(home)


_COPIED = ("it was written by the server of another data directory (this one is a copy of it: "
           "cp, rsync or a restored archive); this copy is opened as its own store")


def record_path(home: str | Path) -> Path:
    return Path(home).expanduser() / RECORD_NAME


@contextmanager
def serving_record(home: str | Path, *, transport: str, url: str | None = None,
                   insecure: bool = False) -> Iterator[str | None]:
    """Write the record for the life of a server; yields its token (``None`` on stdio).

    Removed on the way out, unless another server has replaced it since.
    """
    token = secrets.token_urlsafe(32) if transport == "http" else None
    path = record_path(home)
    private_dir(path.parent)
    record = ServerRecord(transport, os.getpid(), url, token, time.time(),
                          "none" if insecure else "keys", home_identity(path.parent))
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
                            auth=str(data.get("auth") or "keys"),
                            home=data["home"] if isinstance(data.get("home"), str) else None)
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
    if _foreign(home, record):
        return _remove(path, record, _COPIED)
    if not _alive(record.pid):
        return _remove(path, record, f"its server (pid {record.pid}) is no longer running")
    if holder_pid is not None and holder_pid != record.pid:
        return _ignore(path, f"it names pid {record.pid}, but pid {holder_pid} holds the store")
    if record.transport == "http" and (not record.url or not is_local(record.url)):
        return _ignore(path, f"its url {record.url!r} is not on this machine")
    if record.transport == "http" and prove:
        return verified(path, record)
    return record


def held_by_server(home: str | Path, store: str | Path) -> int | None:
    """The pid of the live HTTP server that holds the embedded store at ``store``, as far as
    the files say, without opening the store; ``None`` when they do not say so.

    The record names a live pid and ``<store>/LOCK`` holds that same pid: the lock's holder
    writes its pid there and clears it when it lets go (``amem.backends._lock``), so both
    agreeing means the server holds the store now. A routed command then needs neither the
    store's modules (the engine, numpy) nor the lock attempt to learn that it is busy; whether
    the server is the one that wrote the record is still proven before any secret is sent
    (``find_server``). Anything else (no record, a stdio or dead server, another holder) is
    left to opening the store, which says why it is busy.
    """
    record = load_record(record_path(home))
    if (record is None or record.transport != "http" or not _alive(record.pid)
            or _foreign(home, record)):
        return None
    lock = Path(store).expanduser() / "LOCK"
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            text = handle.read(64).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text != str(record.pid):
        return None
    # the pid in the file is only a hint (``amem.backends._lock``): a copy of the directory
    # holds the same text with no lock on it. Where the kernel's lock table can be read, the
    # pid must hold the flock of this very file (records written before they named their
    # directory reach here from a copy too)
    if _LOCK_TABLE.is_file() and flock_holder(lock, _LOCK_TABLE) is None:
        return None
    return record.pid


def clear_stale(home: str | Path) -> None:
    """Remove the record of a server that died without removing it (``kill -9``), with a
    message; called by a command that opened the store itself, so no server holds it."""
    path = record_path(home)
    record = load_record(path)
    if record is not None and _foreign(home, record):
        _remove(path, record, _COPIED)
    elif record is not None and not _alive(record.pid):
        _remove(path, record, f"its server (pid {record.pid}) is no longer running")


def verified(path: Path, record: ServerRecord) -> ServerRecord | None:
    """``record`` if the server at its url proves it wrote it (module docstring); else
    ``None``, the record removed when the answer shows it stale."""
    assert record.url is not None
    if not _alive(record.pid):
        return _remove(path, record, f"its server (pid {record.pid}) is no longer running")
    if not record.token:
        return _ignore(path, "it holds no secret to check its server with")
    import http.client  # here, not at the top: only a command that finds a server record pays it

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

    Each public method is one MCP session (initialize, the calls, then the session closed) on
    one keep-alive connection: a few milliseconds. The client is ``http.client`` speaking MCP's
    JSON-RPC over streamable HTTP itself (``_Session``), not the SDK's client: a routed command
    would otherwise import the SDK, pydantic, httpx and anyio (0.7 s of CPU) to make three
    requests (issue 25).
    """

    def __init__(self, url: str, *, agent_id: str, token: str | None = None,
                 timeout: float = 120.0) -> None:
        self.url = url
        self.agent_id = agent_id
        self.token = token
        self.timeout = timeout

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool's structured result; a tool error raises :class:`RemoteError`."""
        return self._run(lambda session: session.call(name, arguments))

    def read(self, uri: str) -> dict[str, Any]:
        """One JSON resource (``amem://status``, or an owner report with the token)."""
        return self._run(lambda session: session.read(uri))

    def list_page(self, limit: int, offset: str | None) -> dict[str, Any]:
        """``memory_list``, with the full content of the notes it shows clipped (one session)."""
        def work(session: _Session) -> dict[str, Any]:
            args: dict[str, Any] = {"limit": limit}
            if offset is not None:
                args["offset"] = offset
            page = session.call("memory_list", args)
            for row in page["notes"]:
                if row.get("truncated"):
                    row["content"] = session.call("memory_get", {"id": row["id"]})["content"]
            return page

        return self._run(work)

    def _headers(self) -> dict[str, str]:
        # percent-escaped: the server reads the header as UTF-8 with escapes (tools.tenancy)
        headers = {"X-Amem-Agent": quote(self.agent_id, safe="")}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _run(self, work: Callable[[_Session], dict[str, Any]]) -> dict[str, Any]:
        import http.client

        session = _Session(self.url, self._headers(), self.timeout)
        try:
            session.open()
            return work(session)
        except (OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"the amem server at {self.url} did not answer ({type(exc).__name__}: "
                              f"{exc})", code="unavailable") from None
        finally:
            session.close()


#: the MCP revision this client speaks (the SDK's server answers it; it negotiates down if not)
PROTOCOL_VERSION = "2025-11-25"
_SESSION_HEADER = "mcp-session-id"
_VERSION_HEADER = "mcp-protocol-version"


class _Session:
    """One MCP session over streamable HTTP: ``initialize``, then ``tools/call`` and
    ``resources/read`` requests, then ``DELETE`` (the guard counts open sessions per key).

    A direct connection, never through a proxy from the environment: a proxy would see the
    key. An answer is JSON or a server-sent event stream holding the JSON-RPC response.
    """

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise RemoteError(f"the server url must be http(s), got {url!r}", code="invalid_argument",
                              field="server")
        self.url = url
        self.path = parts.path or "/"
        if parts.query:
            self.path += "?" + parts.query
        import http.client

        connection = (http.client.HTTPSConnection if parts.scheme == "https"
                      else http.client.HTTPConnection)
        self.conn = connection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        self.headers = {**headers, "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.session_id: str | None = None
        self.version = PROTOCOL_VERSION
        self.next_id = 0

    def open(self) -> None:
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "amem-cli", "version": "1"}})
        self.version = str(result.get("protocolVersion") or PROTOCOL_VERSION)
        self.notify("notifications/initialized")

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        data = result.get("structuredContent")
        if data is None:
            data = json.loads(result["content"][0]["text"])
        if result.get("isError"):
            error = data.get("error", {}) if isinstance(data, dict) else {}
            raise RemoteError(str(error.get("message", "the server refused the call")),
                              code=str(error.get("code", "error")), field=error.get("field"))
        return dict(data)

    def read(self, uri: str) -> dict[str, Any]:
        result = self.request("resources/read", {"uri": uri})
        return dict(json.loads(result["contents"][0]["text"]))

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC request's ``result``; its error raises :class:`RemoteError`."""
        self.next_id += 1
        status, headers, body = self._post({"jsonrpc": "2.0", "id": self.next_id,
                                            "method": method, "params": params})
        if self.session_id is None:
            self.session_id = headers.get(_SESSION_HEADER)
        message = _response(status, headers.get("content-type", ""), body, self.next_id, self.url)
        if "error" in message:
            error: dict[str, Any] = message["error"] if isinstance(message["error"], dict) else {}
            data: dict[str, Any] = error["data"] if isinstance(error.get("data"), dict) else {}
            raise RemoteError(str(error.get("message", "the server refused the request")),
                              code=str(data.get("code", "error")), field=data.get("field"))
        result = message.get("result")
        if not isinstance(result, dict):
            raise RemoteError(f"the amem server at {self.url} answered {method} without a result",
                              code="unavailable")
        return result

    def notify(self, method: str) -> None:
        status, headers, body = self._post({"jsonrpc": "2.0", "method": method})
        if status >= 400:
            raise _refusal(status, body, self.url)

    def close(self) -> None:
        """End the session (best effort: the server expires an idle one anyway)."""
        import http.client

        try:
            if self.session_id is not None:
                self.conn.request("DELETE", self.path, headers=self._session_headers())
                self.conn.getresponse().read()
        except (OSError, http.client.HTTPException) as exc:
            log.debug("closing the MCP session at %s failed: %s", self.url, exc)
        finally:
            self.conn.close()

    def _session_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.session_id is not None:
            headers[_SESSION_HEADER] = self.session_id
            headers[_VERSION_HEADER] = self.version
        return headers

    def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("POST", self.path, body=json.dumps(message).encode("utf-8"),
                          headers=self._session_headers())
        answer = self.conn.getresponse()
        body = answer.read()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, body


def _response(status: int, content_type: str, body: bytes, request_id: int,
              url: str) -> dict[str, Any]:
    """The JSON-RPC message answering ``request_id`` in a plain JSON or an event-stream body."""
    if status >= 400 and not content_type.startswith("text/event-stream"):
        try:
            message = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _refusal(status, body, url) from None
        if isinstance(message, dict) and "jsonrpc" in message and "error" in message:
            return message  # the SDK's refusal of the request, as JSON-RPC
        raise _refusal(status, body, url)
    try:
        text = body.decode("utf-8")
        if content_type.startswith("text/event-stream"):
            messages = [json.loads(data) for data in _event_data(text)]
        else:
            messages = [json.loads(text)]
    except (UnicodeDecodeError, ValueError):
        raise RemoteError(f"the amem server at {url} answered something that is not JSON-RPC "
                          f"(HTTP {status})", code="unavailable") from None
    for message in messages:  # notifications (progress, logs) may come before the answer
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    raise RemoteError(f"the amem server at {url} did not answer request {request_id} "
                      f"(HTTP {status})", code="unavailable")


def _event_data(text: str) -> Iterator[str]:
    """The ``data`` of each server-sent event (its lines joined, as the SSE format says)."""
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line[5:].removeprefix(" ") for line in block.split("\n")
                 if line.startswith("data:")]
        if lines:
            yield "\n".join(lines)


def _refusal(status: int, body: bytes, url: str) -> RemoteError:
    """The guard's (or the server's) refusal: its structured error when the body is one."""
    try:
        error = json.loads(body.decode("utf-8"))["error"]
        if isinstance(error.get("data"), dict):  # the MCP endpoint's JSON-RPC form of it
            error = error["data"]
        return RemoteError(str(error["message"]), code=str(error.get("code") or "error"),
                           field=error.get("field"))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        return RemoteError(f"the amem server at {url} refused the request (HTTP {status})",
                           code="unavailable")


def port_is_open(url: str) -> bool:
    """Whether something accepts connections at ``url``'s host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2):
            return True
    except OSError:
        return False
