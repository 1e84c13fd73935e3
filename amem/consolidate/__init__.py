"""Consolidation of the note store: merge near-duplicates, cascade links, resolve pending.

Modules: ``run`` (the store's ``Consolidator`` and ``consolidate``, whose docstring gives the
steps), ``agent`` (one agent's run), ``plan`` (clusters from pairs), ``neighbours`` (exact
pairs by matrix products), ``merge`` (survivor choice and the merge itself), ``graph`` (the
link graph), ``lineage`` (supersession chains kept apart), ``report``.
"""

from __future__ import annotations

from .plan import plan_clusters
from .report import AgentReport, ConsolidationReport
from .run import DEFAULT_THRESHOLD, Consolidator, Progress, consolidate

__all__ = ["AgentReport", "ConsolidationReport", "Consolidator", "DEFAULT_THRESHOLD",
           "Progress", "consolidate", "plan_clusters"]
