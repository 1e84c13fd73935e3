"""``amem backup DIR`` and ``amem restore DIR``: a whole home in one command, servers running.

A home holds two stores and a few files, and each needs its own way of being copied while it
is in use: a tar of the engine's files taken during adds held 18 of 34 acknowledged notes, and
``cp lcm.db`` misses what is still in ``lcm.db-wal``. A user asking "how do I back up my
memory?" had to know both commands and the files beside them. ``backup`` writes:

* ``notes.jsonl``: ``amem export`` (every agent, with vectors), through the running
  ``amem serve --http`` when one holds the store (the owner's export pages);
* ``lcm.db``: ``amem lcm backup`` (SQLite's online backup: one instant, checked), and
  ``lcm-files/``, the large files it names (written once, never changed, so a copy taken
  after the database holds every file it names). A PostgreSQL store is left to ``pg_dump``,
  said in the manifest and on stderr;
* ``keys.json`` (the agents' keys, hashed) and the config file, when the home has them;
* ``manifest.json``: what is in it, counts, and what was left out and why.

Everything is written into a hidden sibling directory that is renamed to ``DIR`` only when
whole: a killed backup leaves no ``DIR`` (and its hidden ``.DIR.<pid>.tmp`` is named on the
next run). ``restore`` loads it into a home that holds nothing yet (no note, no conversation)
with no server running: the notes as ``amem import --from-export`` loads them, the
conversation database and its files copied in, the keys this home lacks, and the config file
into the home when it reads none. ``restore --merge`` loads it into a home in use and never
overwrites what it holds: a note of an id stored here is kept as it is here (another text
under the same id is a clash, reported), the backup's messages are ingested as they were
stored (their event keys and times say which are here already: ``lcm.operator.merge``).
Every part of the backup is read before anything is written, and what a target cannot hold is
refused then (``lcm.operator.mergecheck``). The conversations are written first, whole
or not at all (one transaction, or a file renamed into place), so a failure no check can see
coming (a lost server, a full disk) leaves the home as it was; the notes follow in batches, and
a killed restore is finished by a rerun with ``--merge`` (what is stored is skipped).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import Cmd, runtime, version
from .output import EXIT_USAGE, CliError, emit, usage_error

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .common import Subparsers

__all__ = ["register", "cmd_backup", "cmd_restore"]

MANIFEST = "manifest.json"
NOTES = "notes.jsonl"
CONVERSATIONS = "lcm.db"
LARGE_FILES = "lcm-files"
KEYS = "keys.json"


def register(cmd: Cmd, sub: Subparsers) -> None:
    p = cmd("backup", cmd_backup, "back up the whole home into a new directory: every agent's "
            "notes (through a running server too), the conversation store, keys and config")
    p.add_argument("dir", help="the directory to create (must not exist yet)")
    p = cmd("restore", cmd_restore, "load a backup made by `amem backup` into this home, which "
            "must hold no notes and no conversations yet (or --merge)")
    p.add_argument("dir", help="the directory `amem backup` wrote")
    p.add_argument("--merge", action="store_true",
                   help="into a home in use: add the notes, messages and keys it lacks, never "
                        "overwrite what it holds (a note of the same id and another text is a "
                        "clash, reported)")


# ------------------------------------------------------------------------------ backup


def cmd_backup(args: argparse.Namespace) -> int:
    target = Path(args.dir).expanduser()
    if target.exists() or target.is_symlink():
        raise usage_error(f"{target} already exists: a backup goes into a new directory (so "
                          "an older backup is never overwritten)", "dir")
    if not target.parent.is_dir():
        raise usage_error(f"{target.parent} is not a directory", "dir")
    left = sorted(target.parent.glob(f".{target.name}.*.tmp"))
    if left:  # a killed backup's leftovers: said, never reused
        print(f"note: {', '.join(map(str, left))} is left from a backup that did not finish; "
              "remove it", file=sys.stderr)
    from amem.atomicfile import fsync_dir

    work = target.parent / f".{target.name}.{os.getpid()}.tmp"
    work.mkdir(mode=0o700)
    try:
        with runtime(args) as rt:
            manifest = _backup_into(args, rt, work)
        with open(_private(work / MANIFEST), "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        _fsync_tree(work)
        os.rename(work, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    for reason in manifest["left_out"]:
        print(f"warning: not in the backup: {reason}", file=sys.stderr)
    data = {"path": str(target), **manifest}
    emit(args, data, lambda: _backup_text(target, manifest))
    return 0


def _backup_into(args: argparse.Namespace, rt: Runtime, work: Path) -> dict[str, Any]:
    from .notes import export_notes

    left_out: list[str] = []
    with open(_private(work / NOTES), "w", encoding="utf-8") as out:
        count, through = export_notes(args, rt, out, agent=None, vectors=True)
    manifest: dict[str, Any] = {
        "amem_version": version(), "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "home": str(Path(rt.settings.amem.home).expanduser()),
        "notes": {"file": NOTES, "count": count, "through_server": through},
    }
    manifest["conversations"] = _backup_conversations(rt, work, left_out)
    keys = Path(rt.settings.amem.home).expanduser() / KEYS
    if keys.is_file():
        _copy_private(keys, work / KEYS)
    manifest["keys"] = KEYS if keys.is_file() else None
    config = rt.settings.config_path
    if config is not None and config.is_file():
        _copy_private(config, work / config.name)
        manifest["config"] = {"file": config.name, "was_at": str(config),
                              "on_restore": "copied into a home that reads no config file; "
                                            "left alone otherwise"}
    else:
        manifest["config"] = None
    manifest["left_out"] = left_out
    return manifest


def _backup_conversations(rt: Runtime, work: Path, left_out: list[str]) -> dict[str, Any] | None:
    """The SQLite conversation store and its large files into ``work``; the manifest's part."""
    from lcm.operator.backup import backup_sqlite
    from lcm.pg.url import is_postgres_url, redact_url

    where = rt.lcm_database()
    if where is None:
        raise CliError("the conversation store's settings contradict each other: run `amem "
                       "doctor` to see how, then back up again", code="config_error")
    if is_postgres_url(where):
        left_out.append(f"the conversations: they live on a PostgreSQL server "
                        f"({redact_url(where)}); back them up there with pg_dump")
        return None
    db = Path(where).expanduser()
    if not db.is_file():
        return {"file": None, "said": "no conversation store yet"}
    report = backup_sqlite(db, work / CONVERSATIONS)
    files = _large_files_dir(rt, db)
    copied = 0
    if files.is_dir():
        shutil.copytree(files, work / LARGE_FILES, symlinks=True)
        copied = sum(1 for p in (work / LARGE_FILES).rglob("*") if p.is_file())
    return {"file": CONVERSATIONS, "bytes": report.bytes, "large_files": copied,
            "large_files_dir": LARGE_FILES if files.is_dir() else None}


def _backup_text(target: Path, manifest: dict[str, Any]) -> str:
    notes = manifest["notes"]
    conv = manifest["conversations"]
    lines = [f"backed up to {target}",
             f"notes: {notes['count']} (every agent, with vectors"
             + (", through the running server)" if notes["through_server"] else ")")]
    if conv is None:
        lines.append("conversations: not in it (a PostgreSQL store: pg_dump)")
    elif conv.get("file") is None:
        lines.append("conversations: none yet")
    else:
        lines.append(f"conversations: {conv['file']} ({conv['bytes']} bytes), "
                     f"{conv['large_files']} large files")
    lines.append(f"keys: {'yes' if manifest['keys'] else 'none'}; config: "
                 f"{manifest['config']['file'] if manifest['config'] else 'none'}")
    lines.append(f"restore into an empty home: amem restore {target} (into a home in use: "
                 "--merge)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ restore


def cmd_restore(args: argparse.Namespace) -> int:
    from amem.export import check_export, load_export

    source = Path(args.dir).expanduser()
    merge = bool(getattr(args, "merge", False))
    manifest = _read_manifest(source)
    with runtime(args) as rt:
        home = Path(rt.settings.amem.home).expanduser()
        conv = manifest.get("conversations")
        db = _restore_target_db(rt, conv, merge=merge)
        # everything the backup holds is read before anything is written: a damaged part
        # refuses the whole restore
        _check_parts(rt, source, conv, db)
        store = rt.memory if merge else _empty_store(rt)
        check_export(store, source / NOTES)  # load_export checks again, after the conversations
        # the conversations first: one transaction (or a file renamed into place), so what no
        # check can know (a lost server, a lock wait given up, a full disk) stops the restore
        # with nothing written; the notes, written in batches, after them
        conversations = _restore_conversations(rt, source, conv, db)
        report = load_export(store, source / NOTES, keep_stored=merge)
        restored: dict[str, Any] = {"home": str(home), "merge": merge, "notes": report.to_dict(),
                                    "conversations": conversations}
        restored["keys"] = _restore_keys(home, source, manifest)
        restored["config"] = _restore_config(rt, home, source, manifest)
    for clash in report.clashes or ():
        print(f"warning: note {clash} is stored here with another text: kept as it is here, the "
              "backup's not written", file=sys.stderr)
    emit(args, restored, lambda: _restore_text(source, restored))
    return 0


def _check_parts(rt: Runtime, source: Path, conv: Any, db: Path | str | None) -> None:
    """The backup's conversation store (SQLite's check, every large file it names, and what a
    PostgreSQL target ``db`` cannot hold) and keys."""
    from lcm.operator.mergecheck import check_backup
    from tools.keys import KeyFileError, KeyStore

    problems: list[str] = []
    if isinstance(conv, dict) and conv.get("file"):
        files = source / LARGE_FILES if conv.get("large_files_dir") else None
        problems += check_backup(source / CONVERSATIONS, files, rt.lcm if isinstance(db, str) else None)
    if (source / KEYS).exists():
        try:
            KeyStore(source / KEYS).list()
        except KeyFileError as exc:
            problems.append(str(exc))
    if problems:
        raise CliError(f"the backup in {source} is damaged: {'; '.join(problems)} (nothing was "
                       "restored)", code="invalid_argument", exit_code=EXIT_USAGE, field="dir")


def _restore_conversations(rt: Runtime, source: Path, conv: Any, db: Path | str | None) -> Any:
    """The backup's conversations: the file copied into a home that holds none, else (a
    merge, always onto a PostgreSQL store, ``db`` its URL) its messages written into this
    home's store (``lcm.operator.merge``)."""
    if db is None or not isinstance(conv, dict) or not conv.get("file"):
        return None
    if isinstance(db, Path) and not (db.exists() and _conversations_in(db) > 0):
        for extra in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            extra.unlink(missing_ok=True)  # a log beside the copy would be replayed onto it
        _copy_private(source / CONVERSATIONS, db)
        if conv.get("large_files_dir"):
            shutil.copytree(source / LARGE_FILES, _large_files_dir(rt, db), symlinks=True,
                            dirs_exist_ok=True)
        return {"path": str(db), "how": "copied"}
    from lcm.operator.merge import merge_backup
    from lcm.timeutil import iso

    store = rt.lcm
    files = source / LARGE_FILES if conv.get("large_files_dir") else None
    merged = merge_backup(store, source / CONVERSATIONS, files, iso(store.clock.now()),
                          checked=True)  # _check_parts read it whole before anything was written
    return {"path": str(db), "how": "merged", **merged.to_dict()}


def _restore_keys(home: Path, source: Path, manifest: dict[str, Any]) -> Any:
    """The backup's keys this home lacks (all of them into a home without a key file); a key
    of an id this home has is never replaced."""
    from tools.keys import KeyStore

    if not manifest.get("keys"):
        return None
    added, here = KeyStore.for_home(home).take(KeyStore(source / KEYS))
    return {"path": str(home / KEYS), "added": len(added), "already_here": len(here)}


def _restore_config(rt: Runtime, home: Path, source: Path, manifest: dict[str, Any]) -> Any:
    """The backup's config file, copied into the home when this home reads none (there is no
    default file: it is read where ``AMEM_CONFIG`` or ``--config`` names it); a config file this
    home reads is left alone, the backup's named."""
    config = manifest.get("config")
    if not isinstance(config, dict) or not config.get("file"):
        return None
    backed = source / str(config["file"])
    here = rt.settings.config_path
    if here is not None:
        return {"copied_to": None, "said": f"left alone: this home reads {here}; the backup's "
                f"{config['file']} (from {config.get('was_at')}) is in {source}"}
    target = home / Path(str(config["file"])).name
    if target.exists():
        return {"copied_to": None, "said": f"left alone: {target} exists; the backup's is in "
                f"{source}"}
    _copy_private(backed, target)
    return {"copied_to": str(target), "said": f"copied to {target}: this home reads it when "
            f"AMEM_CONFIG or --config names it (export AMEM_CONFIG={target})"}


def _restore_text(source: Path, restored: dict[str, Any]) -> str:
    notes = restored["notes"]
    lines = [f"{'merged' if restored['merge'] else 'restored'} {source} into {restored['home']}",
             f"notes: {notes['created']} of {notes['read']} came in (every agent)"]
    if restored["merge"]:
        lines.append(f"  skipped: {notes['unchanged'] + notes['kept']} already here (the same id "
                     f"and text), {len(notes['clashes'])} clashes (the same id, another text: "
                     "kept as here)" + (f": {', '.join(notes['clashes'][:20])}"
                                        if notes["clashes"] else ""))
    conv = restored["conversations"]
    if conv is None:
        lines.append("conversations: none in the backup")
    elif conv["how"] == "copied":
        lines.append(f"conversations: copied to {conv['path']}")
    else:
        lines.append(f"conversations: {conv['messages_added']} messages came in, "
                     f"{conv['messages_skipped']} already here; {conv['conversations_created']} "
                     f"new conversations, {conv['conversations_merged']} merged into ones here")
        lines += [f"  {note}" for note in conv["notes"]]
    keys = restored["keys"]
    lines.append("keys: none in the backup" if keys is None else
                 f"keys: {keys['added']} added, {keys['already_here']} already here")
    if restored["config"]:
        lines.append(f"config: {restored['config']['said']}")
    return "\n".join(lines)


def _read_manifest(source: Path) -> dict[str, Any]:
    if not source.is_dir():  # a mistyped path: said as that, not as a folder lacking a manifest
        raise usage_error(f"no such directory: {source} (nothing restored)" if not source.exists()
                          else f"{source} is a file, not the directory `amem backup` wrote "
                          "(nothing restored)", "dir")
    try:
        manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise usage_error(f"{source} is not a backup made by `amem backup` (no {MANIFEST})",
                          "dir") from None
    except (OSError, ValueError) as exc:
        raise usage_error(f"{source / MANIFEST} cannot be read: {exc}", "dir") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("notes"), dict):
        raise usage_error(f"{source / MANIFEST} is not an `amem backup` manifest", "dir")
    missing = [name for name in (NOTES,) if not (source / name).is_file()]
    conv = manifest.get("conversations")
    if isinstance(conv, dict) and conv.get("file") and not (source / CONVERSATIONS).is_file():
        missing.append(CONVERSATIONS)
    if missing:
        raise usage_error(f"the backup in {source} lacks {', '.join(missing)}: nothing restored",
                          "dir")
    return manifest


def _restore_target_db(rt: Runtime, conv: Any, *, merge: bool) -> Path | str | None:
    """Where the backup's conversations go: a SQLite file, or a PostgreSQL server's URL
    (redacted: it is shown) for a merge; refused before anything is written when (not a
    merge) this home's conversation store is a server or already holds conversations."""
    from lcm.pg.url import is_postgres_url, redact_url

    if not (isinstance(conv, dict) and conv.get("file")):
        return None
    where = rt.lcm_database()
    if where is not None and is_postgres_url(where) and merge:
        return redact_url(where)  # merged as onto SQLite (lcm.operator.merge)
    if where is None or is_postgres_url(where):
        raise CliError("this home's conversations live on a PostgreSQL server, which a plain "
                       "restore (a copy of the backup's SQLite file) cannot fill: `amem restore "
                       "DIR --merge` merges the backup's conversations into it",
                       code="invalid_argument", exit_code=EXIT_USAGE, field="dir")
    db = Path(where).expanduser()
    if not merge and db.exists() and _conversations_in(db) > 0:
        raise CliError(f"{db} already holds conversations: a restore goes into a home that "
                       "holds none (nothing was restored); `amem restore DIR --merge` adds "
                       "what this home lacks", code="invalid_argument",
                       exit_code=EXIT_USAGE, field="dir")
    return db


def _conversations_in(db: Path) -> int:
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as c:
            return int(c.execute("SELECT count(*) FROM conversations").fetchone()[0])
    except sqlite3.Error:
        return 0  # no table yet: an empty store


def _empty_store(rt: Runtime) -> Any:
    """The home's note store, refused when any agent has a note in it."""
    store = rt.memory
    held = store.index.backend.count(None)
    if held:
        raise CliError(f"this home's store already holds {held} notes: a restore goes into a "
                       "home that holds none (nothing was restored); `amem restore DIR "
                       "--merge` adds what this home lacks (and finishes a restore that was "
                       "cut short)",
                       code="invalid_argument", exit_code=EXIT_USAGE, field="dir")
    return store


def _large_files_dir(rt: Runtime, db: Path) -> Path:
    """Where the conversation store at ``db`` keeps its large files (lcm's own rule)."""
    from lcm.largefiles import files_dir

    where = files_dir(rt.settings.lcm.large_files_dir, db.resolve().parent)
    assert where is not None  # a file's store always has a directory
    return where


# ------------------------------------------------------------------------------ files


def _private(path: Path) -> Path:
    """``path`` created empty with mode 0600 (whatever the umask), for writing."""
    from amem.kernel.files import precreate_private

    precreate_private(path)
    return path


def _copy_private(source: Path, target: Path) -> None:
    """``source`` to ``target`` (0600), through a temporary name renamed when whole."""
    from amem.atomicfile import writing_atomic_bytes

    with writing_atomic_bytes(target) as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out)


def _fsync_tree(root: Path) -> None:
    from amem.atomicfile import fsync_dir

    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    fsync_dir(root)
