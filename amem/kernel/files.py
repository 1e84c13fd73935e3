"""Owner-only files and directories, symlink refusal, and the free-space check before a write.

Every file and directory amem and lcm create is private to the owner (directories 0700, files
0600) whatever the process umask: the modes are given to ``mkdir`` / ``os.open`` at creation, so
there is never a moment when another user could open the file. A library must not change its
host's umask; the CLI and the server may set one as a second line of defence.

Lock, log and record files are opened with ``O_NOFOLLOW``: a symbolic link planted in their
place (to make amem truncate or append to the link's target) is refused with
:class:`UnsafePathError` naming the path, and the target is never opened.

:class:`FreeSpace` is the seam of the disk-full check: writes that grow the embedded engine's
memory-mapped files check first (the engine dies of SIGBUS, not an error, when a mapped page
cannot be backed), and fail with :class:`DiskFullError` (code ``disk_full``) naming the path.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Protocol

from .errors import DiskFullError, UnsafePathError

__all__ = ["flock_holder", "flock_held", "PRIVATE_DIR", "PRIVATE_FILE", "UnsafePathError", "DiskFullError", "FreeSpace",
           "StatvfsFreeSpace", "FixedFreeSpace", "private_dir", "open_private", "refuse_symlink",
           "precreate_private", "write_private", "check_free_space", "unallocated_bytes", "is_disk_full",
           "filesystem_type", "allocates_on_read",
           "wide_modes", "fix_modes"]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
#: the permission bits that make a file or directory visible to someone other than its owner
_SHARED_BITS = 0o077


def _symlink_error(path: Path) -> UnsafePathError:
    return UnsafePathError(
        f"{path} is a symbolic link; amem never follows links for its lock, log and record "
        "files (a link there could make it overwrite another file). Remove the link and retry.",
        path=str(path))


def private_dir(path: str | Path) -> Path:
    """``path`` as a directory, each component created here made 0700; existing ones untouched.

    ``Path.mkdir(parents=True, mode=...)`` gives the mode to the last component only, so the
    missing parents are created one by one.
    """
    path = Path(path)
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail with a less useful message
            raise _symlink_error(probe)
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # created meanwhile by another process; keep its mode
            continue
        # mkdir's mode is masked by the umask; a umask can only remove bits, and 0700 & ~umask
        # drops an owner bit only under an odd umask like 0o100, which chmod corrects.
        if stat.S_IMODE(part.stat().st_mode) != PRIVATE_DIR:
            os.chmod(part, PRIVATE_DIR)
    return path


def open_private(path: str | Path, flags: int) -> int:
    """``os.open(path, flags)`` refusing a symbolic link; a file it creates is 0600."""
    path = Path(path)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    except OSError as exc:
        # ELOOP is Linux's and the BSDs' answer to O_NOFOLLOW on a link; EMLINK is FreeBSD's
        if exc.errno in (errno.ELOOP, errno.EMLINK) and path.is_symlink():
            raise _symlink_error(path) from None
        raise


def refuse_symlink(path: str | Path) -> None:
    """Raise :class:`UnsafePathError` when ``path`` exists as a symbolic link (for files whose
    opener cannot take ``O_NOFOLLOW``, such as a rename target)."""
    if Path(path).is_symlink():
        raise _symlink_error(Path(path))


def precreate_private(path: str | Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (SQLite's database file: SQLite
    creates ``-wal`` / ``-shm`` with the mode of the database file it belongs to)."""
    try:
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return
    os.close(fd)


def write_private(path: str | Path, data: bytes) -> None:
    """Create or replace the contents of ``path`` (0600 when created), refusing a link."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class FreeSpace(Protocol):
    """How many bytes a write may still add to the filesystem that holds ``path``."""

    def free_bytes(self, path: Path) -> int:
        """Bytes available to this (unprivileged) process on ``path``'s filesystem."""
        ...


class StatvfsFreeSpace:
    """The real provider: ``statvfs``'s blocks available to non-root users."""

    def free_bytes(self, path: Path) -> int:
        probe = path
        while not probe.exists() and probe.parent != probe:  # not created yet: its filesystem
            probe = probe.parent
        st = os.statvfs(probe)
        return st.f_bavail * st.f_frsize


class FixedFreeSpace:
    """A provider that reports what it is told (as ``ManualClock`` tells the time): for tests
    and for a store that must stay under a budget whatever the disk holds."""

    def __init__(self, free: int) -> None:
        self.free = free

    def free_bytes(self, path: Path) -> int:
        return self.free


def check_free_space(space: FreeSpace, path: Path, needed: int, *,
                     doing: str = "this write") -> None:
    """Raise :class:`DiskFullError` unless ``needed`` bytes are free on ``path``'s filesystem
    (``doing``: what they are needed for, as the message says it)."""
    free = space.free_bytes(path)
    if free < needed:
        raise DiskFullError(
            f"not enough free disk space for {doing} at {path}: {free:,} bytes free, "
            f"{needed:,} needed; nothing was written. Free some space and retry.",
            path=str(path), needed=needed, free=free)


def unallocated_bytes(root: str | Path) -> int:
    """The holes of the files under ``root``: bytes their lengths promise that the filesystem
    has not allocated yet (a sparse file's), which a write through a memory map can claim."""
    total = 0
    for here, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(here, name))
            except FileNotFoundError:  # removed while walking
                continue
            if stat.S_ISREG(st.st_mode):
                total += max(0, st.st_size - st.st_blocks * 512)
    return total


#: filesystems whose shared memory maps take a page even to read a hole (shmem)
_ALLOCATE_ON_READ = frozenset({"tmpfs"})


def filesystem_type(path: str | Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem holding ``path`` (Linux's mount table), or None when unknown."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as table:
            lines = table.readlines()
    except OSError:
        return None
    probe = Path(path)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    target = os.path.realpath(probe)
    best, kind = "", None
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        after = line.split(" - ", 1)[1].split()
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best) and after:
            best, kind = point, after[0]
    return kind


def allocates_on_read(path: str | Path) -> bool:
    """Whether reading a hole of a file under ``path`` through a shared map takes space."""
    return filesystem_type(path) in _ALLOCATE_ON_READ


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is the operating system's "no space" / "quota exceeded" failure."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def wide_modes(root: str | Path) -> Iterator[tuple[Path, int]]:
    """Each file or directory under ``root`` (itself included) that others may read or enter,
    with its mode; links are neither reported nor followed."""
    root = Path(root)
    if not root.exists() or root.is_symlink():
        return
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            st = here.lstat()
        except FileNotFoundError:  # removed while walking (a rotated log, a rename)
            continue
        if stat.S_ISLNK(st.st_mode):
            continue
        if st.st_mode & _SHARED_BITS:
            yield here, stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            try:
                stack.extend(sorted(here.iterdir(), reverse=True))
            except PermissionError:
                continue


def fix_modes(root: str | Path, *, keep: Collection[Path] = ()) -> list[tuple[Path, int, int]]:
    """Take the group and other bits off everything ``wide_modes`` finds but ``keep``:
    (path, old, new) for each one changed."""
    fixed: list[tuple[Path, int, int]] = []
    for path, mode in list(wide_modes(root)):
        if path in keep:
            continue
        new = mode & ~_SHARED_BITS
        os.chmod(path, new)  # wide_modes skipped links, so this changes the file itself
        fixed.append((path, mode, new))
    return fixed


def flock_holder(path: Path, locks: Path = Path("/proc/locks")) -> int | None:
    """The pid holding a ``flock`` on ``path`` (Linux's lock table), or None when unknown.

    The engine locks its WAL directory without writing its pid anywhere: a process holding it
    without our ``LOCK`` (an engine child outliving a killed parent) is found here."""
    try:
        st = path.stat()
        table = locks.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1285 fe:00:5424611 0 EOF" (a blocked waiter has "->")
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        try:
            major, minor, inode = fields[5].split(":")
            pid = int(fields[4])
            same = (int(inode) == st.st_ino and int(major, 16) == os.major(st.st_dev)
                    and int(minor, 16) == os.minor(st.st_dev))
        except ValueError:
            continue
        if same:
            return pid
    return None


def flock_held(path: Path) -> bool:
    """Whether another open file holds a ``flock`` on ``path`` (a writer still at work on it):
    tried without waiting, released at once. False for a path that cannot be opened (gone,
    a link: nothing of ours to wait for)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False
