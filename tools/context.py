"""What a tool handler receives: the stores, the caller's identity and a view of the facade.

It lives below the facade and the tool modules (``memory_tools``, ``lcm_tools``), which all
import it: the tool modules name the handful of facade members they read (``ToolCatalogue``)
instead of importing the facade that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .registry import Tool

if TYPE_CHECKING:
    from amem import MemoryStore
    from lcm import LcmStore

__all__ = ["CallContext", "ToolCatalogue"]


class ToolCatalogue(Protocol):
    """The facade as a handler sees it (``tools.facade.ToolFacade`` is one)."""

    #: the lcm session family the caller reads: always one of its own (``tools.tenancy``)
    @property
    def session_key(self) -> str: ...

    def available(self) -> list[Tool]:
        """Every tool the caller can run."""
        ...

    def definition(self, tool: Tool, *, full: bool = True) -> dict[str, Any]:
        """``{name, description, input_schema}`` of one tool, as listed to the caller."""
        ...


@dataclass(frozen=True)
class CallContext:
    """What a handler may use: the stores and the caller's identity (never from arguments).

    ``read_only``: the caller may change nothing (a read-only key), not even the usage a read
    records on the notes it returns (retrieval counts, usage heat)."""

    memory: MemoryStore | None
    lcm: LcmStore | None
    agent_id: str
    facade: ToolCatalogue
    read_only: bool = False
