"""What a load of an export read, stored and left out (:class:`LoadReport`), and the two
ways it stops: refused before anything was stored (:class:`ExportRejected`), or stopped by the
store part way (:class:`PartlyStored`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_SAID", "ExportRejected", "LoadReport", "PartlyStored"]

#: bad conversations and warnings named in a report at most (a broken file of 10k must not fill memory)
MAX_SAID = 100


@dataclass
class LoadReport:
    """What a load read, stored and left out (``to_dict`` for ``--json``)."""

    #: the export as errors name it: the file, or the first file read inside its zip or folder
    path: str
    app: str
    #: the files of conversations read, in order (a zip's or a folder's ``conversations.json``,
    #: or its shards; the first ``MAX_SAID``)
    parts: list[str] = field(default_factory=list)
    #: the zip's or folder's other files, not read, by what they are (:data:`tools.chats.parts.LEFT_OUT`;
    #: one no export holds, or another export's conversations, is named in ``warnings`` too)
    files_left_out: Counter[str] = field(default_factory=Counter)
    #: shards the export's manifest (``export_manifest.json``) lists that the zip or folder
    #: lacks: their conversations were not read (each named in ``warnings``)
    parts_missing: int = 0
    conversations: int = 0
    #: conversations that got at least one new message
    conversations_stored: int = 0
    #: messages kept on the conversations' own lines (stored now or already there)
    messages: int = 0
    stored: int = 0
    skipped_duplicates: int = 0
    #: edited or regenerated branches off the line the user last saw, and their messages
    branches: int = 0
    branch_messages: int = 0
    #: fork markers stored before the branches' messages (one per fork), counted in ``stored``
    fork_points: int = 0
    #: markers new to a store that held their branches (imported before markers existed), which
    #: ingest stored last, moved before their branch's first message (``LcmStore.place_before``)
    fork_points_placed: int = 0
    #: of those, markers whose branch's first message a summary already held: in the context
    #: (what the model is given) each follows that summary, a summary being one item there;
    #: browsing has it in place (each named in ``warnings``)
    fork_points_after_summary: int = 0
    #: messages left out, by reason ("empty", "reasoning", "internal", "unreadable")
    left_out: Counter[str] = field(default_factory=Counter)
    #: messages kept that the app does not show as one ("hidden", "tool_output")
    kept: Counter[str] = field(default_factory=Counter)
    #: images, audio, video and files stored as placeholders, by kind (the export has no bytes of them)
    placeholders: Counter[str] = field(default_factory=Counter)
    #: conversations without one message to store (nothing was said in them)
    empty_conversations: int = 0
    invalid: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: all the warnings (``warnings`` names the first ``MAX_SAID``)
    warning_count: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key in ("left_out", "kept", "placeholders", "files_left_out"):
            data[key] = dict(sorted(getattr(self, key).items()))
        return data

    def error(self, text: str) -> None:
        """A conversation not stored: counted, and named while fewer than ``MAX_SAID`` are."""
        self.invalid += 1
        if len(self.errors) < MAX_SAID:
            self.errors.append(text)

    def warn(self, text: str) -> None:
        self.warning_count += 1
        if len(self.warnings) < MAX_SAID:
            self.warnings.append(text)


class ExportRejected(ValueError):
    """The export has conversations that cannot be read; nothing was stored."""

    def __init__(self, check: LoadReport) -> None:
        shown = "\n  ".join(check.errors[:20])
        more = check.invalid - min(20, len(check.errors))
        super().__init__(
            f"{check.path}: {check.invalid} of {check.conversations} conversations cannot be read; nothing "
            f"was stored (fix them, or pass --skip-invalid to store the rest):\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""))
        self.report = check


class PartlyStored(Exception):
    """Storing stopped at a conversation (the store failed: it went away, or stayed locked);
    the conversations before it are stored, and running the same import again resumes."""

    def __init__(self, cause: Exception, where: str, report: LoadReport) -> None:
        super().__init__(f"{where}: {cause} The {report.conversations_stored} conversations stored before it "
                         f"are kept ({report.stored} messages); importing the file again stores the rest "
                         "(what is stored is taken as already there)")
        self.cause, self.report = cause, report
