"""``amem``: the command line, a thin layer over the runtime's stores and the tool facade.

Exit codes: 0 ok, 1 error, 2 usage or invalid input, 3 not found, 4 store busy (another
process owns the embedded store), 130 interrupted, 141 stdout closed by its reader
(``amem ... | head``). ``--json`` prints machine-readable output (errors too, as
``{"error": {...}}``). Logs and progress bars go to stderr; stdout carries results only (and is
the MCP wire in ``amem serve``).

The package: ``main`` builds the parser from the command groups (``notes``, ``serve``, ``lcm``
and its ``lcm_*`` modules); they share ``common`` (options, ``tools.runtime.Runtime``) and
``output`` (printing, errors, logs), which imports nothing of ours.
"""

from __future__ import annotations

from .main import build_parser, console_main, main

__all__ = ["build_parser", "console_main", "main"]
