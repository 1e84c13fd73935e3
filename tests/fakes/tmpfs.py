"""A small real filesystem to fill: a tmpfs mounted for one test (root and a kernel that allow
it), or the test skips saying why. Only the pages written take memory."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(mount: Path, size: int) -> Iterator[Path]:
    """``mount`` (created) holding a tmpfs of ``size`` bytes, unmounted at the end."""
    mount.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command to make a small tmpfs")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", f"amem-test-{uuid.uuid4().hex[:8]}",
                           str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and a kernel that allows it): "
                    f"{made.stderr.strip() or made.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def fill(directory: Path) -> Path:
    """Take every free byte of ``directory``'s filesystem with one file (another program
    filled the disk); returns it (delete it to make room again)."""
    filler = directory / "filler"
    st = os.statvfs(directory)
    with open(filler, "wb") as out:
        os.posix_fallocate(out.fileno(), 0, st.f_bavail * st.f_frsize)
    return filler
