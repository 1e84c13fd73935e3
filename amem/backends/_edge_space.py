"""What the embedded engine's files really take on disk, for the free-space checks.

The engine sets a file's length first and fills it later through a memory map, so its files
are mostly holes: a 3,000-note store measured 298 MB long and 9 MB allocated on ext4. The
check before a write used to count every hole as needed, so a 21 MB store refused a write
with 254 MB free and a build asked for 1 GB. Measured which holes are ever claimed, on ext4
and on tmpfs (``st_blocks`` against ``st_size`` before and after an open, a search, a write):

* **Filled by writes only**, in order, as data arrives: the WAL segments (``wal/open-N``,
  32 MB each), the float vectors (``vector_storage-*/vectors/chunk_N.mmap``), the sparse
  vectors and payloads (``*/store/page_N.dat``, ``payload_storage/page_N.dat``). An open or
  a search never claims their holes, on tmpfs either (they stayed 160 MB of holes after a
  search); a write claims about what it writes, which the write's own estimate counts.
* **Read whole at open**: the payload indexes kept in RAM (``payload_index/*/page_N.dat``,
  4 MB each) and the flag files. On ext4 a read of a hole claims nothing. On tmpfs a read
  through a shared map takes a page (the first search after an import took 79 MB more),
  so those holes are room an open needs there.

So the holes count only where reads claim them (``allocates_on_read``), and only those of
files read whole; a copy of the shard (the index build's) keeps the holes
(:func:`copy_sparse`) and needs about the allocated size (:func:`allocated_bytes`).
"""

from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["WRITE_FILLED", "allocated_bytes", "copy_sparse", "data_extents", "read_claimed_holes"]

#: the engine files (paths under the shard, ``fnmatch`` patterns) whose holes only writes fill
WRITE_FILLED = (
    "wal/open-*",
    "segments/*/vector_storage-*/vectors/chunk_*.mmap",
    "segments/*/vector_storage-*/store/page_*.dat",
    "segments/*/payload_storage/page_*.dat",
)


def _files(root: Path) -> list[tuple[str, os.stat_result]]:
    """The regular files under ``root`` (paths relative to it, '/'-separated) and their stats."""
    found: list[tuple[str, os.stat_result]] = []
    for here, _dirs, names in os.walk(root):
        for name in names:
            full = os.path.join(here, name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:  # removed while walking
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((Path(os.path.relpath(full, root)).as_posix(), st))
    return found


def read_claimed_holes(shard: Path) -> int:
    """The holes of the shard's files that an open reads whole (see the module docstring):
    the room an open needs where a read of a hole takes space (tmpfs)."""
    if not shard.is_dir():
        return 0
    return sum(max(0, st.st_size - st.st_blocks * 512) for rel, st in _files(shard)
               if not any(fnmatch.fnmatchcase(rel, pattern) for pattern in WRITE_FILLED))


def allocated_bytes(root: Path) -> int:
    """The bytes the files under ``root`` take on disk (their blocks, not their lengths)."""
    return sum(st.st_blocks * 512 for _rel, st in _files(root)) if root.is_dir() else 0


def data_extents(fd: int) -> Iterator[tuple[int, int]]:
    """The (start, end) byte ranges of an open file that hold data, holes left out; the whole
    file where the system cannot tell (no ``SEEK_DATA``)."""
    size = os.fstat(fd).st_size
    if not hasattr(os, "SEEK_DATA"):
        yield 0, size
        return
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # no data after offset: the rest is a hole
                return
            yield offset, size  # SEEK_DATA refused (a file system without it): read it all
            return
        end = os.lseek(fd, start, os.SEEK_HOLE)
        yield start, end
        offset = end


def copy_sparse(src: str, dst: str) -> str:
    """Copy one file keeping its holes (a ``shutil.copytree`` ``copy_function``).

    ``shutil.copy2`` writes every hole as zeros, so a copy of a 9 MB store took its 298 MB
    of length on disk, and the build had to refuse without that much room."""
    with open(src, "rb") as source, open(dst, "wb") as target:
        size = os.fstat(source.fileno()).st_size
        for start, end in data_extents(source.fileno()):
            source.seek(start)
            target.seek(start)
            left = end - start
            while left > 0:
                chunk = source.read(min(left, 1 << 20))
                if not chunk:
                    break
                target.write(chunk)
                left -= len(chunk)
        target.truncate(size)
    shutil.copystat(src, dst)
    return dst
