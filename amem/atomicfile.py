"""One way to replace a small file atomically and durably.

A reader sees the old file or the new one, never half of either: the text goes to a temporary
sibling (created exclusively, with the file's final permissions from the start), is fsynced,
renamed over the target, and the directory is fsynced so the rename itself survives a crash.
The store's ``meta.json``, the nightly record and the server record all go through here: each
is private to its owner (0600, in directories created 0700) and never written through a
symbolic link planted at its name (``amem.kernel.files``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from amem.kernel.errors import DiskFullError
from amem.kernel.files import is_disk_full, open_private, private_dir, refuse_symlink

__all__ = ["write_text_atomic", "writing_atomic", "writing_atomic_bytes", "fsync_dir"]


def write_text_atomic(path: Path, text: str, *, private: bool = True) -> None:
    """Replace ``path`` with ``text``, readable by its owner only (0600).

    Raises ``UnsafePathError`` when ``path`` is a symbolic link: the rename would replace the
    link, not its target, but a link there is someone's attempt, and is reported, not undone.
    ``DiskFullError`` when the disk has no room (the old file is kept whole).

    ``private`` is accepted for callers written when it was a choice; every file is private
    now, and ``private=False`` is refused rather than quietly ignored.
    """
    if not private:
        raise ValueError("write_text_atomic writes owner-only files (0600); private=False is not supported")
    with writing_atomic(path) as out:
        out.write(text)


@contextmanager
def writing_atomic(path: Path) -> Iterator[TextIO]:
    """A text stream that replaces ``path`` when the ``with`` block ends without an error.

    For a file written piece by piece (``amem export``): until the end, ``path`` keeps what it
    held (or stays absent), so a writer killed halfway leaves no truncated file at the name
    that a reader would take as whole, and never destroys the previous copy. A failed block
    removes its temporary sibling; a killed one leaves ``.<name>.<pid>.tmp`` beside it.
    The same errors as ``write_text_atomic``.
    """
    with _replacing(path) as (tmp, fd):
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())


@contextmanager
def writing_atomic_bytes(path: Path) -> Iterator[BinaryIO]:
    """``writing_atomic`` for bytes (a copied database, a file of any kind)."""
    with _replacing(path) as (tmp, fd):
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())


@contextmanager
def _replacing(path: Path) -> Iterator[tuple[Path, int]]:
    """The private temporary sibling of ``path`` (and its descriptor) that the block fills;
    renamed over ``path`` when the block ends without an error, removed when it fails."""
    path = Path(path)
    private_dir(path.parent)
    refuse_symlink(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # left by a killed writer of this pid (a link: the link goes)
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        yield tmp, fd
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):
            raise DiskFullError(f"the disk holding {path} is full; {path.name} was not replaced "
                                "(the previous version is kept)", path=str(path)) from exc
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (a rename into it) survive a crash."""
    try:
        dir_fd = os.open(path, os.O_RDONLY)
    except OSError:  # some filesystems do not open directories; the rename is still atomic
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
