"""tools: the agent-facing layer of amem — one tool facade, tool-list exports, MCP server, CLI.

    from amem import MemoryStore
    from tools import ToolFacade
    with MemoryStore(":memory:") as store:
        tools = ToolFacade(store, None, agent_id="me")
        tools.call("memory_add", {"text": "Alice prefers tea"})
        tools.list_tools()        # neutral definitions; tools.export.export(..., "openai")
"""

from __future__ import annotations

from .errors import ToolError
from .export import FORMATS, estimate_tokens, export
from .facade import CORE_TOOLS, MAX_PAYLOAD_BYTES, ToolFacade
from .registry import Tool

__all__ = ["ToolFacade", "Tool", "ToolError", "export", "FORMATS", "estimate_tokens",
           "CORE_TOOLS", "MAX_PAYLOAD_BYTES"]
