"""Large payloads: stored as files under the data directory with a ``file_`` id and an exploration summary."""

from __future__ import annotations

import codecs
import fcntl
import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amem.kernel.files import flock_held, open_private, private_dir
from lcm.errors import LcmNotFoundError, PathEscapeError
from lcm.extract import SourceUnit, extractive_summary
from lcm.tokens import estimate_tokens

__all__ = ["LargeFileStore", "StoredFile", "FILE_ID_RE", "LEFTOVER_AGE_S", "file_reference", "open_file_store",
           "files_dir"]

FILE_ID_RE = re.compile(r"^file_[0-9a-f]{16}\Z")  # \Z: no trailing newline
#: a large file's ``.tmp`` this old (by its modification time) that no writer holds is a
#: leftover of a write killed before its rename. A write takes well under a second; the age
#: also covers a writer on another host sharing ``largeFilesDir`` (NFS), whose lock may not
#: reach this one
LEFTOVER_AGE_S = 3600.0
_EXT = {"application/json": ".json", "text/csv": ".csv", "text/x-python": ".py", "text/markdown": ".md"}


@dataclass(frozen=True)
class StoredFile:
    file_id: str
    name: str
    mime_type: str
    size_bytes: int
    token_count: int
    storage_path: str  # relative to the large-files directory
    exploration_summary: str


def sniff_mime(text: str, name: str) -> str:
    lowered = name.lower()
    for ext, mime in ((".json", "application/json"), (".csv", "text/csv"), (".py", "text/x-python"),
                      (".md", "text/markdown")):  # fmt: skip
        if lowered.endswith(ext):
            return mime
    head = text.lstrip()[:1]
    if head in "{[":
        try:
            json.loads(text)
            return "application/json"
        except ValueError:
            pass
    return "text/plain"


def explore(text: str, name: str, mime: str, target_tokens: int = 600) -> str:
    """A deterministic look at a large payload: shape, structure, and the lines that matter."""
    lines = text.splitlines()
    facts = [f"{name}: {mime}, {len(text.encode('utf-8'))} bytes, {len(lines)} lines, ~{estimate_tokens(text)} tokens."]
    if mime == "application/json":
        try:
            doc = json.loads(text)
            if isinstance(doc, dict):
                facts.append(f"JSON object with keys: {', '.join(list(map(str, doc))[:30])}")
            elif isinstance(doc, list):
                facts.append(f"JSON array of {len(doc)} items")
        except ValueError:
            facts.append("Looks like JSON but does not parse.")
    elif mime == "text/csv" and lines:
        facts.append(f"CSV header: {lines[0][:300]}")
    defs = [ln.strip() for ln in lines if re.match(r"\s*(def |class |function |fn |func |export |CREATE TABLE)", ln)]
    if defs:
        facts.append("Definitions: " + "; ".join(d[:80] for d in defs[:20]))
    facts.append("Begins: " + " / ".join(ln.strip()[:120] for ln in lines[:3] if ln.strip()))
    header = "\n".join(facts)
    body = extractive_summary([SourceUnit("file", "file", "", text)], target_tokens, header=header)
    return body


def file_reference(stored: StoredFile) -> str:
    """The compact text a message keeps in place of the payload."""
    return (
        f"[LCM File: {stored.file_id} | {stored.name} | {stored.mime_type} | {stored.size_bytes} bytes | "
        f"~{stored.token_count} tokens]\nExploration summary:\n{stored.exploration_summary}"
    )


class LargeFileStore:
    """Files live under one directory; ids are validated and paths confined to it."""

    def __init__(self, base_dir: str | Path) -> None:
        self.base_dir = Path(base_dir)

    def store(self, conversation_id: int, text: str, name: str | None = None) -> StoredFile:
        file_id = "file_" + secrets.token_hex(8)
        name = (name or "payload.txt").replace("/", "_").replace("\\", "_")[:120]
        mime = sniff_mime(text, name)
        rel = f"c{int(conversation_id)}/{file_id}{_EXT.get(mime, '.txt')}"
        path = self.resolve(rel)
        private_dir(path.parent)  # 0700, every level created here (the base directory too)
        tmp = path.with_suffix(path.suffix + ".tmp")
        # 0600, never through a link; locked from its creation past its rename, so the
        # doctor never takes a write under way for a leftover (:meth:`leftovers`)
        with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as out:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)
            out.write(text.encode("utf-8"))
            out.flush()
            os.replace(tmp, path)  # a crash leaves either no file or the whole file (or a .tmp)
        return StoredFile(
            file_id=file_id,
            name=name,
            mime_type=mime,
            size_bytes=len(text.encode("utf-8")),
            token_count=estimate_tokens(text),
            storage_path=rel,
            exploration_summary=explore(text, name, mime),
        )

    def resolve(self, storage_path: str) -> Path:
        """The absolute path for a stored relative path, refusing anything outside the directory."""
        base = self.base_dir.resolve()
        candidate = (base / storage_path).resolve()
        if os.path.isabs(storage_path) or not candidate.is_relative_to(base):
            raise PathEscapeError(f"stored path {storage_path!r} resolves outside {base}")
        return candidate

    def read_slice(self, file_id: str, storage_path: str, offset: int, limit: int) -> tuple[str, bool]:
        """Up to ``limit`` characters from ``offset``; returns (text, more_remaining)."""
        if not FILE_ID_RE.match(file_id):
            raise LcmNotFoundError(f"not a file id: {file_id!r}", id=file_id)
        path = self.resolve(storage_path)
        try:
            # newline="": the text as stored ("\r\n" and a lone "\r" kept, not read as "\n")
            with path.open("r", encoding="utf-8", newline="") as fh:
                text = fh.read(offset + limit + 1)
        except FileNotFoundError as exc:
            raise LcmNotFoundError(f"file {file_id} is recorded but missing on disk", id=file_id) from exc
        chunk = text[offset : offset + limit]
        return chunk, len(text) > offset + limit

    def read_head(self, file_id: str, storage_path: str, max_bytes: int) -> tuple[str, bool]:
        """The file's first ``max_bytes`` bytes as text (a character cut by the limit is left
        out whole); returns (text, more_remaining)."""
        if not FILE_ID_RE.match(file_id):
            raise LcmNotFoundError(f"not a file id: {file_id!r}", id=file_id)
        path = self.resolve(storage_path)
        try:
            with path.open("rb") as fh:
                data = fh.read(max_bytes + 1)
        except FileNotFoundError as exc:
            raise LcmNotFoundError(f"file {file_id} is recorded but missing on disk", id=file_id) from exc
        more = len(data) > max_bytes
        # An incremental decoder that is not told the end keeps a cut character's bytes back.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(data[:max_bytes], final=not more), more

    def delete(self, storage_path: str) -> bool:
        try:
            self.resolve(storage_path).unlink()
            return True
        except FileNotFoundError:
            return False

    def list_files(self) -> list[str]:
        """Relative paths of every stored file on disk (for orphan reports)."""
        if not self.base_dir.exists():
            return []
        base = self.base_dir.resolve()
        return sorted(
            str(p.relative_to(base)) for p in base.rglob("file_*") if p.is_file() and not p.name.endswith(".tmp")
        )

    def leftovers(self, *, min_age_s: float = LEFTOVER_AGE_S) -> list[tuple[str, int]]:
        """The ``.tmp`` files of large-file writes killed before their rename: (relative path,
        bytes) of each at least ``min_age_s`` old that no writer holds, sorted. No row names
        them; the write they belonged to failed with its process, so nothing refers to them."""
        if not self.base_dir.exists():
            return []
        base, now = self.base_dir.resolve(), time.time()
        found: list[tuple[str, int]] = []
        for p in base.rglob("*.tmp"):
            try:
                st = p.lstat()
            except FileNotFoundError:  # renamed or removed meanwhile: not a leftover
                continue
            if p.is_symlink() or not p.is_file() or now - st.st_mtime < min_age_s or flock_held(p):
                continue
            found.append((str(p.relative_to(base)), st.st_size))
        return sorted(found)

    def remove_leftovers(self, *, min_age_s: float = LEFTOVER_AGE_S) -> list[str]:
        """Delete what :meth:`leftovers` finds now (each looked at again: a writer may have
        started since a report); the relative paths removed."""
        removed = []
        for rel, _size in self.leftovers(min_age_s=min_age_s):
            try:
                self.resolve(rel).unlink()
            except FileNotFoundError:
                continue
            removed.append(rel)
        return removed


def files_dir(configured: str, data_dir: Path | None) -> Path | None:
    """Where a store's large files live: ``largeFilesDir`` when configured, else ``lcm-files``
    in the database's directory; None for neither (an in-memory database, a server)."""
    if configured:
        return Path(configured).expanduser()
    return None if data_dir is None else data_dir / "lcm-files"


def open_file_store(
    configured: str, data_dir: Path | None
) -> tuple[LargeFileStore, tempfile.TemporaryDirectory[str] | None]:
    """A store's large files: under ``largeFilesDir`` when configured, else ``lcm-files`` in the
    database's directory. With neither (an in-memory database, a server without a shared
    directory) they go to a temporary directory that lives as long as the store: it is returned
    for the store to clean up when it closes."""
    where = files_dir(configured, data_dir)
    if where is not None:
        return LargeFileStore(where), None
    tmp = tempfile.TemporaryDirectory(prefix="lcm-files-")
    return LargeFileStore(Path(tmp.name)), tmp
