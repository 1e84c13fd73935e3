"""amem: A-MEM-style memory notes for AI agents, stored in Qdrant.

    from amem import MemoryStore
    with MemoryStore(":memory:") as store:
        store.add("Alice prefers tea over coffee", subjects=["alice"])
        store.search("what does Alice drink?")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from .config import AmemConfig, load_config
    from .errors import AmemError
    from .notes import Note
    from .store import MemoryStore

__all__ = ["MemoryStore", "Note", "AmemConfig", "load_config", "AmemError"]
__version__ = "0.1.0"

# The public names load on first use (PEP 562), not at ``import amem``: ``lcm`` and the tools
# import ``amem.kernel.*``, and importing a submodule runs this file first; eager imports here
# would load the store, the vector engines and numpy for a clock or an error class.
__getattr__, __dir__ = lazy_exports(__name__, {
    "MemoryStore": ".store",
    "Note": ".notes",
    "AmemConfig": ".config",
    "load_config": ".config",
    "AmemError": ".errors",
}, __all__)
