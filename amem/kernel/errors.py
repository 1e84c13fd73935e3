"""The coded error root that amem's and lcm's exception trees both subclass.

    MemoryToolError                  base of every error amem or lcm raises on purpose; ``.code``
    ├── InvalidArgumentError         bad input at the boundary; ``.field``      (also a ValueError)
    │   ├── amem.errors.ValidationError
    │   └── lcm.errors.LcmValidationError (ReplayFloodError, RegexRefusedError)
    ├── BadConfigError               a bad config key or value; ``.key``, ``.source`` (a ValueError)
    │   ├── amem.errors.ConfigError
    │   └── lcm.errors.LcmConfigError
    ├── IdNotFoundError              an id that is not in the store; ``.id``     (also a KeyError)
    │   ├── amem.errors.NotFoundError
    │   └── lcm.errors.LcmNotFoundError
    ├── CircuitOpenError             a circuit breaker refused a call (``amem.kernel.breaker``)
    ├── UnsafePathError              a lock, log or record path is a symbolic link; ``.path``
    ├── DiskFullError                not enough free space for a write; ``.path`` (``disk_full``)
    ├── amem.errors.AmemError        the root of amem's tree (drawn in ``amem/errors.py``)
    └── lcm.errors.LcmError          the root of lcm's tree (drawn in ``lcm/errors.py``)

Each package's own classes subclass both their package root and the shared kind here
(``class ValidationError(AmemError, InvalidArgumentError)``), so a caller can catch by
package (``except LcmError``), by kind (``except InvalidArgumentError``), or everything
raised on purpose (``except MemoryToolError``: the facade, the CLI and the servers do this
and turn ``.code`` into a structured error). ``code`` is a class attribute: one code a class,
the value callers and the tool schema see.
"""

from __future__ import annotations

__all__ = ["MemoryToolError", "InvalidArgumentError", "BadConfigError", "IdNotFoundError",
           "CircuitOpenError", "UnsafePathError", "DiskFullError"]


class MemoryToolError(Exception):
    """Base class of every error amem or lcm raises on purpose; ``code`` names it for callers."""

    code = "error"


class InvalidArgumentError(MemoryToolError, ValueError):
    """Input rejected at the boundary. Nothing stored was changed."""

    code = "invalid_argument"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class BadConfigError(MemoryToolError, ValueError):
    """A configuration key or value is invalid; ``key`` and ``source`` (file, env) say where."""

    code = "config_error"

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.source = source


class IdNotFoundError(MemoryToolError, KeyError):
    """No such id (for this agent)."""

    code = "not_found"

    def __init__(self, message: str, *, id: str | None = None) -> None:
        super().__init__(message)
        self.id = id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class CircuitOpenError(MemoryToolError):
    """A circuit breaker refused the call: the endpoint failed too often, too recently."""

    code = "circuit_open"


class UnsafePathError(MemoryToolError):
    """A lock, log or record path is a symbolic link (or not a regular file); nothing was opened."""

    code = "unsafe_path"

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class DiskFullError(MemoryToolError):
    """Not enough free space for a write; nothing of the write was acknowledged."""

    code = "disk_full"

    def __init__(self, message: str, *, path: str, needed: int | None = None,
                 free: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.needed = needed
        self.free = free
