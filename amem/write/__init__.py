"""The write path of the note store: ``Writer`` (add: dedup, fold, enrichment, links,
evolution), ``BulkWriter`` (batches and imports) and ``Updater`` (edits in place)."""

from __future__ import annotations

from .bulk import BatchOutcome, BulkWriter
from .enrichment import EnricherSlot
from .result import AddResult, DeleteResult
from .update import UpdateResult, Updater
from .writer import Writer

__all__ = ["AddResult", "BatchOutcome", "BulkWriter", "DeleteResult", "EnricherSlot",
           "UpdateResult", "Updater", "Writer"]
