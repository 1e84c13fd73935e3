"""The parts of a ``MemoryStore`` built on first use, not at open: the write path
(``amem.write``, with ``amem.supersede`` and ``amem.separate``) and the nightly maintenance
(``amem.consolidate``). A command that only reads (list, get, search, status) never imports
them, a third of its start."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import AmemConfig
    from .consolidate import Consolidator
    from .index import NoteIndex
    from .kernel.llm import LLM
    from .separate import Separator
    from .supersede import Superseder
    from .write import BulkWriter, Updater, Writer


@dataclass(frozen=True)
class WriteParts:
    """The write path's stages, built together on a store's first write: each is given the
    others it needs, and the enricher slot they share."""

    superseder: "Superseder"
    writer: "Writer"
    bulk: "BulkWriter"
    updater: "Updater"
    separator: "Separator"

    @classmethod
    def build(cls, index: "NoteIndex", config: "AmemConfig", llm: "LLM | None",
              agent_id: str) -> "WriteParts":
        from .separate import Separator
        from .supersede import IndexMeaning, Superseder, judge_for
        from .write import BulkWriter, EnricherSlot, Updater, Writer

        superseder = Superseder(index, judge_for(llm, IndexMeaning(index)))
        enricher = EnricherSlot(llm)  # built on first use: the fast path needs none
        writer = Writer(index, config, enricher, superseder, agent_id=agent_id)
        return cls(superseder, writer, BulkWriter(index, writer, superseder),
                   Updater(index, config, enricher, superseder),
                   Separator(index, enricher, writer.placer, superseder))


class OnFirstUse:
    """A store's write parts and its consolidator, each built once, when first asked for,
    under the store's lock (two threads' first writes build one set)."""

    def __init__(self, index: "NoteIndex", config: "AmemConfig", llm: "LLM | None",
                 agent_id: str, lock: threading.RLock) -> None:
        self._index = index
        self._config = config
        self._llm = llm
        self._agent_id = agent_id
        self._lock = lock
        self._writes: WriteParts | None = None
        self._consolidator: Consolidator | None = None

    def writes(self) -> WriteParts:
        parts = self._writes
        if parts is None:
            with self._lock:
                if self._writes is None:
                    self._writes = WriteParts.build(self._index, self._config, self._llm,
                                                    self._agent_id)
                parts = self._writes
        return parts

    def consolidator(self) -> "Consolidator":
        found = self._consolidator
        if found is None:
            from .consolidate import Consolidator

            with self._lock:
                if self._consolidator is None:
                    self._consolidator = Consolidator(self._index, self.writes().superseder,
                                                      self._llm)
                found = self._consolidator
        return found


__all__ = ["OnFirstUse", "WriteParts"]
