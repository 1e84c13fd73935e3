"""``python -m benchmarks``: the whole performance suite (see ``benchmarks.run_all``)."""

from __future__ import annotations

from .run_all import main

raise SystemExit(main())
