"""The settings of one process: the TOML file read once, each table handed to its owner.

    load_settings(config_path, env=..., **overrides) -> Settings
        .amem       AmemConfig      (the ``[amem]`` table, or the file's top level)
        .lcm        LcmConfig       (the ``[lcm]`` table)
        .llm        LLMConfig|None  (the note store's ``llm_*`` keys; None = offline)
        .scheduler  SchedulerConfig (``schedule_*`` keys)
        .tools      the ``[tools]`` table as written (``tools.conventions`` reads its descriptions)
        .serve      RateLimits      (the ``[serve]`` table: ``amem serve --http``'s request budgets)
        .config_path                the file read (``--config`` or ``AMEM_CONFIG``), or None

Precedence for every section: defaults < TOML < environment < ``overrides``. This is the
composition root's half of configuration: the packages' loaders each know only their own keys;
this module knows which of them share the file and the ``AMEM_*`` namespace, and the variables
only the command line and the servers read (``TOOL_ENV``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amem import config as amem_config
from amem.config import AmemConfig
from amem.errors import ConfigError
from amem.kernel.settings import ARGUMENTS, Unclaimed, did_you_mean, read_toml
from lcm import config as lcm_config
from lcm.config import LcmConfig
from scheduler import config as scheduler_config
from scheduler.config import SchedulerConfig

from . import ratelimit
from .ratelimit import RateLimits

if TYPE_CHECKING:  # the LLM client's package (httpx) loads only when an endpoint is configured
    from amem.llm.config import LLMConfig

__all__ = ["Settings", "load_settings", "TOOL_ENV", "TOOL_ENV_PREFIXES"]

#: ``AMEM_*`` variables the command line and the servers read themselves (not config keys)
TOOL_ENV = frozenset({"AMEM_CONFIG", "AMEM_AGENT", "AMEM_LAZY_TOOLS", "AMEM_LOG_LEVEL",
                      "AMEM_LCM_URL", "AMEM_SERVER_TOKEN"})
#: prefixes of ``AMEM_*`` variables read elsewhere: tool descriptions (``tools.conventions``)
#: and the test suite's servers
TOOL_ENV_PREFIXES = ("AMEM_TOOL_DESCRIPTION_", "AMEM_TEST_")


@dataclass(frozen=True)
class Settings:
    """Every section's config, resolved once for one process."""

    amem: AmemConfig
    lcm: LcmConfig
    llm: LLMConfig | None
    scheduler: SchedulerConfig
    #: the TOML file these settings read, or None
    config_path: Path | None = None
    #: the file's ``[tools]`` table (tool descriptions), so that nothing reads the file again
    tools: Mapping[str, Any] = field(default_factory=dict)
    #: the tool descriptions a deployment words itself, by tool name: ``[tools.descriptions]``
    #: and ``AMEM_TOOL_DESCRIPTION_*`` (checked against the catalogue at load)
    descriptions: Mapping[str, str] = field(default_factory=dict)
    #: the embedder was named (file, ``AMEM_EMBEDDER`` or an argument); when it was not, the
    #: runtime opens an existing store with the embedder that wrote it
    embedder_chosen: bool = False
    #: the request budgets of ``amem serve --http`` (``[serve]``, ``AMEM_SERVE_*``)
    serve: RateLimits = field(default_factory=RateLimits)


def load_settings(config_path: Path | None = None, *, env: Mapping[str, str] | None = None,
                  **overrides: Any) -> Settings:
    """Read the config file once and build every section from it, the environment and ``overrides``.

    Args:
        config_path: the TOML file; None means ``$AMEM_CONFIG`` (unset: no file).
        env: the environment to read; None means ``os.environ`` (this is the process's entry).
        overrides: explicit values by key (``home=...``, ``schedule_timezone=...``,
            ``freshTailCount=...``), each handed to the section that owns the key; None values
            are skipped (an unset command-line flag).

    Raises:
        ConfigError: a bad key or value anywhere; ``.key`` names it. A key of the note
            store's table or an ``AMEM_*`` variable that no section and no tool takes is one.
    """
    env = dict(os.environ if env is None else env)
    path = Path(config_path) if config_path is not None else (
        Path(env["AMEM_CONFIG"]) if env.get("AMEM_CONFIG") else None)
    doc = read_toml(path, ConfigError) if path is not None else None
    source = str(path.expanduser()) if path is not None else None
    if doc is not None:
        _check_layout(doc, source)
    # the note store's table ([amem] or the top level) is shared with the scheduler's keys
    shared = amem_config.amem_table(doc) if doc is not None else None
    lcm_table = doc.get("lcm") if doc is not None and isinstance(doc.get("lcm"), Mapping) else None
    serve_table = doc.get("serve") if doc is not None and isinstance(doc.get("serve"), Mapping) else None
    by_owner = _route({k: v for k, v in overrides.items() if v is not None})

    left_by_amem: list[Unclaimed] = []
    left_by_scheduler: list[Unclaimed] = []
    amem = amem_config.load_config(source, env=env, overrides=by_owner["amem"], table=shared,
                                   unclaimed=left_by_amem)
    scheduler = scheduler_config.load_config(source, env=env, overrides=by_owner["scheduler"],
                                             home=amem.home, table=shared,
                                             unclaimed=left_by_scheduler)
    _reject_unowned(left_by_amem, left_by_scheduler)
    # the file is named only when it has an [lcm] table (given as read: no second parse)
    lcm = lcm_config.load_config(source if lcm_table is not None else None, env=env,
                                 overrides=by_owner["lcm"], table=lcm_table)
    llm = None
    if amem.llm_base_url:
        from amem.llm.config import LLMConfig

        llm = LLMConfig.from_amem(amem)
    serve = _load_serve(serve_table, source, env, by_owner["serve"])
    tools = doc.get("tools") if doc is not None else None
    if tools is not None and not isinstance(tools, Mapping):
        raise ConfigError("tools must be a table ([tools])", key="tools", source=source)
    return Settings(amem=amem, lcm=lcm, llm=llm, scheduler=scheduler, config_path=path,
                    tools=dict(tools or {}), descriptions=_descriptions(env, tools or {}),
                    embedder_chosen=_chosen("embedder", shared or {}, env, by_owner["amem"]),
                    serve=serve)


def _load_serve(table: Mapping[str, Any] | None, source: str | None, env: Mapping[str, str],
                overrides: Mapping[str, Any]) -> RateLimits:
    """The ``[serve]`` table over its defaults, ``AMEM_SERVE_*`` over it, then ``overrides``;
    a key or variable it does not know is an error with the nearest spelling (the table and
    the prefix are its own: no neighbour shares them)."""
    section = ratelimit.SECTION
    tables = [(table, f"{source} [serve]")] if table is not None else []
    loaded = section.load(tables=tables, env=env, overrides=overrides)
    for item in loaded.unclaimed:
        raise section.unknown(item)
    return section.build(loaded.values)


#: the tables a config file may hold; the note store's and the scheduler's keys are the
#: top level's or ``[amem]``'s
TABLES = ("amem", "lcm", "tools", "serve")


def _check_layout(doc: Mapping[str, Any], source: str | None) -> None:
    """Refuse what the file holds that nothing would read: a table no section owns
    (``[scheduler]``, a misspelt ``[lcmm]``) and top-level keys beside an ``[amem]`` table
    (the table is read then, not the top level). Both were dropped unsaid: a
    ``[scheduler] schedule_hour = 5`` left the job at 02:30."""
    for key, value in doc.items():
        if isinstance(value, Mapping) and key not in TABLES:
            hint = (" (the scheduler's keys, schedule_hour and the like, go in [amem] or at the "
                    "top level)" if key == "scheduler" else "")
            raise ConfigError(f"unknown table [{key}]; a config file holds {', '.join(f'[{t}]' for t in TABLES)}"
                              f"{hint}", key=key, source=source)
    if isinstance(doc.get("amem"), Mapping):
        loose = sorted(k for k, v in doc.items() if not isinstance(v, Mapping))
        if loose:
            raise ConfigError(f"{', '.join(loose)} at the top level beside an [amem] table: with "
                              "[amem] only its keys are read; move them into [amem]",
                              key=loose[0], source=source)


def _chosen(attr: str, table: Mapping[str, Any], env: Mapping[str, str],
            overrides: Mapping[str, Any]) -> bool:
    """Whether the note store's setting ``attr`` was given (in any of its spellings) rather
    than left at its default."""
    spec = amem_config.SECTION.by_attr[attr]
    return (any(amem_config.SECTION.spec(k) is spec for k in (*table, *overrides))
            or any(var in env for var in (spec.env, *spec.env_aliases) if var))


def _descriptions(env: Mapping[str, str], tools: Mapping[str, Any]) -> dict[str, str]:
    """The tool description overrides, an unknown tool refused here so that every command
    refuses it (not only ``amem serve``, the one that shows them to a model)."""
    from .conventions import DESCRIPTION_ENV, description_overrides

    if "descriptions" not in tools and not any(v.startswith(DESCRIPTION_ENV) for v in env):
        return {}  # nothing to check: the tool catalogue is not imported
    from .facade import catalogue

    return description_overrides(env, tools, names=[t.name for t in catalogue()])


def _route(overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each explicit value to the section that owns its key (the note store first)."""
    out: dict[str, dict[str, Any]] = {"amem": {}, "scheduler": {}, "lcm": {}, "serve": {}}
    for key, value in overrides.items():
        if amem_config.SECTION.spec(key) is not None:
            out["amem"][key] = value
        elif scheduler_config.SECTION.spec(key) is not None:
            out["scheduler"][key] = value
        elif lcm_config.SECTION.spec(key) is not None:
            out["lcm"][key] = value
        elif ratelimit.SECTION.spec(key) is not None:
            out["serve"][key] = value
        else:
            raise ConfigError(f"unknown config key {key!r} (from {ARGUMENTS})", key=key, source=ARGUMENTS)
    return out


def _reject_unowned(left_by_amem: list[Unclaimed], left_by_scheduler: list[Unclaimed]) -> None:
    """A file key or ``AMEM_*`` variable neither the note store nor the scheduler takes, and no
    tool reads, is a typo: say so (exit 2 at startup) rather than run without it."""
    scheduler_keys = {item.name for item in left_by_scheduler if not item.is_env}
    for item in left_by_amem:
        if not item.is_env:
            if item.name in scheduler_keys:  # neither owner took it
                raise amem_config.SECTION.unknown(item, also=scheduler_config.SECTION.specs)
        elif (item.name not in scheduler_config.SECTION.env_names and item.name not in TOOL_ENV
              and not item.name.startswith(TOOL_ENV_PREFIXES)
              and not item.name.startswith(ratelimit.SECTION.env_prefix or "")):
            # AMEM_SERVE_* belong to the [serve] section, which judges its own
            name = item.name[len(amem_config.ENV_PREFIX):].lower()
            hint = did_you_mean(item.name, [*amem_config.SECTION.env_names, *TOOL_ENV,
                                            *scheduler_config.SECTION.env_names])
            raise ConfigError(f"unknown config key {name!r} (from {item.source}){hint}", key=name,
                              source=item.source)
