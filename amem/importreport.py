"""What an import reports: ``ImportReport`` (its counts, the first errors and warnings), how
a line is named in it ("notes.jsonl:7", "notes.json item 3") and ``ImportRejected``, the error
of a file with bad lines.

Shared by every import: a file's (``amem.importer``), a folder's (``amem.importdir``) and an
export's (``amem.export``). Both passes of a file's import record a bad line the same way
(``skip_line``): the whole-file check (``amem.importcheck``) and the writing pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ValidationError

log = logging.getLogger(__name__)

#: error messages an import keeps (every bad line is still counted and logged)
MAX_ERRORS = 100
#: line warnings an import keeps; the rest are counted in a last "... and N more" one
MAX_WARNINGS = 100


@dataclass
class ImportReport:
    """What an import did, line by line where it matters."""

    path: str
    read: int = 0
    created: int = 0
    deduplicated: int = 0
    folded: int = 0
    pending_merge: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    #: stored, but not all as given ("file:line: ..." -- subjects a duplicate's stored note
    #: lacks, a code block cut), and notes whose new vector could not be computed yet; the
    #: first ``MAX_WARNINGS`` line warnings, then "... and N more"
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: the number of the last line read (the progress total of the writing pass)
    last_line: int = 0
    #: older notes the imported notes superseded (``amem.write.bulk``)
    superseded: int = 0
    #: who judged supersession ("offline", an LLM label), or "deferred to nightly"
    supersede: str = "deferred to nightly"
    #: notes stating a change left to the nightly sweep (an LLM judges a bounded number)
    supersede_deferred: int = 0
    #: ids of expired, not yet swept notes an imported note of the same id replaced
    expired_replaced: int = 0
    #: stored notes that gained the document's file-name title: the same text, stored from a
    #: file of another name (a renamed file imported again, ``amem.importtitle``)
    title_added: int = 0
    #: stored notes that gained tags given with a text they already held (a vault note
    #: retagged, imported again: ``amem.write.tagjoin``), and the first ``MAX_WARNINGS`` of
    #: their ids
    tags_added: int = 0
    tags_added_to: list[str] = field(default_factory=list)
    #: stored notes whose user had removed tags a text still gives, not added again
    #: (``amem.write.takenback``), and the first ``MAX_WARNINGS`` of their ids
    tags_kept_removed: int = 0
    tags_kept_removed_from: list[str] = field(default_factory=list)
    #: an export's notes already stored as the export has them (nothing written)
    unchanged: int = 0
    #: an export's notes stored otherwise (edited, searched since), written back as exported
    replaced: int = 0
    #: a folder's import (``amem.importdir``): the files read, the first paths left out
    #: ("path: reason") and every one counted by reason; None for a file's import
    files: int | None = None
    left_out: list[str] = field(default_factory=list)
    left_out_by_reason: dict[str, int] = field(default_factory=dict)
    #: the key of a JSON object the notes were read from (``{"notes": [...]}``), or None
    json_key: str | None = None
    #: a merge (``load_export(keep_stored=True)``, ``amem restore --merge``): notes whose id
    #: was stored with the same text, kept as stored (not written; ``unchanged`` counts those
    #: stored exactly as exported), and "agent/id" of those stored with another text, not
    #: overwritten; None for any other load
    kept: int = 0
    clashes: list[str] | None = None

    @property
    def rate(self) -> float:
        return self.read / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "read": self.read, "created": self.created,
                "deduplicated": self.deduplicated, "folded": self.folded,
                "pending_merge": self.pending_merge, "skipped": self.skipped,
                "errors": self.errors, "warnings": self.warnings, "seconds": round(self.seconds, 3),
                "notes_per_second": round(self.rate, 1), "superseded": self.superseded,
                "supersede": self.supersede, "supersede_deferred": self.supersede_deferred,
                "expired_replaced": self.expired_replaced, "title_added": self.title_added,
                "tags_added": self.tags_added, "tags_added_to": self.tags_added_to,
                "tags_kept_removed": self.tags_kept_removed,
                "tags_kept_removed_from": self.tags_kept_removed_from,
                "unchanged": self.unchanged,
                "replaced": self.replaced,
                **({} if self.json_key is None else {"json_key": self.json_key}),
                **({} if self.clashes is None else {"kept": self.kept, "clashes": self.clashes}),
                **({} if self.files is None else {
                    "files": self.files, "left_out": self.left_out,
                    "left_out_by_reason": self.left_out_by_reason})}


def place(path: Path, unit: str, number: int) -> str:
    """Where a note came from, as the report says it: "notes.jsonl:7", "notes.json item 3",
    "notes.csv row 4"."""
    return f"{path} {unit} {number}" if unit in ("item", "row") else f"{path}:{number}"


def skip_line(report: ImportReport, path: Path, number: int, why: str, *,
              unit: str = "line") -> None:
    report.skipped += 1
    message = f"{place(path, unit, number)}: {why}"
    if len(report.errors) < MAX_ERRORS:  # a bad file of a million lines must not fill memory
        report.errors.append(message)
    # The report (or ImportRejected) carries the line to the caller, who shows it once; a
    # warning per line here printed each bad line twice in the CLI (two passes, two streams).
    log.debug("import: skipped %s", message)


class ImportRejected(ValidationError):
    """The file has bad lines; nothing was written. ``errors`` holds the first ``MAX_ERRORS``."""

    def __init__(self, path: Path, check: ImportReport, unit: str = "line") -> None:
        shown = "\n  ".join(check.errors[:20])
        more = check.skipped - min(20, len(check.errors))
        super().__init__(
            f"{path}: {check.skipped} of {check.read} {unit}s are invalid; nothing was imported "
            f"(fix them, or pass --skip-invalid to import the rest):\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""), field="file")
        self.errors = list(check.errors)
        self.invalid = check.skipped


__all__ = ["ImportRejected", "ImportReport", "MAX_ERRORS", "MAX_WARNINGS", "place", "skip_line"]
