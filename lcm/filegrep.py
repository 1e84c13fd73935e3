"""grep over stored large files (``scope="files"``): hits with a line and a byte offset.

Large payloads live on disk (``lcm.largefiles``), outside the full-text indexes, so a search
reads them. The scan is bounded three ways: the files of the caller's scope only (at most
``MAX_FILES``), the first ``MAX_SCAN_BYTES`` of each file, and the grep deadline
(``grepRegexDeadlineMs``). Whatever stops it early, the answer is the hits found so far,
marked ``truncated`` with a warning saying why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.errors import LcmNotFoundError
from lcm.largefiles import LargeFileStore
from lcm.models import GrepHit, GrepResult
from lcm.regex import DeadlineExceeded, UserRegex, compile_user_regex
from lcm.search import build_fts_query

__all__ = ["grep_files", "MAX_SCAN_BYTES", "MAX_FILES"]

#: bytes of one file a search reads (the bounded prefix the tool descriptions mention)
MAX_SCAN_BYTES = 8 * 1024 * 1024
#: files one search reads, newest first
MAX_FILES = 200
_SNIPPET = 160


def _line_matcher(pattern: str, mode: str) -> tuple[UserRegex | None, list[str]]:
    """RE2 for regex mode; else every quoted term or word must occur in the line (any case)."""
    if mode == "regex":
        return compile_user_regex(pattern), []
    return None, [t.lower() for t in build_fts_query(pattern).terms]


def grep_files(
    db: Handle, cfg: LcmConfig, files: LargeFileStore, pattern: str, *, mode: str,
    conv_ids: list[int] | None, file_ids: Sequence[str] | None, limit: int,
) -> GrepResult:
    """Lines of the in-scope stored files that match, newest file first, in line order.

    A named file outside ``conv_ids`` raises exactly the not-found of a file that does not
    exist, so the answer tells nothing about another family's files.
    """
    rx, terms = _line_matcher(pattern, mode)
    clauses, params = ["1"], []  # type: list[str], list[object]
    if conv_ids is not None:
        clauses.append(f"conversation_id IN ({','.join('?' * len(conv_ids))})")
        params += conv_ids
    if file_ids:
        clauses.append(f"file_id IN ({','.join('?' * len(file_ids))})")
        params += list(file_ids)
    rows = db.query(f"SELECT * FROM large_files WHERE {' AND '.join(clauses)} "
                    "ORDER BY created_at DESC, file_id LIMIT ?", [*params, MAX_FILES + 1])
    if file_ids:
        found = {r["file_id"] for r in rows}
        for fid in file_ids:
            if fid not in found:
                raise LcmNotFoundError(f"no file {fid}", id=fid)
    warnings: list[str] = []
    if len(rows) > MAX_FILES:
        rows = rows[:MAX_FILES]
        warnings.append(f"only the newest {MAX_FILES} files were searched; name some with fileIds")
    deadline = time.monotonic() + cfg.grep_regex_deadline_ms / 1000
    hits: list[GrepHit] = []
    for row in rows:
        try:
            path = files.resolve(row["storage_path"])
            with path.open("rb") as fh:
                data = fh.read(MAX_SCAN_BYTES + 1)
        except (FileNotFoundError, PermissionError):
            warnings.append(f"{row['file_id']} is recorded but missing on disk (see lcm doctor)")
            continue
        if len(data) > MAX_SCAN_BYTES:
            data = data[:MAX_SCAN_BYTES]
            warnings.append(f"{row['file_id']}: only its first {MAX_SCAN_BYTES} bytes were searched")
        offset = 0
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if time.monotonic() > deadline:
                warnings.append("file grep stopped at its deadline (grepRegexDeadlineMs); name fewer fileIds")
                return _result(pattern, mode, hits, conv_ids, warnings)
            text = raw.decode("utf-8", errors="replace")
            span = _match(text, rx, terms, deadline)
            if span is not None:
                at, end = span
                byte_at = offset + len(text[:at].encode("utf-8"))
                start = max(0, at - _SNIPPET // 3)
                hits.append(GrepHit("file", row["file_id"], row["conversation_id"], row["created_at"],
                                    text[start:start + _SNIPPET], 1.0, line=number, byte_offset=byte_at,
                                    match_text=text[at:end]))
                if len(hits) >= limit:
                    return _result(pattern, mode, hits, conv_ids, warnings, more=True)
            offset += len(raw) + 1
    return _result(pattern, mode, hits, conv_ids, warnings)


def _match(text: str, rx: UserRegex | None, terms: list[str], deadline: float) -> tuple[int, int] | None:
    """Character span (start, end) of the first match in one line, or None: the regex's match,
    or the terms that must all occur (from the first placed to the last)."""
    if rx is not None:
        try:
            found = rx.positions(text, deadline, 1)
        except DeadlineExceeded:
            return None
        return (found[0], rx.match_end(text, found[0])) if found else None
    lowered = text.lower()
    places = [(lowered.find(t), t) for t in terms]
    if any(p < 0 for p, _ in places):
        return None
    at, term = min(places)
    end = max(p + len(t) for p, t in places)
    # the span from the first term to the last; a line that holds them far apart gives the first
    return at, end if end - at <= _SNIPPET else at + len(term)


def _result(pattern: str, mode: str, hits: list[GrepHit], conv_ids: list[int] | None,
            warnings: list[str], more: bool = False) -> GrepResult:
    stopped = bool(warnings) and any("searched" in w or "deadline" in w for w in warnings)
    return GrepResult(pattern, mode, "files", "recency", hits, stopped or more, 0, conv_ids,
                      list(dict.fromkeys(warnings)))
