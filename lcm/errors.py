"""The exception tree of the lcm package.

    LcmError                     base of everything lcm raises on purpose
    ├── LcmConfigError           a bad config key or value; ``.key`` and ``.source`` name them
    ├── LcmValidationError       bad input at the boundary; ``.field`` names the offending field
    │   ├── ReplayFloodError     a batch refused by the anti-replay guard; ``.role``, ``.count``
    │   └── RegexRefusedError    a regex RE2 cannot run, or an invalid one; ``.pattern``
    ├── LcmNotFoundError         an id that is not in the store; ``.id``
    ├── PathEscapeError          a file reference that would resolve outside the data directory
    ├── EmbedderMissingError     semantic/hybrid recall or embedding asked of a store without an embedder
    └── ConcurrentChangeError    the context changed under a compaction step (retry later)

Every error that rejects input is raised before anything is written.
"""

from __future__ import annotations


class LcmError(Exception):
    """Base class of every error lcm raises on purpose."""

    code = "lcm_error"


class LcmConfigError(LcmError, ValueError):
    """A configuration key or value is invalid."""

    code = "config_error"

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.source = source


class LcmValidationError(LcmError, ValueError):
    """Input rejected at the boundary. Nothing stored was changed."""

    code = "invalid_argument"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


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


class LcmNotFoundError(LcmError, KeyError):
    """No such summary, file, message or conversation."""

    code = "not_found"

    def __init__(self, message: str, *, id: str | None = None) -> None:
        super().__init__(message)
        self.id = id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class PathEscapeError(LcmError, PermissionError):
    """A stored file path would resolve outside the large-files directory."""

    code = "path_escape"


class ConcurrentChangeError(LcmError):
    """The context items changed while a summary was being written; the step was discarded."""

    code = "concurrent_change"


class EmbedderMissingError(LcmError):
    """Semantic recall needs an embedder and this store was opened without one."""

    code = "embedder_unavailable"
