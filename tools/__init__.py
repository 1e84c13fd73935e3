"""tools: the agent-facing layer of amem — one tool facade, tool-list exports, MCP server, CLI.

    from amem import MemoryStore
    from tools import ToolFacade
    with MemoryStore(":memory:") as store:
        tools = ToolFacade(store, None, agent_id="me")
        tools.call("memory_add", {"text": "Alice prefers tea"})
        tools.list_tools()        # neutral definitions; tools.export.export(..., "openai")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# light modules (the standard library only), imported as before: ``export`` must be bound
# here, or the submodule of the same name would shadow the function once anything imports it
from .errors import ToolError
from .export import FORMATS, estimate_tokens, export
from .registry import Tool

if TYPE_CHECKING:
    from .facade import CORE_TOOLS, MAX_PAYLOAD_BYTES, ToolFacade

__all__ = ["ToolFacade", "Tool", "ToolError", "export", "FORMATS", "estimate_tokens",
           "CORE_TOOLS", "MAX_PAYLOAD_BYTES"]

# The facade's names load on first use (PEP 562), as in ``amem``: importing ``tools.cli`` or
# ``tools.remote`` runs this file first, and the facade pulls in both stores, the engines and
# numpy, which a CLI command routed through a running server never uses (issue 25).
_LAZY = {"ToolFacade": ".facade", "CORE_TOOLS": ".facade", "MAX_PAYLOAD_BYTES": ".facade"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next access is a plain attribute read
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
