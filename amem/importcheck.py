"""The first pass of a file's import: every line read and checked as the writer will take it,
before anything is written (``amem.importer`` writes the file in a second pass).

A bad line is one the writer would refuse: a field it rejects (``draft_line``, the check of one
line, which the writing pass drafts each line through too), or an id that an earlier line
gives another text, or that a stored note holds with another text (``IdClashes``, looked up a
batch of lines at a time). ``with_stable_id`` gives a line without an id the one a re-run
gives it again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .errors import ValidationError
from .importread import read_items, unit
from .importreport import ImportReport, skip_line
from .kernel.encoding import find_not_utf8
from .notefields import is_expired
from .notes import Note, check_text, content_hash, point_id

if TYPE_CHECKING:
    from .index import NoteIndex
    from .store import MemoryStore

#: lines whose ids the whole-file check looks up in the store in one engine call
ID_LOOKUP = 512


def check_whole(store: "MemoryStore", path: Path, fmt: str, title: str | None, enrich: bool,
                agent_id: str | None, *, max_chars: int, ids: "IdClashes | None",
                source: str | None = None) -> ImportReport:
    """The first pass: each line read and validated as the writer will take it, and with
    ``ids`` each id checked against the earlier lines and the store; the bad lines are
    recorded in the report, in line order."""
    shown, per = Path(source) if source is not None else path, unit(fmt)
    check = ImportReport(path=str(shown))
    rows: list[tuple[int, Note | str]] = []  # lines not yet looked up: their note, or why not

    def settle() -> None:
        notes = [row for _, row in rows if isinstance(row, Note)]
        held = iter(ids.held(notes) if ids is not None and notes else [False] * len(notes))
        for number, row in rows:
            if isinstance(row, str):
                skip_line(check, shown, number, row, unit=per)
            elif next(held):
                skip_line(check, shown, number, f"a note with id {row.id!r} already exists with "
                                                f"different content; delete it first, or give "
                                                f"this {per} another id or none", unit=per)
        rows.clear()

    try:
        for number, item in read_items(path, fmt, title, max_chars=max_chars, source=source):
            check.read += 1
            check.last_line = number
            drafted = draft_line(store, item, enrich, agent_id)
            row = drafted if isinstance(drafted, str) else drafted[1]
            if isinstance(row, Note) and ids is not None and isinstance(item, dict) \
                    and "id" in item:  # the line gives its own id
                row = ids.earlier(number, row) or row
            rows.append((number, row))
            if len(rows) >= ID_LOOKUP:
                settle()
        settle()
    except UnicodeDecodeError as exc:
        # the decoder's offset is into the chunk it was reading, not a line: the place is
        # found again in the file's bytes (a UTF-16 file with a broken character is rare
        # enough to be named by the decoder alone)
        with path.open("rb") as raw:
            where = find_not_utf8(raw, str(shown)) if exc.encoding.startswith("utf-8") else None
        said = str(where) if where is not None else f"{shown} is not {exc.encoding} text: {exc}"
        raise ValidationError(f"{said}; nothing was imported", field="file") from None
    return check


class IdClashes:
    """The ids a file's lines may not take: one an earlier line gives another text, or one a
    stored note holds with another text.

    The writer refuses such a line only when it reaches it, after the lines before it were
    written; found in the first pass, it stops the import before anything is written. The
    rule is the writer's (``amem.write.dedup``), with one simplification: the writer lets a
    clashing line through when its text is already stored under another id (it dedups into
    that note and the id given is dropped); here one id names one text, whatever else the
    store holds. A re-run is no clash: the same id with the same text (or a text folded into
    it) is the same note.
    """

    def __init__(self, index: "NoteIndex", unit: str = "line") -> None:
        self._backend = index.backend
        self._unit = unit
        self._now = index.clock.now()
        # (agent, id) -> (first line, content hash) of the lines that give their own id; an
        # id derived from the text (``with_stable_id``) names that text only, so those lines
        # are not kept (a given id copying a derived "imp-..." one is left to the writer): the
        # memory grows with the given ids alone
        self._given: dict[tuple[str, str], tuple[int, str]] = {}

    def earlier(self, number: int, note: Note) -> str | None:
        """Why line ``number`` may not give ``note``'s id (an earlier line gave it another
        text), or None."""
        first, digest = self._given.setdefault((note.agent_id, note.id), (number, note.hash))
        if digest == note.hash:
            return None
        return (f"{self._unit} {first} already gives id {note.id!r} to another text; one id "
                f"names one note (give this {self._unit} another id, or none)")

    def held(self, notes: Sequence[Note]) -> list[bool]:
        """For each note, whether a stored note holds its id with another text (one engine
        call for them all)."""
        points = [point_id(n.agent_id, n.id) for n in notes]
        stored = {hit.id: hit.payload for hit in self._backend.retrieve(points)}
        return [self._taken(stored.get(p), n) for p, n in zip(points, notes)]

    def _taken(self, payload: dict[str, Any] | None, note: Note) -> bool:
        if payload is None:
            return False
        if payload.get("agent_id") != note.agent_id or payload.get("id") != note.id:
            return True  # the point holds another note: never overwritten
        if not payload.get("is_active", True) or is_expired(
                str(payload.get("expires_at") or ""), self._now):
            return False  # a deleted note's id may be taken again; an expired one is swept first
        return note.hash != payload.get("hash") and note.hash not in (
            payload.get("folded_hashes") or [])


def draft_line(store: "MemoryStore", item: dict[str, Any] | str, enrich: bool,
               agent_id: str | None) -> tuple[dict[str, Any], Note] | str:
    """The item ready to write (with its id) and the note it makes, or why the line is bad."""
    if isinstance(item, str):
        return item
    try:
        if isinstance(item.get("text"), str) and len(item["text"]) > store.config.max_text_chars:
            # refused as the writer would, before the id's hash and the draft: those took 15
            # times the text's size (a 50 MB one-line file: 900 MB) only to refuse it
            check_text(item["text"], field="text", max_chars=store.config.max_text_chars)
        item = with_stable_id(item)
        note = store.writer.draft(item, enrich=enrich, agent_id=agent_id).note  # validate only
    except ValidationError as exc:
        return str(exc) + _text_elsewhere(item) if exc.field == "text" else str(exc)
    return item, note


#: where other tools keep a note's text (``amem get --json`` and most apps: content; mem0's
#: export: memory), named when an item has one of them and no ``text``
TEXT_ELSEWHERE = ("content", "memory", "note", "body")


def _text_elsewhere(item: dict[str, Any]) -> str:
    """" (its text is in 'memory' ...)" for an item without ``text`` whose text another
    tool's field holds; "" otherwise. Said, not guessed: which field is the note is the
    user's to say, and one rename in ``jq`` says it for the whole file."""
    if "text" in item:
        return ""
    found = next((key for key in TEXT_ELSEWHERE if isinstance(item.get(key), str)), None)
    if found is None:
        return ""
    return (f" (its text looks to be in {found!r}: name that field 'text'; with jq, "
            f"`.text = .{found} | del(.{found})` on each note)")


def with_stable_id(item: dict[str, Any]) -> dict[str, Any]:
    """Give an id-less item an id derived from its text and subjects, so re-runs write the
    same point.

    The subjects are part of it because the same text about other people is its own note
    (``amem.notes.about_the_same``): from the text alone, the second line got the first's id
    and was refused mid-write as "a note with id ... already exists with different content",
    an id the file never gave. Lines whose subjects overlap still dedup into one note.
    """
    if "id" in item or not isinstance(item.get("text"), str):
        return item
    # Point ids already include the agent, so the content hash is a stable note id.
    key, subjects = item["text"], item.get("subjects")
    if isinstance(subjects, list) and subjects and all(isinstance(s, str) for s in subjects):
        key += "\x00" + "\x00".join(sorted(set(subjects)))
    return {**item, "id": f"imp-{content_hash(key)[:24]}"}


__all__ = ["ID_LOOKUP", "IdClashes", "TEXT_ELSEWHERE", "check_whole", "draft_line",
           "with_stable_id"]
