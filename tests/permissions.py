"""A file refused to this process for writing, for real, whoever runs the tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """``path`` refused to this process for writing, for real: ``chmod`` for a user, the
    immutable flag for root (which no mode stops)."""
    if os.geteuid() != 0:
        path.chmod(0o400)
        try:
            yield
        finally:
            path.chmod(0o600)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode:
        pytest.skip(f"root, and {path}'s filesystem takes no immutable flag: nothing refuses root")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)
