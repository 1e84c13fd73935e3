"""Private files and refused symlinks (issue 23): under a umask of 0o022 every file amem or
lcm creates is 0600 and every directory 0700; ``amem doctor`` names wider paths and ``--fix``
narrows them; a symbolic link planted at a lock, log or record name is refused with an error
naming the path, and the link's target is never truncated or appended to."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.atomicfile import write_text_atomic
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.kernel.files import UnsafePathError, private_dir, wide_modes
from lcm import LcmConfig, LcmStore
from lcm.events import EventLog
from scheduler.endnote import EndNote
from scheduler.record import RunLock, write_record
from tools.cli import main
from tools.remote import serving_record

PRECIOUS = "the target's own bytes\n"


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    """The common default umask: without explicit modes, files would be 0644, dirs 0755."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "alice",
            "LCM_LARGE_FILE_TOKEN_THRESHOLD": "50"}


def _modes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): oct(stat.S_IMODE(p.lstat().st_mode)) for p in [root, *root.rglob("*")]}


def _target(tmp_path: Path) -> Path:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_text(PRECIOUS, encoding="utf-8")
    return target


def test_every_file_the_cli_creates_is_private(tmp_path: Path, env: dict[str, str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    home = Path(env["AMEM_HOME"])
    assert main(["add", "Alice prefers green tea", "--no-enrich"], env=env) == 0
    talk = tmp_path / "talk.jsonl"
    talk.write_text(json.dumps({"role": "user", "content": "hello"}) + "\n"
                    + json.dumps({"role": "tool", "content": "word " * 400}) + "\n", encoding="utf-8")
    assert main(["lcm", "ingest", str(talk), "--session-key", "agent:alice:main"], env=env) == 0
    with serving_record(home, transport="http", url="http://127.0.0.1:1/mcp"):
        write_record(home / "nightly.json", {"last_run": {"status": "ok"}})
        with RunLock(home / "nightly.lock"):
            modes = _modes(home)
    capsys.readouterr()
    # the places the issue names are all there, so the check below covers them
    for name in ("store", "store/LOCK", "store/meta.json", "lcm.db", "lcm-log.jsonl", "lcm-files",
                 "server.json", "nightly.json", "nightly.lock"):
        assert name in modes, sorted(modes)
    assert any(name.startswith("lcm-files/c") for name in modes)  # a large payload was stored
    assert any(name.startswith("store/shard/segments/") for name in modes)  # the engine's files
    wide = {name: mode for name, mode in modes.items()
            if int(mode, 8) & 0o077}
    assert wide == {}


def test_private_dir_makes_each_missing_level_0700_and_leaves_existing_ones(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir(mode=0o755)
    made = private_dir(tmp_path / "shared" / "a" / "b")
    assert made.is_dir()
    assert oct(stat.S_IMODE((tmp_path / "shared").stat().st_mode)) == "0o755"  # not ours to change
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in (tmp_path / "shared" / "a", made)] == ["0o700"] * 2


def test_doctor_names_wide_paths_and_fix_makes_them_private(env: dict[str, str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    home = Path(env["AMEM_HOME"])
    assert main(["add", "Alice prefers green tea", "--no-enrich"], env=env) == 0
    assert main(["lcm", "status"], env=env) == 0  # creates lcm.db
    capsys.readouterr()
    # a store from before: world-readable
    os.chmod(home / "store", 0o755)
    os.chmod(home / "lcm.db", 0o644)
    (home / "my-own-notes.txt").write_text("not amem's", encoding="utf-8")  # 0644, not ours
    # the nightly run history and end note, copied in by hand: each holds what ran when
    for name in ("nightly_runs.jsonl", "nightly_end.json"):
        (home / name).write_text("{}\n", encoding="utf-8")
        os.chmod(home / name, 0o644)
    assert main(["doctor", "--json"], env=env) == 1
    report = json.loads(capsys.readouterr().out)
    found = {(w["path"], w["mode"]) for w in report["files"]["wide"]}
    assert found == {(str(home / "store"), "0o755"), (str(home / "lcm.db"), "0o644"),
                     (str(home / "nightly_runs.jsonl"), "0o644"), (str(home / "nightly_end.json"), "0o644")}
    assert report["ok"] is False and any("amem doctor --fix" in w for w in report["warnings"])
    assert main(["doctor", "--fix", "--json"], env=env) == 0
    fixed = json.loads(capsys.readouterr().out)["files"]
    assert {(f["path"], f["was"], f["now"]) for f in fixed["fixed"]} == {
        (str(home / "store"), "0o755", "0o700"), (str(home / "lcm.db"), "0o644", "0o600"),
        (str(home / "nightly_runs.jsonl"), "0o644", "0o600"), (str(home / "nightly_end.json"), "0o644", "0o600")}
    assert fixed["private"] is True
    assert [p.name for p, _ in wide_modes(home)] == ["my-own-notes.txt"]  # not ours: left alone


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = _target(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    (store / "LOCK").symlink_to(target)
    with pytest.raises(UnsafePathError) as refused:
        MemoryStore(str(store), embedder=HashingEmbedder(), agent_id="a")
    assert refused.value.path == str(store / "LOCK") and "symbolic link" in str(refused.value)
    assert refused.value.code == "unsafe_path"
    assert target.read_text(encoding="utf-8") == PRECIOUS


def test_the_cli_refuses_a_lock_symlink_with_its_path(tmp_path: Path, env: dict[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    target = _target(tmp_path)
    store = Path(env["AMEM_HOME"]) / "store"
    store.mkdir(parents=True)
    (store / "LOCK").symlink_to(target)
    assert main(["status"], env=env) != 0
    err = capsys.readouterr().err
    assert f"{store / 'LOCK'} is a symbolic link" in err and "Traceback" not in err
    assert target.read_text(encoding="utf-8") == PRECIOUS


def test_a_planted_meta_symlink_is_refused(tmp_path: Path) -> None:
    target = _target(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    (store / "meta.json").symlink_to(target)
    with pytest.raises(UnsafePathError) as refused:
        write_text_atomic(store / "meta.json", "{}")
    assert refused.value.path == str(store / "meta.json")
    assert target.read_text(encoding="utf-8") == PRECIOUS and (store / "meta.json").is_symlink()


def test_records_and_the_nightly_lock_refuse_symlinks(tmp_path: Path) -> None:
    target = _target(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "server.json").symlink_to(target)
    with pytest.raises(UnsafePathError, match="server.json is a symbolic link"):
        with serving_record(home, transport="http", url="http://127.0.0.1:1/mcp"):
            pass
    (home / "nightly.lock").symlink_to(target)
    with pytest.raises(UnsafePathError, match="nightly.lock is a symbolic link"):
        RunLock(home / "nightly.lock").acquire()
    (home / "nightly.json").symlink_to(target)
    with pytest.raises(UnsafePathError, match="nightly.json is a symbolic link"):
        write_record(home / "nightly.json", {})
    # the run's end note is a fallback: a link there is refused and said, and the run goes on
    (home / "nightly_end.json").symlink_to(target)
    note = EndNote(home / "nightly_end.json")
    note.reserve("2027-05-01T02:30:05+00:00")
    assert "symbolic link" in (note.write({"status": "ok"}) or "")
    assert target.read_text(encoding="utf-8") == PRECIOUS


def test_the_event_log_never_appends_through_a_link(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    target = _target(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "lcm-log.jsonl").symlink_to(target)
    with caplog.at_level(logging.WARNING, logger="lcm.events"), \
            LcmStore(str(data / "lcm.db"), LcmConfig()) as lcm:
        stored = lcm.ingest("agent:a:main", [{"role": "user", "content": "hello there"}])
    assert stored.stored == 1  # the write path goes on; the log says why it has no line
    assert target.read_text(encoding="utf-8") == PRECIOUS
    assert any(f"{data / 'lcm-log.jsonl'} is a symbolic link" in r.getMessage() for r in caplog.records)


def test_rotation_never_moves_onto_a_planted_link(tmp_path: Path) -> None:
    target = _target(tmp_path)
    clock = ManualClock(datetime(2026, 3, 1, 12, tzinfo=timezone.utc))
    log_path = tmp_path / "lcm-log.jsonl"
    log = EventLog(log_path, clock, max_bytes=300)
    (tmp_path / "lcm-log.2026-03-01.jsonl").symlink_to(target)
    for n in range(10):  # past max_bytes: rotated at least once
        log.write("ingest", n=n, text="x" * 40)
    assert target.read_text(encoding="utf-8") == PRECIOUS
    assert (tmp_path / "lcm-log.2026-03-01.jsonl").is_symlink()
    rotated = sorted(p.name for p in tmp_path.glob("lcm-log.2026-03-01.*.jsonl"))
    assert rotated and all(stat.S_IMODE((tmp_path / n).stat().st_mode) == 0o600 for n in rotated)


def test_qdrant_local_mode_directory_is_private(tmp_path: Path) -> None:
    from amem.backends.qdrant import QdrantServerBackend

    with QdrantServerBackend.local(tmp_path / "q" / "local", dim=8):
        pass
    assert [oct(stat.S_IMODE((tmp_path / "q" / p).stat().st_mode)) for p in ("", "local")] == ["0o700"] * 2
