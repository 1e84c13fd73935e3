"""What a PostgreSQL host reports about its own set-up: no largeFilesDir, no event log, numbers as numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmStore
from lcm.errors import LargeFilesDirMissingError, LcmEngineError
from tools import ToolFacade
from tools.host_http import _STATUS

from ...tools.http_server import owner_client, running_http
from ..conftest import chat

KEY = "agent:alice:main"
BIG = "\n".join(f"row {i}: value={i * 7}" for i in range(2000))


def test_a_large_message_without_largefilesdir_says_to_set_it_and_is_no_server_error(
        make_pg_store: Callable[..., LcmStore]) -> None:  # fmt: skip
    store = make_pg_store(large_file_threshold_tokens=1000, log_file_enabled=True)
    with pytest.raises(LargeFilesDirMissingError) as err:
        store.ingest(KEY, [{"role": "user", "content": "small"}, {"role": "tool", "content": BIG}])
    said = str(err.value)
    assert err.value.field == "messages[1]" and err.value.code == "config_error" and err.value.key == "largeFilesDir"
    assert "set largeFilesDir (LCM_LARGE_FILES_DIR)" in said and "SQLite" not in said
    status = store.status()
    # no temporary directory shown as if configured, and no event log without a file to write
    assert status.large_files_dir is None and status.event_log is None
    facade = ToolFacade(None, store, agent_id="alice")
    with running_http(facade) as url, owner_client(url) as http:
        res = http.post("/lcm/ingest", json={"sessionKey": KEY, "messages": [{"role": "tool", "content": BIG}]},
                        headers={"X-Amem-Agent": "alice"})  # fmt: skip
    assert res.status_code == 503 and res.json()["error"]["code"] == "config_error", res.text


def test_every_engine_error_is_a_503_on_the_host_routes() -> None:
    import lcm.errors as errors

    codes = {cls.code for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, LcmEngineError)}
    assert codes >= {"store_unavailable", "schema_too_new", "unsupported_on_engine"}
    assert {code: _STATUS.get(code) for code in codes} == dict.fromkeys(codes, 503)


def test_status_and_doctor_numbers_are_numbers(make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = make_pg_store(large_file_threshold_tokens=1000, large_files_dir=str(tmp_path / "shared"), fresh_tail_count=4,
                          leaf_chunk_tokens=200)  # fmt: skip
    store.ingest(KEY, [*chat(40), {"role": "tool", "content": BIG}])
    store.compact(KEY, force=True)
    store.ingest("agent:alice:other", chat(40))
    assert store.assemble("agent:alice:other", 700).debt_recorded  # a debt: doctor ranks it
    status = store.status()
    for name in ("message_tokens", "context_tokens", "large_file_bytes", "messages", "summarized_source_tokens"):
        assert type(getattr(status, name)) is int, (name, type(getattr(status, name)))
    assert type(status.compression_ratio) is float
    doctor = json.loads(json.dumps(store.doctor().to_dict()))
    assert doctor["worst_conversations"], doctor
    for row in doctor["worst_conversations"]:
        assert all(not isinstance(v, str) for k, v in row.items() if k in ("score", "context_tokens")), row
    dumped = json.loads(json.dumps(status.to_dict()))
    assert isinstance(dumped["message_tokens"], int) and isinstance(dumped["context_tokens"], int)


def test_doctor_on_a_host_without_the_shared_directory_reports_configuration_not_damage(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:  # fmt: skip
    writer = make_pg_store(large_file_threshold_tokens=1000, large_files_dir=str(tmp_path / "shared"))
    writer.ingest(KEY, [{"role": "tool", "content": BIG}])
    assert writer.doctor().ok
    other = make_pg_store(large_file_threshold_tokens=1000)  # host B: no largeFilesDir
    report = other.doctor()
    assert report.ok, report.issues
    assert "missing_files" not in report.checks and report.checks["large_files_not_checked"] == 1
    assert [i.check for i in report.issues] == ["large_files_not_checked"] and report.issues[0].severity == "warning"
    assert all(w.score == 0 or "missing" not in str(w) for w in report.worst_conversations)
    # a check PostgreSQL never runs is absent, not a constant 0
    assert "rows_out_of_time_order" not in report.checks
