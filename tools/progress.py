"""A tiny progress bar on stderr: rate and ETA, drawn only when stderr is a terminal.

No dependency: long CLI jobs (import, consolidate, reembed) call it as ``bar(done, total)``;
when stderr is not a TTY (pipes, CI, MCP stdio mode) it draws nothing at all.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``bar(done, total)`` redraws one line; ``bar.close()`` ends it.

    Args:
        label: What is being counted ("import", "reembed" ...).
        stream: Where to draw (stderr by default; stdout stays for results).
        enabled: Force on or off; by default on only when ``stream`` is a terminal.
        min_interval: Seconds between redraws, so fast loops do not flood the terminal.
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None,
                 min_interval: float = 0.1, width: int = 28) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = enabled if enabled is not None else bool(isatty and isatty())
        self.min_interval = min_interval
        self.width = width
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int | None = None) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        self.stream.write("\r" + self.render(done, total, now - self.started))
        self.stream.flush()
        self._drawn = True

    def render(self, done: int, total: int | None, elapsed: float) -> str:
        """One line: label, bar, counts, rate and ETA (pure; tested directly)."""
        rate = done / elapsed if elapsed > 0 else 0.0
        if total:
            frac = min(1.0, done / total)
            filled = int(frac * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            eta = (total - done) / rate if rate > 0 else float("nan")
            eta_text = _clock(eta) if eta == eta else "--:--"
            return f"{self.label} [{bar}] {done}/{total} {frac:4.0%} {rate:,.1f}/s ETA {eta_text}"
        return f"{self.label} {done} done {rate:,.1f}/s {_clock(elapsed)}"

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
