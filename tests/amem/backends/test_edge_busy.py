"""Who holds a busy embedded store, as its busy message says: the owner of ``LOCK`` with its
command, an engine process holding the shard without it (an orphaned build child), and a
build copy still in use."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from amem.backends import EdgeBackend
from amem.backends._edge_build import BUILD_DIR
from amem.backends._lock import locked_message
from amem.errors import StoreLockedError

from ._data import DIM, random_points

REPO = Path(__file__).resolve().parents[3]


@contextmanager
def holding(code: str, *args: str) -> Iterator[int]:
    """A process running ``code`` (which prints a line once it holds what it holds) until the
    block ends; its pid."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)
        for pipe in (proc.stdout, proc.stdin):
            if pipe is not None:
                pipe.close()


#: an engine process on a shard without our LOCK, as an index build's orphaned child was
ENGINE = "import sys, qdrant_edge\ns = qdrant_edge.EdgeShard.load(sys.argv[1])\nprint('held', flush=True)\nsys.stdin.read()"
#: the owner of LOCK, run with the arguments of a scheduler run
OWNER = ("import sys\nfrom amem.backends import EdgeBackend\nb = EdgeBackend(sys.argv[1])\n"
         "print('held', flush=True)\nsys.stdin.read()")


def _store(path: Path) -> None:
    with EdgeBackend(path, DIM) as backend:
        backend.upsert(random_points(3, seed=1))


def test_an_engine_process_without_our_lock_is_named(tmp_path: Path) -> None:
    _store(tmp_path)
    with holding(ENGINE, str(tmp_path / "shard"), "optimize") as pid:
        with pytest.raises(StoreLockedError) as err:
            EdgeBackend(tmp_path)
    assert err.value.holder_pid == pid
    assert f"process {pid} (" in str(err.value)
    assert "optimize" in str(err.value)  # its command line, the code left out


def test_the_scheduled_run_is_named_and_serve_is_not_suggested(tmp_path: Path) -> None:
    _store(tmp_path)
    with holding(OWNER, str(tmp_path), "scheduler", "--once") as pid:
        with pytest.raises(StoreLockedError) as err:
            EdgeBackend(tmp_path)
    message = str(err.value)
    assert f"process {pid} (" in message and "scheduler --once" in message
    assert "amem serve" not in message
    assert "Retry" in message


def test_a_build_copy_still_in_use_is_not_deleted_under_its_process(tmp_path: Path) -> None:
    store, other = tmp_path / "store", tmp_path / "other"
    _store(store)
    _store(other)
    build = store / BUILD_DIR
    os.rename(other / "shard", build)  # a build's copy of a shard, as its child has it open
    with holding(ENGINE, str(build)) as pid:
        with pytest.raises(StoreLockedError) as err:
            EdgeBackend(store)
        assert build.exists()  # left to its process
    assert err.value.holder_pid == pid
    assert str(build) in str(err.value)
    with EdgeBackend(store) as backend:  # its process gone, the leftover is cleaned
        assert backend.count() == 3
    assert not build.exists()


STORE = Path("/data/amem/store")


def test_a_one_shot_command_holding_the_store_is_waited_for_not_served() -> None:
    # `amem scheduler --once` (or `amem list`) during `amem import` was told to "run `amem
    # serve` in the owning process": the import ends by itself; running again then is the way.
    for command in ("/home/u/.venv/bin/amem import notes.jsonl --no-enrich",
                    "/usr/bin/python3 -m tools.cli --home /data/amem consolidate",
                    "amem add we serve green tea",  # a note's words are not the command
                    "amem --agent ui --home /srv/serve list"):
        said = locked_message(STORE, 4242, command)
        assert "releases the store when it finishes" in said, said
        assert "owning process" not in said and "AMEM_QDRANT_URL" not in said


def test_a_server_or_an_unknown_holder_keeps_the_advice_to_share_the_store() -> None:
    for command in ("/home/u/.venv/bin/amem serve --agent me", "amem --home /d --json serve",
                    "python my_bot.py", "python -m tools.cli", None):
        said = locked_message(STORE, 4242, command)
        assert "Run `amem serve` in the owning process" in said, said
