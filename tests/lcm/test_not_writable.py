"""A conversation store file this user may not write (another user's, or marked immutable).

SQLite opens such a file for reading without a word, so it opened, answered reads, and then
every write failed as "unexpected OperationalError: attempt to write a readonly database";
doctor reported its four full-text indexes out of sync (their integrity check is a write).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import StoreFileError

from ..permissions import unwritable

KEY = "agent:a1:main"


def test_a_write_says_the_file_cannot_be_written_and_reads_still_answer(tmp_path: Path) -> None:
    path = tmp_path / "lcm.db"
    with LcmStore(path, LcmConfig(log_file_enabled=False), clock=ManualClock()) as store:
        store.ingest(KEY, [{"role": "user", "content": "kept before the file was locked"}])
    with unwritable(path), LcmStore(path, LcmConfig(log_file_enabled=False), clock=ManualClock()) as store:
        with pytest.raises(StoreFileError) as refused:
            store.ingest(KEY, [{"role": "user", "content": "refused"}])
        said = str(refused.value)
        assert str(path) in said and "cannot be written" in said and "permissions" in said, said
        assert refused.value.advice and "backup" not in said
        assert [i.content for i in store.assemble(KEY, 1000).items] == ["kept before the file was locked"]
        report = store.doctor()
    assert report.checks.get("fts_out_of_sync") == 0, report
    (issue,) = [i for i in report.issues if i.check == "not_writable"]
    assert str(path) in issue.detail and "permissions" in issue.detail
    assert report.ok is False
