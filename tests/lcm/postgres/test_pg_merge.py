"""``restore --merge`` onto a PostgreSQL store: a SQLite backup's conversations merged through the
same steps as onto SQLite (lcm.operator.merge), ingest's PostgreSQL step writing the rows under
its advisory locks; a backup PostgreSQL cannot hold (a NUL, a large file and no shared
largeFilesDir) refused before anything is written."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore
from lcm.errors import LargeFilesDirMissingError, LcmValidationError
from lcm.operator.merge import check_backup, merge_backup

KEY = "agent:x:main"
NOW = "2026-02-01T00:00:00.000Z"


def _at(minute: int) -> str:
    return f"2026-01-05T10:{minute:02d}:00.000Z"


def _backup(path: Path, messages: Sequence[Mapping[str, object]], *, archived_first: bool = True,
            **config: int) -> Path:
    with LcmStore(str(path), LcmConfig(log_file_enabled=False, **config)) as a:  # type: ignore[arg-type]
        if archived_first:
            a.ingest(KEY, [{"role": "user", "content": "first era", "event_id": "k1", "created_at": _at(0)}])
            a.reset(KEY)  # the first conversation archived
        a.ingest(KEY, messages)
    return path


def test_a_sqlite_backup_merges_onto_a_postgresql_store(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    src = _backup(tmp_path / "a" / "lcm.db",
                  [{"role": "user", "content": f"old {m} zebra", "event_id": f"o{m}", "created_at": _at(m)}
                   for m in (1, 3, 5)] + [{"role": "user", "content": "ok"}] * 2)  # two "ok"s of one instant
    pg = make_pg_store()
    pg.ingest(KEY, [{"role": "user", "content": f"new {m}", "created_at": _at(m)} for m in (2, 3)])
    conv = pg.conversation(KEY)
    assert conv is not None
    report = merge_backup(pg, src, None, NOW)
    assert (report.conversations_created, report.conversations_merged) == (1, 1)
    assert report.messages_added == 6 and report.conversations_reordered == 1
    order = ["old 1 zebra", "new 2", "new 3", "old 3 zebra", "old 5 zebra", "ok", "ok"]  # a tie: here first
    by_seq = [r[0] for r in pg.db.query("SELECT content FROM messages WHERE conversation_id = ? ORDER BY seq",
                                        (conv.id,))]
    assert by_seq == order
    assert [m["content"] for m in pg.assemble(KEY, 100_000).messages] == order
    assert [c.active for c in pg.conversations(KEY)] == [True, False]  # the archived one stays archived
    # the server indexed the merged rows as ingest's own: full-text search finds them
    hits = pg.grep("zebra", mode="full_text", session_key=KEY).hits
    assert len(hits) == 3
    again = merge_backup(pg, src, None, "2026-02-01T00:00:01.000Z")
    assert (again.messages_added, again.conversations_created) == (0, 0)
    assert pg.doctor().ok


def test_a_backup_postgresql_cannot_hold_is_refused_before_anything_is_written(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    nul = _backup(tmp_path / "n" / "lcm.db", [{"role": "user", "content": "a\x00b", "created_at": _at(1)}],
                  archived_first=False)
    big = "line of a pasted log with numbers 12345\n" * 600
    large = _backup(tmp_path / "l" / "lcm.db", [{"role": "user", "content": big, "created_at": _at(1)}],
                    archived_first=False, large_file_threshold_tokens=2000)
    # no largeFilesDir: nowhere every host reads a large file from
    pg = make_pg_store(large_file_threshold_tokens=2000)
    assert check_backup(nul, None) == []  # SQLite holds it
    (said,) = check_backup(nul, None, pg)
    assert "NUL" in said and "PostgreSQL" in said and "conversation" in said
    (said,) = check_backup(large, tmp_path / "l" / "lcm-files", pg)
    assert "largeFilesDir" in said
    for backup, files in ((nul, None), (large, tmp_path / "l" / "lcm-files")):
        with pytest.raises(LcmValidationError):
            merge_backup(pg, backup, files, NOW)
    assert pg.db.scalar("SELECT count(*) FROM conversations") == 0


def test_amem_restore_merge_into_a_home_whose_conversations_live_on_postgresql(
        pg_clean_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import os

    from tools.cli.main import main

    def run(env: dict[str, str], *args: str, code: int = 0) -> str:
        got = main([*args, "--json"], env=env)
        out, err = capsys.readouterr()
        assert got == code, (args, out, err)
        return out if code == 0 else err

    base = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    old = {**base, "AMEM_HOME": str(tmp_path / "old"), "AMEM_EMBEDDER": "hashing", "LCM_LOG_FILE_ENABLED": "false"}
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"role": "user", "content": f"receipt {i} filed", "created_at": _at(i)}) + "\n"
                            for i in range(3)), encoding="utf-8")
    run(old, "lcm", "ingest", str(chat), "--session-key", KEY)
    run(old, "backup", str(tmp_path / "bk"))
    new = {**old, "AMEM_HOME": str(tmp_path / "new"), "LCM_DATABASE_PATH": pg_clean_url}
    # a plain restore copies a SQLite file, which a server cannot take: refused, naming --merge
    assert "--merge" in run(new, "restore", str(tmp_path / "bk"), code=2)
    done = json.loads(run(new, "restore", str(tmp_path / "bk"), "--merge"))
    merged = done["conversations"]
    assert merged["how"] == "merged" and merged["messages_added"] == 3
    assert merged["path"].startswith("postgresql://") and not (tmp_path / "new" / "lcm.db").exists()
    again = json.loads(run(new, "restore", str(tmp_path / "bk"), "--merge"))["conversations"]
    assert again["messages_added"] == 0 and again["messages_skipped"] == 3


def test_a_backed_up_large_file_is_stored_again_in_the_servers_shared_directory(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    from lcm.models import FileDescription

    big = "line of a pasted log with numbers 12345\n" * 600
    src = _backup(tmp_path / "a" / "lcm.db", [{"role": "tool", "content": big, "created_at": _at(1)}],
                  archived_first=False, large_file_threshold_tokens=2000)
    pg = make_pg_store(large_file_threshold_tokens=2000, large_files_dir=str(tmp_path / "shared"))
    report = merge_backup(pg, src, tmp_path / "a" / "lcm-files", NOW)
    assert report.messages_added == 1 and report.large_files_added == 1
    (file_id,) = [r[0] for r in pg.db.query("SELECT file_id FROM messages WHERE file_id IS NOT NULL")]
    file = pg.describe(file_id, limit=len(big) + 1, session_key=KEY)
    assert isinstance(file, FileDescription) and file.slice_text == big
    assert [p for p in (tmp_path / "shared").rglob("file_*") if p.is_file()]


def test_a_message_over_the_servers_threshold_without_largefilesdir_is_refused_before_any_write(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    """A message that was no large file in the backup (its home's threshold was higher) but is
    over this store's: a server without largeFilesDir cannot keep it (a temporary directory no
    other host reads, gone at close), so the check names it before anything is written; a
    backed-up large file under this store's threshold is plain text here and passes."""
    big = "line of a pasted log with numbers 12345\n" * 600  # ~6,000 tokens
    src = _backup(tmp_path / "a" / "lcm.db", [{"role": "tool", "content": big, "created_at": _at(1)},
                                               {"role": "user", "content": "short", "created_at": _at(2)}],
                  archived_first=False)  # the default threshold: no large file in the backup
    pg = make_pg_store(large_file_threshold_tokens=2000)
    pg.ingest(KEY, [{"role": "user", "content": "here before", "created_at": _at(0)}])
    (said,) = check_backup(src, None, pg)
    assert "msg_1 (conversation 1, session 'agent:x:main', position 1): ~6000 tokens" in said
    assert "largeFileThresholdTokens (2000)" in said
    assert "largeFilesDir" in said and "LCM_LARGE_FILE_TOKEN_THRESHOLD" in said
    with pytest.raises(LcmValidationError, match="msg_1"):
        merge_backup(pg, src, None, NOW)
    # a caller that says it checked (another store's check) still gets no silent loss: ingest's refusal
    with pytest.raises(LargeFilesDirMissingError, match="largeFilesDir"):
        merge_backup(pg, src, None, NOW, checked=True)
    assert [r[0] for r in pg.db.query("SELECT content FROM messages")] == ["here before"]
    assert pg.db.scalar("SELECT count(*) FROM conversations") == 1
    # the backup's large file is under this store's threshold: stored as text, nothing refused
    filed = _backup(tmp_path / "f" / "lcm.db", [{"role": "tool", "content": big, "created_at": _at(1)}],
                    archived_first=False, large_file_threshold_tokens=2000)
    roomy = make_pg_store(large_file_threshold_tokens=10_000)
    assert check_backup(filed, tmp_path / "f" / "lcm-files", roomy) == []
    assert merge_backup(roomy, filed, tmp_path / "f" / "lcm-files", NOW).large_files_added == 0
    assert roomy.db.scalar("SELECT count(*) FROM messages WHERE content = ?", (big,)) == 1


def _amem(env: Mapping[str, str], *args: str, code: int = 0) -> str:
    """``amem ARGS`` in process: its stdout, or its stderr when it is to fail with ``code``."""
    import contextlib
    import io

    from tools.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(list(args), env=dict(env))
    assert got == code, (args, out.getvalue(), err.getvalue())
    return out.getvalue() if code == 0 else err.getvalue()


def _notes(env: Mapping[str, str]) -> list[str]:
    import json

    return sorted(json.loads(line)["note"]["id"] for line in _amem(env, "export", "-").splitlines())


#: ~6,000 tokens: text under the default threshold (25,000), a large file under 2,000
BIG = "line of a pasted log with numbers 12345\n" * 600


@pytest.fixture(scope="module")
def home_backup(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """A SQLite home's backup (a note, and a long message it kept as text), and that home's
    environment; each test points it at a home of its own on the server."""
    import json
    import os

    tmp = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(tmp / "old"), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "alice",
                "LCM_LOG_FILE_ENABLED": "false"})
    (tmp / "notes.jsonl").write_text(json.dumps({"id": "tea", "text": "Alice drinks green tea"}) + "\n")
    _amem(env, "import", str(tmp / "notes.jsonl"), "--no-enrich")
    (tmp / "chat.jsonl").write_text(json.dumps({"role": "tool", "content": BIG, "created_at": _at(1)}) + "\n")
    _amem(env, "lcm", "ingest", str(tmp / "chat.jsonl"), "--session-key", KEY)
    _amem(env, "backup", str(tmp / "bk"))
    return env, tmp / "bk"


def test_amem_restore_merge_refuses_a_message_the_server_would_lose_before_writing_a_note(
        home_backup: tuple[dict[str, str], Path], pg_clean_url: str, tmp_path: Path) -> None:
    """The backup's home kept a long message as text (its threshold was the default); this home's
    server would keep it as a large file and has no largeFilesDir: the restore is refused naming
    the message, with neither a note nor a message written; with largeFilesDir set it merges."""
    import json

    old, bk = home_backup
    new = {**old, "AMEM_HOME": str(tmp_path / "new"), "LCM_DATABASE_PATH": pg_clean_url,
           "LCM_LARGE_FILE_TOKEN_THRESHOLD": "2000"}
    (tmp_path / "notes.jsonl").write_text(json.dumps({"id": "bike", "text": "Bob rides a bike"}) + "\n")
    _amem(new, "import", str(tmp_path / "notes.jsonl"), "--no-enrich")
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as pg:
        pg.ingest(KEY, [{"role": "user", "content": "here before", "created_at": _at(0)}])
    err = _amem(new, "restore", str(bk), "--merge", code=2)
    assert "msg_1 (conversation 1, session 'agent:x:main', position 1): ~6000 tokens" in err
    assert "largeFileThresholdTokens (2000)" in err and "LCM_LARGE_FILES_DIR" in err
    assert "nothing was restored" in err
    assert _notes(new) == ["bike"]  # the backup's note not written
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as pg:
        assert [r[0] for r in pg.db.query("SELECT content FROM messages")] == ["here before"]
    shared = {**new, "LCM_LARGE_FILES_DIR": str(tmp_path / "shared")}  # a way out the refusal names
    done = json.loads(_amem(shared, "restore", str(bk), "--merge", "--json"))
    assert (done["notes"]["created"], done["conversations"]["large_files_added"]) == (1, 1)
    assert _notes(new) == ["bike", "tea"]


def test_a_merge_the_server_stops_midway_leaves_the_notes_unwritten_too(
        home_backup: tuple[dict[str, str], Path], pg_clean_url: str, tmp_path: Path) -> None:
    """What no check can know before writing (here a host holding the session's lock past the
    server's lock_timeout; also a lost server, a full disk) stops the conversations' merge, one
    transaction rolled back. Restore wrote the notes first, so that left them written: a half
    restore. The conversations go first now; the notes only once they are in. (The server's
    giving up was said as "the server dropped the connection": it is store_locked, exit 4.)"""
    import json

    import psycopg

    from lcm.pg.db import LOCK_SESSION, lock_key

    old, bk = home_backup
    # the server gives up a lock wait after 300 ms (a server's or role's setting, here the URL's)
    new = {**old, "AMEM_HOME": str(tmp_path / "new"),
           "LCM_DATABASE_PATH": pg_clean_url + "?options=-c%20lock_timeout%3D300"}
    with psycopg.connect(pg_clean_url, autocommit=True) as host:  # a host ingesting into the session
        host.execute("SELECT pg_advisory_lock(%s::int4, %s::int4)", (LOCK_SESSION, lock_key(f"key:{KEY}")))
        err = _amem(new, "restore", str(bk), "--merge", code=4)  # busy, as SQLite's lock wait
    assert "lock_timeout" in err and "dropped the connection" not in err
    assert _notes(new) == []  # nothing of the backup: the conversations' merge comes first
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as pg:
        assert pg.db.scalar("SELECT count(*) FROM messages") == 0
    done = json.loads(_amem(new, "restore", str(bk), "--merge", "--json"))  # the lock let go
    assert (done["notes"]["created"], done["conversations"]["messages_added"]) == (1, 1)


def test_a_message_whose_words_the_servers_index_cannot_take_is_refused_before_any_write(
        make_pg_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    """A text kept as a message whose different words make its full-text vector over the
    server's 1 MB (a backup's home with a high threshold; a large file under this store's) was
    refused by the server inside the merge, after restore had written the notes; the check asks
    the server first. Raising the threshold is not offered where the text could not go in."""
    from tests.lcm.postgres.test_pg_limits import MANY_WORDS  # ~375,000 tokens, a ~2.1 MB tsvector

    src = _backup(tmp_path / "a" / "lcm.db", [{"role": "tool", "content": MANY_WORDS, "created_at": _at(1)}],
                  archived_first=False, large_file_threshold_tokens=1_000_000)
    roomy = make_pg_store(large_file_threshold_tokens=1_000_000)
    (said,) = check_backup(src, None, roomy)
    assert "msg_1 (conversation 1, session 'agent:x:main', position 1): ~375000 tokens" in said
    assert "string is too long for tsvector" in said and "below 375000" in said and "largeFilesDir" in said
    with pytest.raises(LcmValidationError, match="tsvector"):
        merge_backup(roomy, src, None, NOW)
    assert roomy.db.scalar("SELECT count(*) FROM conversations") == 0
    (said,) = check_backup(src, None, make_pg_store())  # the default threshold: a large file, no largeFilesDir
    assert "msg_1" in said and "set largeFilesDir" in said and "raise largeFileThresholdTokens" not in said
