"""A store this user may not write (a read-only data directory, files written through sudo)
is said to be one, naming the file and what to do: it said "[Errno 13] Permission denied:
.../LOCK", or called the store "not an amem edge store"."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem.backends import EdgeBackend
from amem.backends._lock import LOCK_NAME, owner_message
from amem.errors import BackendError

from ...permissions import unwritable


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
