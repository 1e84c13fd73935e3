"""The settings of one process: the TOML file read once, each table handed to its owner.

    load_settings(config_path, env=..., **overrides) -> Settings
        .amem       AmemConfig      (the ``[amem]`` table, or the file's top level)
        .lcm        LcmConfig       (the ``[lcm]`` table)
        .llm        LLMConfig|None  (the note store's ``llm_*`` keys; None = offline)
        .scheduler  SchedulerConfig (``schedule_*`` keys)
        .config_path                the file read (``--config`` or ``AMEM_CONFIG``), or None

Precedence for every section: defaults < TOML < environment < ``overrides``. This is the
composition root's half of configuration: the packages' loaders each know only their own keys;
this module knows which of them share the file and the ``AMEM_*`` namespace, and the variables
only the command line and the servers read (``TOOL_ENV``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amem.config import AmemConfig
from amem.config import load_config as load_amem
from amem.errors import ConfigError
from amem.llm.config import LLMConfig
from lcm.config import LcmConfig
from lcm.config import load_config as load_lcm
from scheduler.config import SchedulerConfig

__all__ = ["Settings", "load_settings", "TOOL_ENV"]

#: ``AMEM_*`` variables the command line and the servers read themselves (not config keys)
TOOL_ENV = frozenset({"AMEM_CONFIG", "AMEM_AGENT", "AMEM_LAZY_TOOLS", "AMEM_LOG_LEVEL",
                      "AMEM_LCM_URL", "AMEM_SERVER_TOKEN"})


@dataclass(frozen=True)
class Settings:
    """Every section's config, resolved once for one process."""

    amem: AmemConfig
    lcm: LcmConfig
    llm: LLMConfig | None
    scheduler: SchedulerConfig
    #: the TOML file these settings read, or None
    config_path: Path | None = None


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
        ConfigError: a bad key or value anywhere; ``.key`` names it.
    """
    env = dict(os.environ if env is None else env)
    path = Path(config_path) if config_path is not None else (
        Path(env["AMEM_CONFIG"]) if env.get("AMEM_CONFIG") else None)
    given = {k: v for k, v in overrides.items() if v is not None}
    amem = load_amem(path, env=env, overrides=given)
    lcm = load_lcm(_lcm_table_path(path), env=env)
    scheduler = SchedulerConfig.from_amem(amem)
    return Settings(amem=amem, lcm=lcm, llm=_llm(amem), scheduler=scheduler, config_path=path)


def _llm(cfg: AmemConfig) -> LLMConfig | None:
    if not cfg.llm_base_url:
        return None
    from amem.llm.config import PLACEHOLDER_API_KEY

    return LLMConfig(base_url=cfg.llm_base_url, model=cfg.llm_model,
                     api_key=cfg.llm_api_key or PLACEHOLDER_API_KEY,
                     connect_timeout=cfg.llm_connect_timeout, read_timeout=cfg.llm_read_timeout,
                     deadline=cfg.llm_deadline_s, max_reply_bytes=cfg.llm_max_reply_bytes)


def _lcm_table_path(path: Path | None) -> Path | None:
    """The file for lcm only if it has an ``[lcm]`` table (its top level is amem's)."""
    if path is None:
        return None
    import tomllib

    try:
        doc = tomllib.loads(path.expanduser().read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        raise ConfigError(f"config file {path} cannot be read", key="config") from None
    return path if isinstance(doc.get("lcm"), dict) else None
