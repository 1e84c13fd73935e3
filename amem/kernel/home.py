"""Where amem's data directory (its home) is: the one rule the note store's settings and the
conversation store's default location both read. It sits in the kernel because ``lcm`` uses
only amem's kernel (tests/test_import_graph.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping


def default_home(env: Mapping[str, str]) -> Path:
    """``$AMEM_HOME``, else ``$XDG_DATA_HOME/amem``, else ``~/.local/share/amem``."""
    if env.get("AMEM_HOME"):
        return Path(env["AMEM_HOME"]).expanduser()
    xdg = env.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "amem"


def configured_home(doc: Mapping[str, Any] | None, env: Mapping[str, str]) -> Path:
    """The home ``amem.config.load_config`` settles on for a parsed config file ``doc`` (or
    none) and ``env``: ``$AMEM_HOME`` (the environment wins over the file), else the file's
    ``home`` (its ``[amem]`` table, else its top level), else :func:`default_home`."""
    if env.get("AMEM_HOME"):
        return Path(env["AMEM_HOME"]).expanduser()
    table = doc.get("amem") if doc is not None and isinstance(doc.get("amem"), Mapping) else doc
    value = table.get("home") if table is not None else None
    if isinstance(value, str) and value.strip():
        return Path(value).expanduser()
    return default_home(env)
