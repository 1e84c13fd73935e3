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

if TYPE_CHECKING:
    from .errors import ToolError
    from .export import FORMATS, estimate_tokens, export
    from .facade import CORE_TOOLS, MAX_PAYLOAD_BYTES, ToolFacade
    from .registry import Tool

__all__ = ["ToolFacade", "Tool", "ToolError", "export", "FORMATS", "estimate_tokens",
           "CORE_TOOLS", "MAX_PAYLOAD_BYTES"]

# The public names load on first use (PEP 562), as in ``amem``: importing ``tools.cli`` or
# ``tools.remote`` runs this file first, and the facade pulls in both stores, the engines and
# numpy, which a CLI command routed through a running server never uses (issue 25).
_LAZY = {"ToolFacade": ".facade", "CORE_TOOLS": ".facade", "MAX_PAYLOAD_BYTES": ".facade",
         "Tool": ".registry", "ToolError": ".errors", "export": ".export", "FORMATS": ".export",
         "estimate_tokens": ".export"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # the next access is a plain attribute read
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
