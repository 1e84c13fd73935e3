"""The tool registry: a tool is a name, a description for an LLM, a JSON Schema and a handler."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from .schema import check_supported

#: what every LLM API accepts as a tool name (OpenAI and Anthropic: 64 chars of this set)
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: a handler gets the call context first, then the validated arguments as keywords
Handler = Callable[..., Any]


@dataclass(frozen=True)
class Tool:
    """One tool as the model sees it, plus the function that runs it.

    ``schema`` is the JSON Schema of the arguments (an object with ``additionalProperties:
    false``); its property names are the handler's keyword parameters and its ``required``
    list is exactly the parameters without defaults (the meta-tests hold this).
    ``summary`` is the one short line lazy loading shows instead of the full schema.
    """

    name: str
    description: str
    schema: Mapping[str, Any]
    handler: Handler
    summary: str
    group: str = "memory"
    #: carried with full schema even when lazy loading is on
    core: bool = False
    #: mutates a store (hosts may ask for confirmation); ``readOnlyHint`` is its negation
    writes: bool = False
    #: MCP conventions (``tools.conventions`` fills them in by tool name): a human title,
    #: the JSON Schema of a successful result, and the hints hosts use to decide on confirmation
    title: str = ""
    output_schema: Mapping[str, Any] | None = None
    #: may delete or overwrite what a caller stored (only meaningful when ``writes``)
    destructive: bool = False
    #: a second identical call changes nothing more
    idempotent: bool = False
    #: reaches beyond the stores (the web, other services)
    open_world: bool = False
    #: seconds this call may run, from ``(facade, arguments)``, when the tool declares its own
    #: deadline (``lcm_expand_query``'s ``timeoutMs``); the server bounds it by its maximum
    deadline: Callable[[Any, Any], float | None] | None = None

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 characters of [A-Za-z0-9_-]")
        if not self.description.strip() or not self.summary.strip():
            raise ValueError(f"tool {self.name} needs a description and a summary")
        if self.schema.get("type") != "object":
            raise ValueError(f"tool {self.name}: the schema root must be an object")
        check_supported(self.schema, self.name)

    def annotations(self) -> dict[str, Any]:
        """The MCP ``ToolAnnotations`` of this tool, with wire names."""
        return {"title": self.title or self.name, "readOnlyHint": not self.writes,
                "destructiveHint": self.destructive, "idempotentHint": self.idempotent,
                "openWorldHint": self.open_world}

    def parameters(self) -> dict[str, inspect.Parameter]:
        """The handler's keyword parameters (the first one, the call context, left out)."""
        params = list(inspect.signature(self.handler).parameters.values())[1:]
        return {p.name: p for p in params}


@dataclass
class Registry:
    """An ordered set of tools, looked up by name."""

    tools: dict[str, Tool] = field(default_factory=dict)

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name} is registered twice")
        self.tools[tool.name] = tool

    def extend(self, tools: Iterable[Tool]) -> None:
        for tool in tools:
            self.add(tool)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def names(self) -> list[str]:
        return list(self.tools)


def obj(properties: Mapping[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    """An argument schema: an object with these properties and no others."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties),
                              "additionalProperties": False}
    req = list(required)
    if req:
        schema["required"] = req
    return schema
