"""A full disk is an error, not a signal (issue 23): the embedded engine writes through memory
maps and dies of SIGBUS when a page cannot be backed, so every write checks the free space
first and fails with ``disk_full`` naming the path; the process lives on, reads keep working,
and nothing acknowledged is lost.

The seam test drives ``EdgeBackend``'s free-space provider (``FixedFreeSpace``); the tmpfs
test fills a real small filesystem, in child processes so that a SIGBUS fails the test
instead of killing pytest. It mounts a tmpfs (root, and a kernel that allows it) or skips
saying why.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.backends.edge import DISK_MARGIN_BYTES, EdgeBackend
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.kernel.errors import DiskFullError
from amem.kernel.files import FixedFreeSpace
from tools import ToolFacade
from tests.fakes.tmpfs import small_tmpfs

ROOT = Path(__file__).resolve().parents[3]
PLENTY = 1 << 40


def _texts(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"text": f"note {i} about the deploy of service {i} and its rollback plan"}
            for i in range(start, start + n)]


def test_a_write_without_room_is_refused_before_the_engine_and_reads_go_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    space = FixedFreeSpace(PLENTY)
    embedder = HashingEmbedder()
    backend = EdgeBackend(tmp_path / "store", embedder.dim, free_space=space)
    with MemoryStore(backend=backend, embedder=embedder, agent_id="a",
                     config=load_config(overrides={"fold_threshold": 1.0})) as store:
        acknowledged = store.add_many(_texts(20), enrich=False)
        assert len(acknowledged) == 20
        space.free = DISK_MARGIN_BYTES  # someone else filled the disk
        with pytest.raises(DiskFullError) as full:
            store.add_many(_texts(5, 20), enrich=False)
        assert full.value.code == "disk_full" and full.value.path == str(tmp_path / "store")
        assert f"at {tmp_path / 'store'}" in str(full.value) and "nothing was written" in str(full.value)
        assert full.value.needed is not None and full.value.free == DISK_MARGIN_BYTES
        # through the tool facade: a structured error, never internal
        refused = ToolFacade(store, None, agent_id="a").call("memory_add", {"text": "one more note"})
        assert refused["error"]["code"] == "disk_full"
        # reads are untouched, and only acknowledged notes are there
        assert store.count(agent_id="a") == 20
        assert store.search("rollback plan of service 7", limit=3, agent_id="a")
        # a delete marks the note (a payload write): refused the same way, the note kept
        with pytest.raises(DiskFullError):
            store.delete(acknowledged[0].id, agent_id="a")
        assert store.get(acknowledged[0].id, agent_id="a").is_active
        space.free = PLENTY  # room again: writes go on
        assert store.add("the disk has room again", agent_id="a", enrich=False).status == "created"
    with caplog.at_level(logging.WARNING, logger="amem.index"), \
            MemoryStore(tmp_path / "store", embedder=embedder, agent_id="a") as again:
        assert again.count(agent_id="a") == 21  # every acknowledged note, none of the refused
    # the refused batch's BM25 counts were taken back at once, not found wrong at this open
    assert "BM25 statistics" not in caplog.text


# ------------------------------------------------------------------------------ real tmpfs

#: a tmpfs of this size holds a fresh store's allocated pages and its holes, with room to
#: write; only the pages used take memory
TMPFS_BYTES = 320 * 1024 * 1024

_CHILD = r"""
import json, os, sys
from pathlib import Path
from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.kernel.errors import DiskFullError

mode, store_path = sys.argv[1], Path(sys.argv[2])
config = load_config(overrides={"fold_threshold": 1.0, "optimize_after": 0})
out = {}
try:
    store = MemoryStore(store_path, embedder=HashingEmbedder(), agent_id="a", config=config)
except DiskFullError as exc:
    print(json.dumps({"open_error": {"code": exc.code, "path": exc.path, "message": str(exc)}}))
    sys.exit(0)
with store:
    if mode == "fill":
        store.add_many([{"text": f"first note {i} about service {i}"} for i in range(200)], enrich=False)
        store.flush()
        # another program fills the disk, leaving a few MB: less than the engine's files
        # may claim (the old code died of SIGBUS in the next writes)
        st = os.statvfs(store_path)
        with open(store_path.parent / "filler", "wb") as filler:
            os.posix_fallocate(filler.fileno(), 0, st.f_bavail * st.f_frsize - 4 * 1024 * 1024)
        written = 200
        try:
            for batch in range(1000):  # bounded: the check refuses long before
                store.add_many([{"text": f"more {batch}.{i} about service {i}"} for i in range(50)],
                               enrich=False)
                written += 50
        except DiskFullError as exc:
            out["error"] = {"code": exc.code, "path": exc.path, "message": str(exc)}
        out["acknowledged"] = written
    out["count"] = store.count(agent_id="a")
    out["hits"] = len(store.search("about service 7", limit=3, agent_id="a"))
print(json.dumps(out))
"""


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "tmpfs", TMPFS_BYTES) as mount:
        yield mount


def _child(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def _last_json(run: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert run.returncode == 0, f"the process died ({run.returncode}; -7 is SIGBUS): {run.stderr[-2000:]}"
    return dict(json.loads(run.stdout.splitlines()[-1]))


@pytest.mark.slow  # about 8 s: four processes (writer, reader, the CLI, reader) on a real filesystem
def test_a_full_tmpfs_gives_disk_full_never_sigbus(tmpfs: Path) -> None:
    store = tmpfs / "home" / "store"
    report = _last_json(_child("-c", _CHILD, "fill", str(store)))
    error = report["error"]
    assert isinstance(error, dict) and error["code"] == "disk_full" and error["path"] == str(store)
    assert f"at {store}" in error["message"]
    # the process lived on: it counted and searched after the refusal (a server keeps reading)
    assert report["count"] == report["acknowledged"] == 200 and report["hits"] == 3
    # a new process cannot map the store on this full tmpfs: told so, not killed
    reopened = _last_json(_child("-c", _CHILD, "read", str(store)))
    assert reopened["open_error"]["code"] == "disk_full"  # type: ignore[index]
    # the CLI's import on the same disk: an error naming the store, exit 1, not SIGBUS (135)
    src = tmpfs.parent / "notes.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in _texts(200, 10_000)), encoding="utf-8")
    env = {**os.environ, "AMEM_HOME": str(store.parent), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "a"}
    imported = subprocess.run([sys.executable, "-m", "tools.cli", "import", str(src), "--no-enrich", "--json"],
                              capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert imported.returncode == 1, (imported.returncode, imported.stderr[-2000:])
    assert json.loads(imported.stdout)["error"]["code"] == "disk_full"
    assert f"at {store}" in imported.stderr
    # room again: every acknowledged note is there
    (store.parent / "filler").unlink()
    assert _last_json(_child("-c", _CHILD, "read", str(store))) == {"count": 200, "hits": 3}


def test_lcm_on_a_full_tmpfs_rolls_back_with_disk_full(tmpfs: Path) -> None:
    import httpx

    from lcm import LcmConfig, LcmStore
    from tests.tools.http_server import OWNER_SECRET, running_http

    key = "agent:a:main"
    with LcmStore(str(tmpfs / "lcm.db"), LcmConfig(log_file_enabled=False)) as lcm:
        lcm.ingest(key, [{"role": "user", "content": "the first message"}])
        st = os.statvfs(tmpfs)
        with open(tmpfs / "filler", "wb") as filler:  # the disk fills up but for 512 KB
            os.posix_fallocate(filler.fileno(), 0, st.f_bavail * st.f_frsize - 512 * 1024)
        stored = 1
        with pytest.raises(DiskFullError) as full:
            for i in range(2000):  # bounded: 512 KB holds far fewer
                lcm.ingest(key, [{"role": "user", "content": f"message {i} " + "word " * 200}])
                stored += 1
        assert full.value.code == "disk_full" and full.value.path == str(tmpfs / "lcm.db")
        assert lcm.db.scalar("SELECT count(*) FROM messages") == stored  # the refused one rolled back
        assert lcm.assemble(key, 100_000).to_dict()["items"]  # reads go on
        with running_http(ToolFacade(None, lcm, agent_id="a")) as url, httpx.Client(timeout=30) as http:
            res = http.post(url.removesuffix("/mcp") + "/lcm/ingest",
                            headers={"X-Amem-Agent": "a", "Authorization": f"Bearer {OWNER_SECRET}"},
                            json={"messages": [{"role": "user", "content": "late " + "word " * 200}]})
        assert res.status_code == 507 and res.json()["error"]["code"] == "disk_full", res.text
        assert lcm.db.scalar("SELECT count(*) FROM messages") == stored


class FillingDisk:
    """A disk another program fills: plenty of room until ``fill_after(n)``, then room for ``n``
    more writes' checks, then none."""

    def __init__(self) -> None:
        self.left: int | None = None

    def fill_after(self, checks: int) -> None:
        self.left = checks

    def free_bytes(self, path: Path) -> int:
        if self.left is None:
            return PLENTY
        self.left -= 1
        return PLENTY if self.left >= 0 else 0


def test_an_import_stops_at_the_batch_that_did_not_fit_and_a_rerun_stores_the_rest(tmp_path: Path) -> None:
    from amem.importer import import_file

    src = tmp_path / "notes.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in _texts(60)), encoding="utf-8")
    embedder = HashingEmbedder()
    config = load_config(overrides={"fold_threshold": 1.0, "optimize_after": 0})
    disk = FillingDisk()
    backend = EdgeBackend(tmp_path / "store", embedder.dim, free_space=disk)
    with MemoryStore(backend=backend, embedder=embedder, agent_id="a", config=config) as store:
        disk.fill_after(1)  # the first batch's write fits, the next does not
        with pytest.raises(DiskFullError) as full:
            import_file(store, src, enrich=False, batch=20)
        message = str(full.value)
        assert full.value.code == "disk_full" and "The import stopped at line" in message
        assert "run the same import again" in message
        assert store.count(agent_id="a") == 20  # the acknowledged batch, none of the refused
        # the exact figure, read back from the engine (the report lags the batches written
        # ahead of the refused one)
        assert "the store now holds 20 active notes of this agent, 0 before the import" in message
        disk.left = None  # room again
        again = import_file(store, src, enrich=False, batch=20)
        assert store.count(agent_id="a") == 60 and again.deduplicated + again.created == 60


def test_the_filesystem_type_comes_from_the_mount_table(tmp_path: Path) -> None:
    from amem.kernel.files import filesystem_type

    table = tmp_path / "mountinfo"
    (tmp_path / "fast").mkdir()  # a mount point exists; the store under it not yet
    table.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"40 22 0:35 / {tmp_path}/fast rw,relatime shared:20 - tmpfs tmpfs rw,size=1024k\n",
        encoding="utf-8")
    assert filesystem_type(tmp_path / "fast" / "store", str(table)) == "tmpfs"
    assert filesystem_type(tmp_path / "slow", str(table)) == "ext4"
    assert filesystem_type(tmp_path, str(tmp_path / "no-such-table")) is None


def test_the_engines_holes_are_not_counted_where_reads_do_not_claim_them(
        disk_tmp_path: Path) -> None:
    """A small store keeps taking writes, and builds its index, with far less room than its
    files' length: on ext4 only writes fill the engine's holes (``_edge_space``), and the
    build's copy keeps them. (Counted whole, a 21 MB store was refused with 254 MB free and a
    build asked for 1 GB.)"""
    from amem.backends._edge_space import allocated_bytes
    from amem.kernel.files import allocates_on_read, unallocated_bytes

    tmp_path = disk_tmp_path
    if allocates_on_read(tmp_path):
        pytest.skip(f"{tmp_path} is on tmpfs, where an open claims the holes it reads")
    embedder = HashingEmbedder()
    space = FixedFreeSpace(PLENTY)
    store_dir = tmp_path / "store"
    backend = EdgeBackend(store_dir, embedder.dim, free_space=space)
    with MemoryStore(backend=backend, embedder=embedder, agent_id="a",
                     config=load_config(overrides={"fold_threshold": 1.0})) as store:
        store.add_many(_texts(50), enrich=False)
        holes = unallocated_bytes(store_dir / "shard")
        room = 64 * 1024 * 1024
        assert holes > 2 * room  # the engine's files are mostly holes
        space.free = room
        assert len(store.add_many(_texts(10, 50), enrich=False)) == 10
        backend.optimize_on_copy()  # the copy keeps the holes: twice the store's blocks fit
        assert allocated_bytes(store_dir / "shard") < room // 2
        assert store.count(agent_id="a") == 60
