"""The exception tree of the lcm package.

    LcmError                     base of everything lcm raises on purpose (a MemoryToolError)
    ├── LcmConfigError           a bad config key or value; ``.key`` and ``.source`` name them
    │   └── LargeFilesDirMissingError  a large message on a store with no shared largeFilesDir; ``.field``
    ├── LcmValidationError       bad input at the boundary; ``.field`` names the offending field
    │   ├── ReplayFloodError     a batch refused by the anti-replay guard; ``.role``, ``.count``
    │   └── RegexRefusedError    a regex RE2 cannot run, or an invalid one; ``.pattern``
    ├── LcmNotFoundError         an id that is not in the store; ``.id``
    ├── PathEscapeError          a file reference that would resolve outside the data directory
    ├── EmbedderMissingError     semantic/hybrid recall or embedding asked of a store without an embedder
    ├── EmbedderMismatchError    the store's vectors were made by another embedder; ``.stored`` / ``.given``
    ├── ConcurrentChangeError    the context changed under a compaction step (retry later)
    ├── StoreBusyError           another process held the write lock past the wait; ``.path``
    ├── StoreClosedError         a call on a store after ``close()`` (also a sqlite3.ProgrammingError)
    ├── ForkedStoreError         a call in a process forked after the store was opened; ``.owner_pid``
    ├── CopyVerificationError    a copied store does not match its source; ``.problems``
    └── LcmEngineError           the storage engine (lcm.pg) cannot serve the call
        ├── StoreFileError           a SQLite store file will not open; ``.problem``, ``.advice``
        ├── StoreUnavailableError    the database server is down or dropped the connection
        ├── SchemaTooNewError        the database was migrated by newer code; ``.unknown``
        └── UnsupportedOnEngineError an operation not ported to this engine; ``.operation``

LcmConfigError, LcmValidationError and LcmNotFoundError are also the shared kinds of
:mod:`amem.kernel.errors` (``BadConfigError``, ``InvalidArgumentError``, ``IdNotFoundError``),
which give them their fields; callers that serve both packages catch ``MemoryToolError``.
Every error that rejects input is raised before anything is written.
"""

from __future__ import annotations

import sqlite3

from amem.kernel.errors import BadConfigError, IdNotFoundError, InvalidArgumentError, MemoryToolError


class LcmError(MemoryToolError):
    """Base class of every error lcm raises on purpose."""

    code = "lcm_error"


class LcmConfigError(LcmError, BadConfigError):
    """A configuration key or value is invalid; ``key`` and ``source`` name them."""

    code = "config_error"


class LargeFilesDirMissingError(LcmConfigError):
    """A message over ``largeFileThresholdTokens`` sent to a store whose hosts share no
    ``largeFilesDir`` (PostgreSQL without one): a configuration to fix on the host, not bad
    input; ``field`` names the message (``messages[i]``). Nothing of the batch was stored."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, key="largeFilesDir")
        self.field = field


class LcmValidationError(LcmError, InvalidArgumentError):
    """Input rejected at the boundary. Nothing stored was changed; ``field`` names the input."""

    code = "invalid_argument"


class ReplayFloodError(LcmValidationError):
    """Too many identical messages in one second: the batch looks like a replay."""

    code = "replay_flood"

    def __init__(self, message: str, *, role: str, count: int, threshold: int) -> None:
        super().__init__(message, field="messages")
        self.role = role
        self.count = count
        self.threshold = threshold


class RegexRefusedError(LcmValidationError):
    """A regex that is invalid, too large, or uses a construct RE2 cannot run was refused."""

    code = "regex_refused"

    def __init__(self, message: str, *, pattern: str) -> None:
        super().__init__(message, field="pattern")
        self.pattern = pattern


class LcmNotFoundError(LcmError, IdNotFoundError):
    """No such summary, file, message or conversation; ``id`` is the one asked for."""

    code = "not_found"


class PathEscapeError(LcmError, PermissionError):
    """A stored file path would resolve outside the large-files directory."""

    code = "path_escape"


class ConcurrentChangeError(LcmError):
    """The context items changed while a summary was being written; the step was discarded."""

    code = "concurrent_change"


class EmbedderMissingError(LcmError):
    """Semantic recall needs an embedder and this store was opened without one."""

    code = "embedder_unavailable"


class StoreClosedError(LcmError, sqlite3.ProgrammingError):
    """A call on a store after ``close()``. Also the ``sqlite3.ProgrammingError`` it was before,
    so code catching that still does."""

    code = "store_closed"


class ForkedStoreError(LcmError):
    """A call on a store from a process forked after it was opened: a SQLite connection must not
    cross a fork (the child's writes would go through the parent's connection, locks and cache).
    The child opens its own ``LcmStore`` on the same file; ``owner_pid`` opened this one."""

    code = "store_forked"

    def __init__(self, message: str, *, owner_pid: int) -> None:
        super().__init__(message)
        self.owner_pid = owner_pid


class EmbedderMismatchError(LcmError):
    """The store's vectors were made by another embedder than the one given, and the store was
    not asked to switch (``LcmStore(..., switch_embedder=True)``): semantic and hybrid recall
    and embedding are refused rather than every message re-embedded behind the caller's back.
    ``stored`` is the recorded model, ``given`` the one this store was opened with."""

    code = "embedder_mismatch"

    def __init__(self, message: str, *, stored: str, given: str) -> None:
        super().__init__(message)
        self.stored = stored
        self.given = given


class CopyVerificationError(LcmError):
    """A copy (``amem lcm migrate``) whose verification failed: counts that differ from the source,
    or references that do not resolve in the copy. The copy was rolled back."""

    code = "verification_failed"

    def __init__(self, message: str, *, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class LcmEngineError(LcmError):
    """The storage engine behind the store cannot serve the call (see the subclasses)."""

    code = "engine_error"


class StoreFileError(LcmEngineError):
    """A SQLite store file that will not open: ``problem`` names the file and what is wrong with
    it, ``advice`` what to do; the message is both. ``amem doctor`` reports the two apart, so
    it can add what the store's state stops without saying the advice twice."""

    def __init__(self, problem: str, advice: str, *, pointer: str = "") -> None:
        super().__init__(f"the conversation store {problem}: {advice}{pointer}")
        self.problem = problem
        self.advice = advice


#: what to do about a store file this user may not write (not damage: nothing to restore)
NOT_WRITABLE_ADVICE = "it needs a file and a directory this user may write; check their owner and permissions"


def read_only(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite refusing a write to a file it opened read-only (a file another
    user owns, or one marked immutable: SQLite opens it for reading without a word)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == 8  # SQLITE_READONLY and its extended codes


def not_writable(path: str, exc: BaseException) -> StoreFileError:
    """The error for a write refused by a store file this user may not write."""
    return StoreFileError(f"{path} cannot be written ({exc}); nothing was stored", NOT_WRITABLE_ADVICE)


def unopenable(path: str, exc: Exception) -> StoreFileError:
    """The error for a SQLite store file that will not open, naming the file and what to do
    (it said "unexpected DatabaseError: database disk image is malformed", naming neither)."""
    text = str(exc)
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreFileError(f"{path} cannot be opened for writing ({text})", NOT_WRITABLE_ADVICE)
    return StoreFileError(f"{path} cannot be opened ({text})",
                          "restore it from a backup, or move it aside to start an empty one",
                          pointer=" (`amem doctor` checks it)")


class StoreUnavailableError(LcmEngineError):
    """The database server cannot be reached, or dropped the connection mid-call.

    A write that raised this was rolled back by the server: nothing of it is stored.
    """

    code = "store_unavailable"


class SchemaTooNewError(LcmEngineError):
    """The database holds migrations this code does not know: it was upgraded by newer code."""

    code = "schema_too_new"

    def __init__(self, message: str, *, unknown: list[str]) -> None:
        super().__init__(message)
        self.unknown = unknown


class UnsupportedOnEngineError(LcmEngineError, NotImplementedError):
    """An operation that is not (yet) available on this storage engine; never a silent wrong answer."""

    code = "unsupported_on_engine"

    def __init__(self, message: str, *, operation: str, engine: str) -> None:
        super().__init__(message)
        self.operation = operation
        self.engine = engine


class StoreBusyError(LcmError):
    """Another process held the database's write lock past the busy wait; nothing was written
    (the code the embedded notes store's lock uses, so hosts and the CLI treat both alike)."""

    code = "store_locked"

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
