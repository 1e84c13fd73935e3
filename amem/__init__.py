"""amem: A-MEM-style memory notes for AI agents, stored in Qdrant.

    from amem import MemoryStore
    with MemoryStore(":memory:") as store:
        store.add("Alice prefers tea over coffee", subjects=["alice"])
        store.search("what does Alice drink?")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
_LAZY = {
    "MemoryStore": ".store",
    "Note": ".notes",
    "AmemConfig": ".config",
    "load_config": ".config",
    "AmemError": ".errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'amem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next access is a plain attribute read
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
