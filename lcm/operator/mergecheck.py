"""The check a backup passes before :func:`lcm.operator.merge.merge_backup` writes anything.

``amem restore DIR --merge`` writes the conversations in one transaction and then the notes, so
whatever the backup holds that the target cannot take must be found first, while nothing is
written yet; what no check can know (a lost server, a full disk) is left to that transaction's
rollback. :func:`check_backup` reads the whole backup: the database's ``quick_check`` and
tables, every large file it names whole (UTF-8 text of the size its record gives), and, for a
PostgreSQL target, what that server cannot hold (:func:`_postgres_limits`): text with a NUL; when
it has no ``largeFilesDir`` every host shares, a message over its own large-file threshold (by
the text the merge writes, whatever the backup's home made of it: its threshold may have been
another); and a text kept as a message whose words make a full-text vector over the server's
1 MB (the server asked, for the few texts long enough to).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from lcm.db import Database
from lcm.largefiles import LargeFileStore
from lcm.tokens import estimate_tokens

if TYPE_CHECKING:
    from lcm.pg.db import PgDatabase
    from lcm.store import LcmStore

__all__ = ["CONVERSATION_COLS", "MESSAGE_COLS", "check_backup", "file_text", "on_postgres", "reading"]

#: the backup's columns a merge reads; a backup lacking one is refused by ``check_backup``
CONVERSATION_COLS = ("id", "session_key", "session_id", "active", "archived_at", "archive_cause", "title",
                     "created_at", "updated_at")  # fmt: skip
MESSAGE_COLS = ("conversation_id", "seq", "role", "content", "identity_hash", "stable_event_key", "file_id",
                "created_at")  # fmt: skip


def on_postgres(store: LcmStore) -> bool:
    """Whether ``store`` keeps its conversations on a PostgreSQL server."""
    return not isinstance(store.db, Database)


@contextmanager
def reading(db: Path) -> Iterator[sqlite3.Connection]:
    """The backup, read-only (never a journal or a log written beside it)."""
    uri = f"{db.resolve().as_uri()}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as c:
        c.row_factory = sqlite3.Row
        yield c


def check_backup(db: Path, files_dir: Path | None, target: LcmStore | None = None) -> list[str]:
    """What is wrong with the backup at ``db`` (and its large files): empty when it can be
    merged; with a ``target`` store, also what that store's engine cannot hold."""
    try:
        with reading(db) as c:
            check = c.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                return [f"{db} is damaged (SQLite's quick_check: {check})"]
            problems: list[str] = []
            for table, cols in (("conversations", CONVERSATION_COLS), ("messages", MESSAGE_COLS)):
                have = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                if not have:
                    return [f"{db} holds no {table} table: not an lcm conversation store"]
                lacking = [col for col in cols if col not in have]
                if lacking:
                    problems.append(f"{db}: the {table} table lacks {', '.join(lacking)}")
            if problems:
                return problems
            files = LargeFileStore(files_dir) if files_dir is not None else None
            sound = _read_large_files(c, db, files, problems)
            if target is not None and on_postgres(target):
                problems += _postgres_limits(c, db, target, sound)
            return problems
    except (sqlite3.Error, OSError, ValueError) as exc:
        return [f"{db} cannot be read as a conversation store: {exc}"]


def _read_large_files(c: sqlite3.Connection, db: Path, files: LargeFileStore | None,
                      problems: list[str]) -> dict[str, tuple[Path, int, int]]:
    """Every large file the backup names, read whole as the merge will read it (UTF-8 text of the
    size its record gives: one cut short or changed would come in short, or fail the merge half
    way); what is wrong added to ``problems``. Each sound file's path, size in bytes and its
    text's token estimate, by file id."""
    sound: dict[str, tuple[Path, int, int]] = {}
    for row in c.execute("SELECT m.file_id, f.storage_path, f.size_bytes FROM messages m LEFT JOIN large_files f "
                         "ON f.file_id = m.file_id WHERE m.file_id IS NOT NULL"):
        name = f"the large file {row['file_id']} ({row['storage_path']})"
        if row["storage_path"] is None:
            problems.append(f"{db}: message file {row['file_id']} has no large_files row")
            continue
        path = files.resolve(row["storage_path"]) if files is not None else None
        if path is None or not path.is_file():
            problems.append(f"{name} is missing from the backup")
            continue
        data = path.read_bytes()
        if len(data) != row["size_bytes"]:
            problems.append(f"{name} is damaged: {len(data)} bytes where its record says {row['size_bytes']} "
                            "(cut short or changed)")
            continue
        try:
            sound[row["file_id"]] = (path, len(data), estimate_tokens(data.decode("utf-8")))
        except UnicodeDecodeError as exc:
            problems.append(f"{name} is damaged: it is not UTF-8 text (byte {exc.start})")
    return sound


def _postgres_limits(c: sqlite3.Connection, db: Path, target: LcmStore,
                     sound: dict[str, tuple[Path, int, int]]) -> list[str]:
    """What of the backup a PostgreSQL store cannot take, each message named as
    :func:`lcm.pg.nulscan.find_nul` names one: text with a NUL (its ``text`` refuses U+0000,
    where SQLite keeps it); when the store has no ``largeFilesDir``, a message over its own
    large-file threshold (the text the merge writes, whatever the backup's home made of it: its
    threshold may have been another), which would go to a temporary directory no other host
    reads, gone when the store closes; and a text it would keep as a message whose words the
    server's full-text index cannot take (:func:`lcm.pg.merge.words_refused`)."""
    from lcm.pg.merge import WORDS_SAFE_CHARS, words_refused
    from lcm.pg.nulscan import describe_findings, find_nul

    problems: list[str] = []
    nul = find_nul(c, ("conversations", "messages"))
    if nul:
        problems.append(f"{db}: {len(nul)} rows hold a NUL character (U+0000), which PostgreSQL text cannot hold: "
                        f"{describe_findings(nul)}; merge it into a SQLite home, or copy it to the server with "
                        "`amem lcm migrate --replace-nul`")
    threshold = target.config.large_file_threshold_tokens
    shared = bool(target.config.large_files_dir)
    over: list[tuple[str, int, bool]] = []  # (message, tokens, whether the server takes its words as text)
    wordy: list[tuple[str, int, str]] = []  # kept as text here, its words refused: (message, tokens, why)
    server = cast("PgDatabase", target.db)
    for row in c.execute("SELECT m.id, m.conversation_id, c.session_key, m.seq, m.content, m.file_id "
                         "FROM messages m LEFT JOIN conversations c ON c.id = m.conversation_id ORDER BY m.id"):
        text: str | None
        if row["file_id"] is None:
            text = row["content"]
            tokens = estimate_tokens(text)
        elif row["file_id"] in sound:
            path, size, tokens = sound[row["file_id"]]
            # read again only when it may be long enough to matter (its characters are at most its bytes)
            text = file_text(path) if size >= WORDS_SAFE_CHARS else None
        else:
            continue  # a large file named as missing or damaged already
        if tokens > threshold and shared:
            continue  # a large file here too: the message holds a short reference
        why = None if text is None else words_refused(server, text)
        name = (f"msg_{row['id']} (conversation {row['conversation_id']}, session {row['session_key']!r}, "
                f"position {row['seq']})")
        if tokens > threshold:
            over.append((name, tokens, why is None))
        elif why is not None:
            wordy.append((name, tokens, why))
    if over:
        # a higher threshold keeps them as text: a way out only when the server takes their words
        higher = max(t for _, t, _ in over) if all(fits for *_, fits in over) else None
        problems.append(
            f"{db}: {len(over)} messages are over this home's largeFileThresholdTokens ({threshold}), so this "
            "store would keep them as large files, and its PostgreSQL store has no largeFilesDir: "
            f"{describe_findings([f'{name}: ~{tokens} tokens' for name, tokens, _ in over])}; set largeFilesDir "
            "(LCM_LARGE_FILES_DIR) to a directory every host of the database shares"
            + ("" if higher is None else
               f", or raise largeFileThresholdTokens (LCM_LARGE_FILE_TOKEN_THRESHOLD) to {higher} or more"))
    if wordy:
        problems.append(
            f"{db}: {len(wordy)} messages hold more different words than PostgreSQL's full-text index takes in "
            f"one text (a tsvector over 1 MB): {describe_findings([f'{n}: ~{t} tokens, {w}' for n, t, w in wordy])}; "
            "lower largeFileThresholdTokens (LCM_LARGE_FILE_TOKEN_THRESHOLD) below "
            f"{min(t for _, t, _ in wordy)} so this store keeps them as large files"
            + ("" if shared else ", with largeFilesDir (LCM_LARGE_FILES_DIR) set to a directory every host of the "
               "database shares"))
    return problems


def file_text(path: Path) -> str:
    """A backed-up large file's text as the merge reads it (bytes decoded: text mode would turn
    each "\\r\\n" into "\\n")."""
    return path.read_bytes().decode("utf-8")
