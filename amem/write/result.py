"""``AddResult``: what one ``add`` (or one item of ``add_many``) did."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..notefields import unsaved_fields
from ..notes import Note

#: ``rejected`` only comes from bulk adds (an id clash skips that item, not the batch)
STATUSES = ("created", "deduplicated", "folded", "pending_merge", "rejected")
#: add results whose note is new (and may replace an older fact, ``amem.supersede``)
NEW_STATUSES = ("created", "pending_merge")


@dataclass
class AddResult:
    """What ``add`` did."""

    status: str
    id: str
    links: list[str] = field(default_factory=list)
    evolved: list[str] = field(default_factory=list)
    enriched_by: str = "none"
    neighbour: str | None = None
    similarity: float | None = None
    warnings: list[str] = field(default_factory=list)
    #: older notes this one replaced (``amem.supersede``)
    supersedes: list[str] = field(default_factory=list)
    #: tags given with a duplicate that its stored note lacked, added to it
    #: (``amem.write.tagjoin``)
    tags_added: list[str] = field(default_factory=list)
    #: given tags the stored note's user had removed since this text's tags were first
    #: taken, not added again (``amem.write.takenback``); shown only when there are some
    tags_kept_removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.tags_kept_removed:  # only a re-import's text meets a removal it made
            del data["tags_kept_removed"]
        return data


@dataclass
class DeleteResult:
    """What ``delete`` did: the note (now inactive) and the older notes it had replaced,
    current again (``amem.supersede.release``): a fact it hid shows in searches from now on,
    so the caller is told which."""

    id: str
    note: Note
    #: the older notes the deleted note had replaced, current again
    released: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "deleted": True, "released": list(self.released)}


def kept_fields(result: AddResult, note: Note) -> AddResult:
    """A text that went into a stored note leaves its event time, metadata and expiry behind
    (the stored note keeps its own): say so rather than drop them silently."""
    if result.status in ("deduplicated", "folded"):
        lost = unsaved_fields(note)
        if lost:
            result.warnings.append(
                f"the text went into stored note {result.id!r}, which keeps its own "
                f"{', '.join(lost)}; the ones given were not stored")
    return result


__all__ = ["AddResult", "DeleteResult", "NEW_STATUSES", "STATUSES", "kept_fields"]
