"""Progress bars for long CLI commands (import, consolidate, reembed), drawn by ``tqdm``.

One callable serves every long job: importers and ``reembed`` call it as ``bar(done, total)``,
consolidation as ``bar(stage, done, total)`` (scan, pairs, merge, pending: one bar per stage).
It draws on stderr only, and only when stderr is a terminal and ``--quiet`` is off: stdout
carries results (and is the MCP wire in ``amem serve``), and pipes and CI logs stay clean.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm


class Progress:
    """``bar(done, total)`` or ``bar(stage, done, total)``; use as a context manager.

    Args:
        label: What is being counted ("import", "reembed" ...); a stage is appended to it.
        stream: Where to draw (stderr by default; stdout stays for results).
        enabled: Force on or off; by default on only when ``stream`` is a terminal.
        quiet: ``--quiet``: never draw, whatever the stream.
        unit: What one step is ("note"; "conversation" for a chat export).
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None,
                 quiet: bool = False, unit: str = "note") -> None:
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        on = enabled if enabled is not None else bool(isatty and isatty())
        self.enabled = on and not quiet
        self._bar: tqdm[None] | None = None
        self._stage: str | None = None

    def __call__(self, *args: object) -> None:
        """``(done, total)`` or ``(stage, done, total)``; ``total`` may be None (unknown)."""
        stage: str | None
        if len(args) == 3:
            stage, done, total = str(args[0]), args[1], args[2]
        elif len(args) in (1, 2):
            stage, done, total = None, args[0], args[1] if len(args) == 2 else None
        else:
            raise TypeError(f"progress takes (done, total) or (stage, done, total), got {args!r}")
        if not self.enabled:
            return
        if not isinstance(done, int) or not (total is None or isinstance(total, int)):
            raise TypeError(f"progress counts must be integers, got {done!r}, {total!r}")
        bar = self._bar
        # a new stage, or the same stage starting over (the next agent's scan): a new bar
        if bar is None or stage != self._stage or done < bar.n:
            # imported only when a bar is drawn: tqdm reads its version from the installed
            # metadata (importlib.metadata), a tenth of a command's start on a pipe
            from tqdm import tqdm

            self.close()
            desc = self.label if stage is None else f"{self.label}: {stage}"
            sized = _has_size(self.stream)
            bar = self._bar = tqdm(total=total, desc=desc, file=self.stream, unit=self.unit,
                                   dynamic_ncols=sized, ncols=None if sized else 80,
                                   nrows=None if sized else 24, leave=True)
            self._stage = stage
        if total is not None and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        """End the current bar (the next call, or a new stage, starts another)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._stage = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _has_size(stream: TextIO) -> bool:
    """Whether the terminal behind ``stream`` says how big it is. A new pty reports 0 columns
    and 0 lines until someone sizes it (``docker exec -t``, some CI runners); tqdm fitted its
    bar to that and drew nothing (on stderr it also hid every bar below line 0), so such a
    terminal is taken as 80 x 24."""
    import os

    try:
        size = os.get_terminal_size(stream.fileno())
        return size.columns > 0 and size.lines > 0
    except (AttributeError, OSError, ValueError):  # not a file, or no terminal behind it
        return True
