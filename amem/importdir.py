"""Import a folder of notes (an Obsidian vault, a docs tree): every Markdown, text and JSONL
file under it, each as one file's import (``amem.importer``), one engine flush at the end.

What is read: the files ``detect_format`` knows (``.md``, ``.markdown``, ``.txt``, ``.text``,
``.jsonl``, ``.ndjson``, ``.html``, ``.htm``, ``.enex``: an unzipped Notion, Apple Notes or
Evernote export), in path order, each its own document (its own title). What is left
out, and named in the report (``left_out``, with the reason): hidden files and folders
(``.obsidian``, ``.git``, ``.trash``: settings and history, not notes), files of other kinds
(attachments: images, PDFs, canvases; ``.json`` and ``.csv`` files too: in a folder mostly
app data and tables),
links to folders (not followed: a link back up the tree would walk it forever) and broken
links.

The whole folder is checked first, as one file is: a bad line in any file (or a file that is
not UTF-8) imports nothing and every one is named, unless ``skip_invalid`` imports the rest.
A re-run stores nothing twice (each file's notes keep their ids), so one killed half way is
finished by running it again.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ValidationError
from .importarray import chat_export_of
from .importcheck import IdClashes, check_whole
from .importer import (MAX_ERRORS, MAX_WARNINGS, ImportRejected, ImportReport, Progress,
                       detect_format, import_file)
from .write.bulk import check_batch

if TYPE_CHECKING:
    from .store import MemoryStore

#: the report keeps this many left-out paths; the rest are counted by reason
MAX_LEFT_OUT = 100
#: formats a folder's files are not read in, and why: a vault's JSON is mostly settings and
#: app data, its CSV tables data (a Notion export's database CSV repeats its pages' text)
_ALONE = {"json": "a .json file (one that is an array of notes: amem import FILE.json)",
          "csv": "a .csv table (one of notes, a row each: amem import FILE.csv)"}
_COUNTS = ("created", "deduplicated", "folded", "pending_merge", "superseded", "tags_added",
           "tags_kept_removed", "title_added", "supersede_deferred", "expired_replaced")


def walk(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files to import under ``root`` (sorted), and the paths left out with the reason."""
    files: list[Path] = []
    left: list[tuple[Path, str]] = []
    for top, dirs, names in os.walk(root, followlinks=False):
        here = Path(top)
        for name in sorted(dirs):
            if name.startswith("."):
                left.append((here / name, "a hidden folder"))
            elif (here / name).is_symlink():
                left.append((here / name, "a link to a folder, not followed"))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and not (here / d).is_symlink())
        for name in sorted(names):
            path = here / name
            if name.startswith("."):
                left.append((path, "a hidden file"))
            elif not path.is_file():
                left.append((path, "a broken link" if path.is_symlink() else "not a regular file"))
            else:
                try:
                    fmt = detect_format(path)
                except ValidationError:
                    left.append((path, f"not Markdown, text, JSONL, HTML or ENEX "
                                       f"({path.suffix.lower() or 'no extension'})"))
                    continue
                if fmt in _ALONE:
                    left.append((path, _ALONE[fmt]))
                    continue
                files.append(path)
    return sorted(files), left


#: the files a chat app's export keeps its conversations in (whole, or in shards)
_CHAT_PARTS = re.compile(r"conversations(-\d+)?\.json")


def refuse_chat_export(root: Path, left: list[tuple[Path, str]] | None = None) -> None:
    """Refuse a folder a ChatGPT or Claude export was unzipped into, as ``amem import``
    refuses its ``conversations.json``: its notes would be the export's ``chat.html`` (every
    conversation as one page) while its conversations were left out as a ``.json`` file.

    ``left`` is what :func:`walk` left out of ``root``, walked here when not given (the CLI
    asks before it opens the store: a refusal costs no store).

    Raises:
        ValidationError: naming the export's file and ``amem lcm ingest FOLDER``.
    """
    if left is None:
        left = walk(root)[1]
    parts = sorted((p for p, _ in left if _CHAT_PARTS.fullmatch(p.name) and p.is_file()),
                   key=lambda p: (len(p.relative_to(root).parts), str(p)))
    for path in parts[:1]:  # the shallowest: the export's own
        with path.open(encoding="utf-8-sig", errors="strict") as handle:
            what = chat_export_of(handle)
        if what is not None:
            raise ValidationError(
                f"{root} is an unzipped {what.removeprefix('a ')} (its {path.relative_to(root).as_posix()}): its "
                f"conversations go into conversation memory with `amem lcm ingest {root}`, each kept whole "
                "and searchable; amem import reads notes", field="format")


def import_dir(store: "MemoryStore", root: str | Path, *, enrich: bool = True,
               agent_id: str | None = None, batch: int | None = None,
               progress: Progress | None = None, skip_invalid: bool = False) -> ImportReport:
    """Import every note file under ``root``; see the module docstring.

    ``progress`` is called with (files done, files) after each file.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValidationError(f"not a folder: {root}", field="path")
    check_batch(batch, f"the store's embed_batch ({store.config.embed_batch})")
    files, left = walk(root)
    refuse_chat_export(root, left)
    report = ImportReport(path=str(root))
    started = time.perf_counter()
    check = ImportReport(path=str(root))
    good: list[Path] = []
    refused: list[str] = []  # files that are not UTF-8, refused whole
    for path in files:  # the whole folder is checked before anything is written
        try:
            found = check_whole(store, path, detect_format(path), None, enrich, agent_id,
                                max_chars=store.config.max_text_chars,
                                ids=None if skip_invalid else IdClashes(store.index))
        except ValidationError as exc:  # not UTF-8: the file as a whole is a bad one
            refused.append(str(exc).removesuffix("; nothing was imported"))
            check.skipped += 1
            if len(check.errors) < MAX_ERRORS:
                check.errors.append(refused[-1])
            continue
        check.read += found.read
        check.skipped += found.skipped
        check.errors.extend(found.errors[:MAX_ERRORS - len(check.errors)])
        good.append(path)
    if check.skipped and not skip_invalid:
        raise ImportRejected(root, check)
    # the refused files' lines are not counted by the writing pass, which never reads them
    report.skipped, report.errors = len(refused), refused[:MAX_ERRORS]
    warned = 0  # line warnings of every file, kept or not
    # notes that gained tags, or a file-name title, counted once however many files retagged
    # or titled them: the files' counts are then summed as the others are (each of the others
    # counts lines, or a note's one change: created, superseded, replaced once)
    gained: set[str] = set()
    titled: set[tuple[str, str]] = set()
    kept_out: set[str] = set()  # notes whose removed tags stayed out, as ``gained``
    for done, path in enumerate(good, 1):
        one = import_file(store, path, enrich=enrich, agent_id=agent_id, batch=batch,
                          skip_invalid=True, flush_at_end=False, gained=gained, titled=titled,
                          kept_out=kept_out)
        report.read += one.read
        report.skipped += one.skipped
        report.errors.extend(one.errors[:MAX_ERRORS - len(report.errors)])
        warned += len(one.warnings)
        report.warnings.extend(one.warnings[:max(0, MAX_WARNINGS - len(report.warnings))])
        report.supersede = one.supersede
        for name in _COUNTS:
            setattr(report, name, getattr(report, name) + getattr(one, name))
        report.tags_added_to.extend(
            one.tags_added_to[:max(0, MAX_WARNINGS - len(report.tags_added_to))])
        report.tags_kept_removed_from.extend(one.tags_kept_removed_from[
            :max(0, MAX_WARNINGS - len(report.tags_kept_removed_from))])
        if progress is not None:
            progress(done, len(good))
    store.flush()
    if warned > len(report.warnings):  # a file's own "... and N more" counts as one here
        report.warnings.append(f"... and {warned - len(report.warnings)} more warnings")
    report.files = len(good)
    report.left_out = [f"{p}: {why}" for p, why in left[:MAX_LEFT_OUT]]
    report.left_out_by_reason = dict(Counter(why for _, why in left))
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["MAX_LEFT_OUT", "import_dir", "refuse_chat_export", "walk"]
