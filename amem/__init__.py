"""amem: A-MEM-style memory notes for AI agents, stored in Qdrant.

    from amem import MemoryStore
    with MemoryStore(":memory:") as store:
        store.add("Alice prefers tea over coffee", subjects=["alice"])
        store.search("what does Alice drink?")
"""

from __future__ import annotations

from .config import AmemConfig, load_config
from .errors import AmemError
from .notes import Note
from .store import MemoryStore

__all__ = ["MemoryStore", "Note", "AmemConfig", "load_config", "AmemError"]
__version__ = "0.1.0"
