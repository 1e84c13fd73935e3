"""The keys of ``amem serve --http``: who may call, as which agent, and whether it may write.

A key is issued by the owner of the data directory (``amem keys add``) and sent as
``Authorization: Bearer <secret>``. Its record decides the caller:

* an **agent key** acts as its one agent (and that agent's session families); the
  ``X-Amem-Agent`` header may repeat that agent, never name another;
* an **owner key** may act as any agent (the header chooses; the server's agent without it)
  and reads the store-wide owner reports;
* either may be **read-only**: only tools and routes that change nothing.

The scheme follows Qdrant's (an admin key, read-only keys, keys scoped to a collection: here
the tenant is the agent), kept on the server as records rather than signed tokens so that
``amem keys revoke`` takes effect on the next request of a running server.

The secrets live nowhere: ``<home>/keys.json`` (0600, written atomically, never through a
symlink) holds their SHA-256. A secret is 32 random bytes (``secrets.token_urlsafe``), so a
plain hash is enough: a password-hashing function (scrypt, argon2) slows the guessing of
low-entropy secrets, and 256 random bits cannot be guessed at any speed. The comparison is
constant-time (``hmac.compare_digest``) all the same, so timing says nothing about a hash.

A secret reads ``amem_<id>_<random>``: the id finds the record without trying every hash, and
makes a leaked secret recognisable in a log or a repository.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from amem.notes import check_agent

log = logging.getLogger(__name__)

KEYS_NAME = "keys.json"
SECRET_PREFIX = "amem_"
_ID_RE = re.compile(r"^[0-9a-f]{12}$")
MAX_NAME_CHARS = 100


class KeyFileError(Exception):
    """The key file cannot be trusted or read (``code`` as in the tools' errors)."""

    code = "config_error"


@dataclass(frozen=True)
class KeyRecord:
    """One issued key, as ``keys.json`` keeps it (the secret's hash, never the secret)."""

    id: str
    agent: str | None
    owner: bool
    read_only: bool
    name: str
    created: float
    sha256: str

    def public(self) -> dict[str, Any]:
        """What ``amem keys list`` shows: everything but the hash."""
        data = asdict(self)
        del data["sha256"]
        return data


@dataclass(frozen=True)
class Principal:
    """Who a request is: the key's id, its agent (``None``: an owner key, any agent), and
    its rights. ``insecure`` marks the stand-in of ``--insecure-no-auth``."""

    key_id: str
    agent: str | None
    owner: bool
    read_only: bool = False
    insecure: bool = False

    def may_act_as(self, agent: str) -> bool:
        return self.owner or agent == self.agent


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def key_id_of(secret: str) -> str | None:
    """The id part of a secret shaped ``amem_<id>_<random>``, else ``None``."""
    if not secret.startswith(SECRET_PREFIX):
        return None
    key_id, sep, rest = secret[len(SECRET_PREFIX):].partition("_")
    return key_id if sep and rest and _ID_RE.match(key_id) else None


class KeyStore:
    """``<home>/keys.json``: issue, list, revoke, and check secrets against it.

    A running server keeps one and calls :meth:`authenticate` per request; the file is
    re-read when its inode, size or mtime change, so a key added or revoked by the CLI counts
    from the next request without a restart.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._records: dict[str, KeyRecord] = {}

    @classmethod
    def for_home(cls, home: str | Path) -> "KeyStore":
        return cls(Path(home).expanduser() / KEYS_NAME)

    # ------------------------------------------------------------------ issuing

    def add(self, *, agent: str | None, owner: bool = False, read_only: bool = False,
            name: str = "") -> tuple[KeyRecord, str]:
        """Issue a key; returns its record and the secret (shown once, stored nowhere).

        Raises:
            ValueError: an owner key with an agent, an agent key without one, a bad agent id
                or name.
        """
        if owner and agent is not None:
            raise ValueError("an owner key acts for every agent: give --owner or --agent, not both")
        if not owner:
            if agent is None:
                raise ValueError("a key needs --agent ID (the agent it acts as) or --owner")
            check_agent(agent, field="agent")
        if not isinstance(name, str) or len(name) > MAX_NAME_CHARS or any(
                ord(ch) < 32 or ord(ch) == 127 for ch in name):
            raise ValueError(f"the key's name must be at most {MAX_NAME_CHARS} printable characters")
        with self._lock:
            records = self._read()
            key_id = secrets.token_hex(6)
            while key_id in records:
                key_id = secrets.token_hex(6)
            secret = f"{SECRET_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
            record = KeyRecord(key_id, agent, owner, read_only, name, round(time.time(), 3),
                               digest(secret))
            records[key_id] = record
            self._write(records)
        log.info("key %s issued (%s%s)", key_id, "owner" if owner else f"agent {agent!r}",
                 ", read-only" if read_only else "")
        return record, secret

    def list(self) -> list[KeyRecord]:
        with self._lock:
            return sorted(self._read().values(), key=lambda r: (r.created, r.id))

    def revoke(self, key_id: str) -> KeyRecord:
        """Remove a key; raises ``KeyError`` naming the id when there is none."""
        with self._lock:
            records = self._read()
            record = records.pop(key_id, None)
            if record is None:
                raise KeyError(key_id)
            self._write(records)
        log.info("key %s revoked", key_id)
        return record

    def take(self, other: "KeyStore") -> "tuple[builtins.list[str], builtins.list[str]]":
        """Every key of ``other`` (a backup's file) whose id this file lacks, added as it is
        (hashed secrets: the key holders' secrets keep working); ``(added, already_here)``
        ids. A key of an id already here is never replaced.

        Raises:
            KeyFileError: either file is unsafe or damaged (nothing is written).
        """
        theirs = other.list()
        with self._lock:
            records = self._read()
            added = [r.id for r in theirs if r.id not in records]
            if added:
                records.update({r.id: r for r in theirs if r.id in added})
                self._write(records)
        return added, [r.id for r in theirs if r.id not in added]

    # ------------------------------------------------------------------ checking

    def authenticate(self, secret: str) -> Principal | None:
        """The principal of ``secret``, or ``None`` for a secret no record matches.

        Raises:
            KeyFileError: the key file is unsafe or unreadable (the server refuses every key
                rather than guess).
        """
        key_id = key_id_of(secret)
        if key_id is None:
            return None
        with self._lock:
            self._refresh()
            record = self._records.get(key_id)
        if record is None or not hmac.compare_digest(record.sha256, digest(secret)):
            return None
        return Principal(record.id, record.agent, record.owner, record.read_only)

    def exists(self, key_id: str) -> bool:
        """Whether ``key_id`` is still issued (a session bound to it ends with it).

        Raises:
            KeyFileError: as :meth:`authenticate`.
        """
        with self._lock:
            self._refresh()
            return key_id in self._records

    def _refresh(self) -> None:
        try:
            info = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self._seen, self._records = None, {}
            return
        except OSError as exc:
            raise KeyFileError(f"cannot read the key file {self.path}: {exc.strerror}") from None
        seen = (info.st_ino, info.st_size, info.st_mtime_ns)
        if seen != self._seen:
            self._records = self._read()
            self._seen = seen

    # ------------------------------------------------------------------ the file

    def _read(self) -> dict[str, KeyRecord]:
        """Every record; an absent file is no keys. Refuses a symlink, another user's file,
        or one that others may read or write (``chmod 600`` it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise KeyFileError(f"the key file {self.path} is a symbolic link; refusing to "
                                   "follow it (remove the link)") from None
            raise KeyFileError(f"cannot read the key file {self.path}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_uid != os.getuid():
                raise KeyFileError(f"the key file {self.path} belongs to uid {info.st_uid}, not "
                                   "to you; refusing to trust it")
            if stat.S_IMODE(info.st_mode) & 0o077:
                raise KeyFileError(f"the key file {self.path} has mode "
                                   f"{stat.S_IMODE(info.st_mode):04o}; others could read or change "
                                   f"it. Run: chmod 600 {self.path}")
            raw = handle.read()
        try:
            data = json.loads(raw.decode("utf-8"))
            return {str(r["id"]): KeyRecord(
                id=str(r["id"]), agent=None if r["agent"] is None else str(r["agent"]),
                owner=bool(r["owner"]), read_only=bool(r["read_only"]), name=str(r["name"]),
                created=float(r["created"]), sha256=str(r["sha256"])) for r in data["keys"]}
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise KeyFileError(f"the key file {self.path} is damaged ({type(exc).__name__}: "
                               f"{str(exc)[:100]}); move it away and issue the keys again") from None

    def _write(self, records: dict[str, KeyRecord]) -> None:
        """Replace the file atomically: a private temporary sibling created exclusively (no
        symlink can stand in for it), fsynced, renamed over the file (a rename replaces a
        link planted at the name; it never writes through it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = json.dumps({"version": 1, "keys": [asdict(r) for r in records.values()]},
                          ensure_ascii=False, indent=1)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                os.fchmod(out.fileno(), 0o600)  # whatever the umask
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self._seen = None  # re-read on the next check, by this process too
