"""A store this user may not write (a read-only data directory, files written through sudo)
is said to be one, naming the file and what to do: it said "[Errno 13] Permission denied:
.../LOCK", or called the store "not an amem edge store"."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from amem.backends import EdgeBackend
from amem.backends._lock import LOCK_NAME, owner_message
from amem.errors import BackendError


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


def test_a_lock_file_this_user_may_not_write_names_the_cause_and_the_way_out(tmp_path: Path) -> None:
    EdgeBackend(tmp_path / "store", 4).close()
    lock = tmp_path / "store" / LOCK_NAME
    with unwritable(lock), pytest.raises(BackendError) as refused:
        EdgeBackend(tmp_path / "store", 4)
    message = str(refused.value)
    assert str(lock) in message and "cannot be opened by this user" in message
    assert "chown -R" in message and "writable" in message


def test_the_message_names_the_owner_when_it_can() -> None:
    message = owner_message(Path("/"), PermissionError(13, "Permission denied"))
    assert "it belongs to root" in message and "Permission denied" in message
