"""What a request costs against its caller's budgets (``tools.ratelimit``): which budget, and
how many tokens.

The one rule for every door of ``amem serve --http``:

* on the MCP endpoint a ``tools/call`` of a tool that writes (any tool not listed read-only)
  is a write; its cost is what it writes (``WRITES``), summed over a batch's calls; every
  other message is a read of cost 1; closing a session (``DELETE``) costs nothing;
* elsewhere ``GET``/``HEAD`` read (cost 1) and every other method writes, costing what its
  route writes (``WRITES``).

A write's cost is the number of items it writes: the length of the list argument ``WRITES``
names for it, else 1 (a note's add, update or delete; a conversation's reset; an inspector
action). A body that does not parse, or whose list is not a list, costs 1: the route refuses
it anyway. The limiter caps a cost at the bucket's burst (``TokenBucket.take``), so the
largest legal request still passes a full bucket.
"""

from __future__ import annotations

import json
from typing import Any

from .ratelimit import Kind

__all__ = ["WRITES", "request_cost", "items_of"]

#: every write of the server, tools by name and routes as ``"METHOD /path"``, and the list
#: argument whose length is the items it writes (``None``: one item a call). A write missing
#: here still costs 1, but ``tests/tools/security/test_rate_cost.py`` fails until it is added:
#: a batch tool must not slip in at the price of one note.
WRITES: dict[str, str | None] = {
    # MCP tools (each writes or retires one note; delete_all and consolidate are one
    # transaction whose size is not known before it runs)
    "memory_add": None, "memory_update": None, "memory_delete": None,
    "memory_unsupersede": None, "memory_separate": None, "memory_delete_all": None,
    "memory_consolidate": None,
    # the hosts' conversation routes (tools.host_http)
    "POST /lcm/ingest": "messages", "POST /lcm/reset": None, "POST /lcm/new": None,
    "POST /lcm/rotate": None,
    # the inspector (tools.ui): its sessions and its note and conversation actions
    "POST /ui/login": None, "POST /ui/login-link": None, "POST /ui/logout": None,
    "POST /ui/api/unsupersede": None, "POST /ui/api/separate": None, "POST /ui/api/lcm": None,
}


def items_of(write: str, arguments: Any) -> int:
    """The items ``write`` (a tool's name or ``"METHOD /path"``) writes with ``arguments``
    (its parsed arguments or body): at least 1."""
    listed = WRITES.get(write)
    if listed is None or not isinstance(arguments, dict):
        return 1
    items = arguments.get(listed)
    return max(1, len(items)) if isinstance(items, list) else 1


def request_cost(method: str, path: str, body: bytes, *, mcp_path: str,
                 read_tools: frozenset[str]) -> tuple[Kind, int] | None:
    """``(budget, tokens)`` of one request; ``None``: it costs nothing (closing an MCP
    session frees the server). ``body`` is the request's whole body (``b""`` for a ``GET``)."""
    if path == mcp_path:
        if method == "DELETE":
            return None
        written = _mcp_writes(body, read_tools) if method == "POST" else 0
        return ("write", written) if written else ("read", 1)
    if method in ("GET", "HEAD"):
        return "read", 1
    route = f"{method} {path}"
    if WRITES.get(route) is None:  # one item a call: the body need not be read
        return "write", 1
    return "write", items_of(route, _parsed(body))


def _mcp_writes(body: bytes, read_tools: frozenset[str]) -> int:
    """The items the ``tools/call`` messages of an MCP request body write (a batch: all its
    messages'); 0 when it calls no tool that writes. Only a body naming ``tools/call`` is
    parsed; one that does not parse calls nothing (the SDK answers it with its own error)."""
    if b"tools/call" not in body:
        return 0
    parsed = _parsed(body)
    written = 0
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if name in read_tools:
            continue
        arguments = params.get("arguments") if isinstance(params, dict) else None
        written += items_of(name, arguments) if isinstance(name, str) else 1
    return written


def _parsed(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None
