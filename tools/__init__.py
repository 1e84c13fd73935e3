"""tools: the agent-facing layer of amem — one tool facade, tool-list exports, MCP server, CLI.

    from amem import MemoryStore
    from tools import ToolFacade
    with MemoryStore(":memory:") as store:
        tools = ToolFacade(store, None, agent_id="me")
        tools.call("memory_add", {"text": "Alice prefers tea"})
        tools.list_tools()        # neutral definitions; tools.export.export(..., "openai")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amem.kernel.lazy import lazy_exports

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
__getattr__, __dir__ = lazy_exports(__name__, {
    "ToolFacade": ".facade", "CORE_TOOLS": ".facade", "MAX_PAYLOAD_BYTES": ".facade"}, __all__)
