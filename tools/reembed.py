"""``amem reembed``: rebuild every vector of an embedded store with another embedder.

The rebuild itself lives in the library (``amem.reembed``); the CLI command
(``tools.cli.notes.cmd_reembed``) builds the embedder and the progress bar around it.
"""

from __future__ import annotations

from amem.reembed import Progress, ReembedReport, reembed

__all__ = ["Progress", "ReembedReport", "reembed"]
