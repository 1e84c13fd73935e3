"""The report of a consolidation run: totals and one ``AgentReport`` per agent."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class AgentReport:
    """What consolidation did for one agent."""

    agent_id: str
    notes: int = 0
    groups: int = 0
    pairs: int = 0
    merges: int = 0
    llm_merges: int = 0
    llm_fallbacks: int = 0
    links_rewritten: int = 0
    #: one-way links between active notes given their missing half (``amem.backlinks``)
    links_completed: int = 0
    pending_resolved: int = 0
    resumed: int = 0
    duration: float = 0.0
    warnings: list[str] = field(default_factory=list)
    #: (loser, survivor) of every merge, in order
    merged: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self, *, details: bool = False) -> dict[str, Any]:
        out = asdict(self)
        out["duration"] = round(self.duration, 3)
        if not details:
            out.pop("merged")
        return out


@dataclass
class ConsolidationReport:
    """Totals and the per-agent reports of one run."""

    agents: dict[str, AgentReport]
    threshold: float
    duration: float = 0.0
    indexed_first: bool = False
    #: notes re-embedded before the run because a killed writer left their vectors stale
    vectors_refreshed: int = 0
    #: older notes the supersession sweep found replaced by a newer one (``amem.supersede``)
    superseded: int = 0
    #: older notes shown again because their mark was unsound (``amem.supersede.heal``)
    marks_released: int = 0
    #: notes past their ``expires_at`` hard-deleted by this run (``amem.purge``)
    expired_deleted: int = 0
    #: notes whose back-links a killed write owed, written before the run (``amem.backlinks``)
    links_settled: int = 0

    def _sum(self, name: str) -> int:
        return sum(int(getattr(a, name)) for a in self.agents.values())

    @property
    def groups(self) -> int:
        return self._sum("groups")

    @property
    def pairs(self) -> int:
        return self._sum("pairs")

    @property
    def merges(self) -> int:
        return self._sum("merges")

    @property
    def links_rewritten(self) -> int:
        return self._sum("links_rewritten")

    @property
    def pending_resolved(self) -> int:
        return self._sum("pending_resolved")

    @property
    def warnings(self) -> list[str]:
        return [w for a in self.agents.values() for w in a.warnings]

    def to_dict(self, *, details: bool = False) -> dict[str, Any]:
        return {
            "groups": self.groups, "pairs": self.pairs, "merges": self.merges,
            "links_rewritten": self.links_rewritten, "pending_resolved": self.pending_resolved,
            "links_completed": self._sum("links_completed"), "links_settled": self.links_settled,
            "llm_merges": self._sum("llm_merges"), "llm_fallbacks": self._sum("llm_fallbacks"),
            "resumed": self._sum("resumed"), "notes": self._sum("notes"),
            "duration": round(self.duration, 3), "threshold": self.threshold,
            "indexed_first": self.indexed_first, "vectors_refreshed": self.vectors_refreshed,
            "superseded": self.superseded, "marks_released": self.marks_released,
            "expired_deleted": self.expired_deleted,
            "warnings": self.warnings,
            "per_agent": {k: v.to_dict(details=details) for k, v in self.agents.items()},
        }
