"""``ToolFacade``: every agent-facing tool behind one ``call(name, arguments) -> dict``.

The facade owns three promises the hosts rely on:

* **Validation first.** Arguments are checked against the tool's JSON Schema (``tools.schema``)
  and a size limit before a handler runs; a handler only ever sees well-typed keywords.
* **Structured errors only.** Every failure returns ``{"error": {"code", "message", "field"}}``
  (see ``tools.errors``); an unexpected exception is logged with its traceback and returned
  as code ``internal``, so a host never receives a traceback. Messages leave without server
  paths (``tools.errors.redact``); the log keeps them.
* **Identity from the connection.** The agent id is fixed when the facade is built (by the
  host, the CLI or the MCP connection). No tool has an ``agent_id`` argument, so a caller
  cannot read, change or count another agent's notes whatever it sends.
"""

from __future__ import annotations

import json
import logging
import math
import os
from typing import TYPE_CHECKING, Any, Mapping

from amem.kernel import safejson
from amem.kernel.errors import InvalidArgumentError

from .context import CallContext
from .conventions import apply as with_conventions
from .errors import CALLER_CODES, ToolError, error_result, redact
from .lcm_tools import lcm_tools
from .memory_tools import memory_tools
from .registry import Registry, Tool, obj
from .schema import validate
from .tenancy import session_key_for, session_owner

if TYPE_CHECKING:
    from amem import MemoryStore
    from lcm import LcmStore

log = logging.getLogger(__name__)

#: largest arguments object accepted, in bytes of UTF-8 JSON (a note of 32k characters of CJK
#: text is ~96 kB; anything beyond this is a runaway or hostile payload)
MAX_PAYLOAD_BYTES = 256 * 1024
#: the tools that keep their full schema when lazy loading is on
CORE_TOOLS = ("memory_search", "memory_add", "lcm_grep", "tool_info")
LAZY_ENV = "AMEM_LAZY_TOOLS"
#: the argument schema a lazily listed tool shows: any object (the facade still validates
#: every call against the full schema, which ``tool_info`` serves)
LAZY_INPUT_SCHEMA: dict[str, Any] = {"type": "object"}


def lazy_from_env(env: Mapping[str, str]) -> bool:
    """``AMEM_LAZY_TOOLS`` as a boolean (unset = off); a bad value is a clear error."""
    raw = env.get(LAZY_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{LAZY_ENV} must be 1/0 or true/false, got {raw!r}")


class ToolFacade:
    """The registry of ``memory_*``, ``lcm_*`` and ``tool_info`` tools, bound to one agent.

    Args:
        memory: The note store (``None`` only for a listing-only facade).
        lcm: The conversation store (``lcm.LcmStore``), or ``None``: the ``lcm_*`` tools are
            then not listed and calling one returns an ``unavailable`` error.
        agent_id: The identity every call runs as.
        lazy: List only the core tools with full schemas; the rest are named in one line
            of ``tool_info``'s description and loaded through it.
        max_payload_bytes: Largest accepted arguments object (JSON, UTF-8).
        session_key: The lcm session family the ``lcm_*`` tools search; it must be one of
            ``agent_id``'s own (``agent:<agent>:...``, see ``tools.tenancy``). ``None``
            means the agent's default family ``agent:<agent>:main``.
        lcm_listed: List the ``lcm_*`` tools even without a store (``amem tools`` prints the
            full catalogue); by default they are listed only when ``lcm`` is given.
        descriptions: Tool descriptions to use instead of ours, by tool name (a host's own
            wording; see ``tools.descriptions``). An unknown name is a ``ValueError``.
        read_only: The caller may change nothing (a read-only key): the tools that write
            answer ``forbidden``, and the reading ones record no usage on the notes they show
            (no retrieval count, no usage heat), which would change their ranking.

    Raises:
        ToolError: ``forbidden`` when ``session_key`` belongs to another agent (or to none),
            ``invalid_argument`` when it is malformed.
    """

    def __init__(self, memory: "MemoryStore | None", lcm: "LcmStore | None" = None, *, agent_id: str,
                 lazy: bool = False, max_payload_bytes: int = MAX_PAYLOAD_BYTES,
                 session_key: str | None = None, lcm_listed: bool | None = None,
                 descriptions: Mapping[str, str] | None = None, read_only: bool = False) -> None:
        from amem.notes import check_agent

        if max_payload_bytes < 1024:
            raise ValueError("max_payload_bytes must be at least 1024")
        self.memory = memory
        self.lcm = lcm
        self.agent_id = check_agent(agent_id)
        self.lazy = lazy
        self.read_only = read_only
        #: the lcm session family the lcm_* tools read: always one of this agent's own
        self.session_key = session_key_for(self.agent_id, session_key)
        self.max_payload_bytes = max_payload_bytes
        self.lcm_listed = lcm is not None if lcm_listed is None else lcm_listed
        self.registry = Registry()
        self.registry.extend(with_conventions(t) for t in catalogue())
        self.descriptions = dict(descriptions or {})
        for tool_name, text in self.descriptions.items():
            if self.registry.get(tool_name) is None:
                raise ValueError(f"descriptions: no tool named {tool_name!r}")
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"descriptions.{tool_name} must be a non-empty string")
        self._roots = _data_roots(memory, lcm)

    def for_agent(self, agent_id: str, session_key: str | None = None, *,
                  read_only: bool | None = None) -> "ToolFacade":
        """The same stores and settings, acting as another agent (one per MCP connection).

        Without ``session_key`` the new agent reads its own default family; this facade's
        family carries over only when it is that agent's own (the same agent re-bound).
        ``read_only`` narrows the view (``None`` keeps this facade's; a read-only facade
        never widens).
        """
        if session_key is None and session_owner(self.session_key) == agent_id:
            session_key = self.session_key
        return ToolFacade(self.memory, self.lcm, agent_id=agent_id, lazy=self.lazy,
                          max_payload_bytes=self.max_payload_bytes, session_key=session_key,
                          lcm_listed=self.lcm_listed, descriptions=self.descriptions,
                          read_only=self.read_only or bool(read_only))

    # ------------------------------------------------------------------ listing

    def available(self) -> list[Tool]:
        """Every tool this facade can run (``lcm_*`` only with an lcm store, no tool that
        writes when read-only: a model shown one would only be refused)."""
        return [t for t in self.registry if (t.group != "lcm" or self.lcm_listed)
                and not (self.read_only and t.writes)]

    def listed(self) -> list[Tool]:
        """The tools shown to the model: every available one, lazy or not.

        Lazy loading shortens the listing, it never hides a tool: hosts that allow only
        listed tools would block a hidden one, and clients validate structured results only
        of listed tools (the SDK warns for the others).
        """
        return self.available()

    def list_tools(self) -> list[dict[str, Any]]:
        """Neutral tool definitions ``{name, description, input_schema}`` (see ``tools.export``);
        when lazy, the tools outside ``CORE_TOOLS`` come short (``definition``)."""
        return [self.definition(t, full=not self.lazy or t.name in CORE_TOOLS)
                for t in self.listed()]

    def description(self, tool: Tool) -> str:
        """The tool's description: the configured override, or ours."""
        return self.descriptions.get(tool.name, tool.description)

    def definition(self, tool: Tool, *, full: bool = True) -> dict[str, Any]:
        """``{name, description, input_schema}``; ``full=False`` gives the lazy listing's
        short form: the summary, a pointer to ``tool_info`` and any-object arguments."""
        if not full:
            return {"name": tool.name, "input_schema": dict(LAZY_INPUT_SCHEMA),
                    "description": f"{tool.summary[0].upper()}{tool.summary[1:]}. Call "
                    f"tool_info with query {tool.name!r} for its arguments before using it."}
        description = self.description(tool)
        if tool.name == "tool_info" and self.lazy:
            description += (" Tools listed with a one-line description take arguments shown "
                            "only here.")
        return {"name": tool.name, "description": description, "input_schema": dict(tool.schema)}

    # ------------------------------------------------------------------ calling

    def call(self, name: Any, arguments: Any = None) -> dict[str, Any]:
        """Run one tool as this facade's agent; always a JSON-able dict, never an exception."""
        try:
            tool, args = self._prepare(name, arguments)
            ctx = CallContext(self.memory, self.lcm, self.agent_id, self, self.read_only)
            result = tool.handler(ctx, **args)
            return result if isinstance(result, dict) else {"result": result}
        except ToolError as exc:
            return self._error(exc.code, exc.message, exc.field)
        except Exception as exc:  # the one place every failure becomes a structured error
            code = getattr(exc, "code", None)
            if isinstance(code, str) and _is_ours(exc):
                if code not in CALLER_CODES:  # the store's trouble, not the caller's: log it
                    log.warning("tool %s failed: %s: %s", name, code, exc)
                return self._error(code, str(exc), getattr(exc, "field", None))
            log.exception("tool %s failed unexpectedly", name)
            return error_result("internal", f"{str(name)[:80]} failed unexpectedly "
                                f"({type(exc).__name__}); the server log has the details")

    def _error(self, code: str, message: str, field: str | None) -> dict[str, Any]:
        # Messages may quote a store's location (a locked store, a missing file); the caller
        # gets them without paths, the log above keeps them whole.
        return error_result(code, redact(message, self._roots), field)

    def _prepare(self, name: Any, arguments: Any) -> tuple[Tool, dict[str, Any]]:
        if not isinstance(name, str):
            raise ToolError("unknown_tool", "the tool name must be a string", field="name")
        tool = self.registry.get(name)
        if tool is None:
            raise ToolError("unknown_tool", f"no tool named {name[:80]!r}; available: "
                            f"{', '.join(t.name for t in self.available())}", field="name")
        if tool.group != "lcm" and tool.group != "meta" and self.memory is None:
            raise ToolError("unavailable", f"{name} needs the note store, which this facade "
                            "was built without (a listing-only facade)")
        if tool.group == "lcm" and self.lcm is None:
            raise ToolError("unavailable", f"{name} needs the conversation store (lcm), which "
                            "this server was started without")
        if self.read_only and tool.writes:
            raise ToolError("forbidden", f"this key is read-only and {name} changes the "
                            "store; use a key issued without --read-only", field="name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError("invalid_argument", "arguments must be a JSON object", field="arguments")
        try:  # deep nesting and lone surrogates: one rule (amem.kernel.safejson), before dumps
            safejson.check_text(arguments, root="arguments")  # would recurse on a deep value
        except InvalidArgumentError as exc:
            raise ToolError("invalid_argument", str(exc), field=exc.field) from None
        try:
            size = len(json.dumps(arguments, allow_nan=False, ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise ToolError("invalid_argument", f"arguments are not valid JSON: {exc}",
                            field="arguments") from None
        if size > self.max_payload_bytes:
            raise ToolError("payload_too_large", f"arguments are {size} bytes; the limit is "
                            f"{self.max_payload_bytes}", field="arguments")
        validate(arguments, tool.schema)
        props = tool.schema.get("properties", {})
        # JSON Schema counts 5.0 as an integer; handlers get a real int.
        return tool, {k: (int(v) if props[k].get("type") == "integer" and isinstance(v, float)
                          and math.isfinite(v) else v) for k, v in arguments.items()}


def catalogue() -> list[Tool]:
    """Every tool, in listing order, before conventions and overrides."""
    return [*memory_tools(), *lcm_tools(), _tool_info_tool()]


def _data_roots(memory: Any, lcm: Any) -> tuple[str, ...]:
    """The directories the stores keep data in, as written and as resolved (to redact)."""
    found: list[str] = []
    config, lcm_config, files = _attr(memory, "config"), _attr(lcm, "config"), _attr(lcm, "files")
    for value in (_attr(memory, "location"), _attr(config, "home"),
                  _attr(lcm_config, "database_path"), _attr(lcm_config, "large_files_dir"),
                  _attr(files, "base_dir")):
        if not value or not os.path.isabs(os.path.expanduser(str(value))):
            continue  # ":memory:", a server URL, an unset option
        path = os.path.expanduser(str(value))
        found += [path, os.path.realpath(path)]
    return tuple(dict.fromkeys(found))


def _attr(obj: Any, name: str) -> Any:
    # A broken store must still get a facade that reports its failures (as ``internal``).
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _is_ours(exc: Exception) -> bool:
    """An error raised on purpose by amem or lcm (it carries a code meant for callers)."""
    from amem.kernel.errors import MemoryToolError

    return isinstance(exc, MemoryToolError)


# ---------------------------------------------------------------------- tool_info


def tool_info(ctx: CallContext, query: str, maxResults: int = 5) -> dict[str, Any]:
    facade = ctx.facade
    tools = facade.available()
    exact = [t for t in tools if t.name == query.strip()]
    if exact:
        return {"matched_by": "name", "tools": [facade.definition(exact[0])]}
    words = [w for w in query.lower().replace("_", " ").split() if len(w) > 1]
    scored = []
    for tool in tools:
        text = f"{tool.name.replace('_', ' ')} {tool.summary} {tool.description}".lower()
        score = sum(3 if w in tool.name else 1 for w in words if w in text)
        if score:
            scored.append((score, tool.name, tool))
    scored.sort(key=lambda x: (-x[0], x[1]))
    # Words shared by every tool ("memory") would return everything: keep the clear winners.
    best = scored[0][0] if scored else 0
    kept = [t for score, _, t in scored if score * 2 >= best][:maxResults]
    return {"matched_by": "keyword", "tools": [facade.definition(t) for t in kept]}


def _tool_info_tool() -> Tool:
    return Tool(
        name="tool_info", handler=tool_info, core=True, group="meta",
        summary="full schemas of other tools",
        description=(
            "Get the full definition (description and argument schema) of a tool by its exact "
            "name, or find tools by keywords. Call it before using a tool listed with only a "
            "one-line description. Returns {matched_by: name|keyword, tools: [{name, description, input_schema}]}."),
        schema=obj({
            "query": {"type": "string", "minLength": 1, "maxLength": 200,
                      "description": "A tool name, or keywords describing what you need."},
            "maxResults": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5,
                           "description": "How many tools to return for a keyword search."},
        }, required=["query"]))
