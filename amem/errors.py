"""The one exception tree of the amem package.

    AmemError                      base of everything amem raises on purpose (a MemoryToolError)
    ├── ConfigError                a bad config key or value (names the key and the source)
    ├── ValidationError            bad input at the boundary; ``.field`` names the offending field
    ├── NotFoundError              an id that is not in the store (for this agent); ``.id``
    ├── EmbedderMismatchError      the store was built with another embedder; ``.stored`` / ``.given``
    ├── StoreLockedError           another process owns the embedded store; ``.path`` / ``.holder_pid``
    ├── BackendError               the vector engine failed or refused an operation
    │   └── StoreTooNewError       a newer amem wrote the store's format; ``.schema`` / ``.supported``
    ├── MissingExtraError          an optional dependency is not installed; ``.install`` says how
    └── LLMError                   the LLM endpoint failed (callers fall back to offline enrichment)
        └── LLMResponseError       the reply was not usable JSON of the right shape; ``.raw``

ConfigError, ValidationError and NotFoundError are also the shared kinds of
:mod:`amem.kernel.errors` (``BadConfigError``, ``InvalidArgumentError``, ``IdNotFoundError``),
which give them their fields. Callers catch ``AmemError``, or ``MemoryToolError`` for amem's
and lcm's errors alike; the tool facade turns each into a structured error.
"""

from __future__ import annotations

from amem.kernel.errors import BadConfigError, IdNotFoundError, InvalidArgumentError, MemoryToolError


class AmemError(MemoryToolError):
    """Base class of every error amem raises on purpose."""

    code = "amem_error"


class ConfigError(AmemError, BadConfigError):
    """A configuration key or value is invalid; ``key`` names it."""

    code = "config_error"


class ValidationError(AmemError, InvalidArgumentError):
    """Input rejected at the boundary. Nothing stored was changed; ``field`` names the input."""

    code = "invalid_argument"


class NotFoundError(AmemError, IdNotFoundError):
    """No such note (for this agent); ``id`` is the one asked for."""

    code = "not_found"


class EmbedderMismatchError(AmemError):
    """The store's vectors were made by another embedder than the one given."""

    code = "embedder_mismatch"

    def __init__(self, message: str, *, stored: str, given: str) -> None:
        super().__init__(message)
        self.stored = stored
        self.given = given


class StoreLockedError(AmemError):
    """The embedded store is owned by another process."""

    code = "store_locked"

    def __init__(self, message: str, *, path: str, holder_pid: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.holder_pid = holder_pid


class BackendError(AmemError):
    """The vector engine failed or refused an operation."""

    code = "backend_error"


class StoreTooNewError(BackendError):
    """The store's format is newer than this code knows: a newer amem upgraded it.

    Writing it with this code would leave notes the newer upgrades already passed over
    without what those upgrades give (older releases did exactly that, silently)."""

    code = "schema_too_new"

    def __init__(self, message: str, *, schema: int, supported: int) -> None:
        super().__init__(message)
        self.schema = schema
        self.supported = supported


class MissingExtraError(AmemError, ImportError):
    """An optional dependency is missing; ``install`` is the command that brings it."""

    code = "missing_extra"

    def __init__(self, message: str, *, install: str) -> None:
        super().__init__(f"{message} (install it with: {install})")
        self.install = install


class LLMError(AmemError):
    """The LLM endpoint could not be used (connection, status, timeout, open circuit)."""

    code = "llm_error"


class LLMResponseError(LLMError):
    """The LLM answered, but not with JSON of the expected shape."""

    code = "llm_bad_response"

    def __init__(self, message: str, *, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw
