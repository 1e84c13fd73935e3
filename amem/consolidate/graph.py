"""The link graph of one agent's notes (networkx), used to cascade links when notes merge.

Links are directed edges ``note -> target``. The write path writes them both ways, but a store
may hold one-way links (a write killed before its back-links: ``complete`` mends them), so the
graph keeps who links to whom rather than assuming symmetry. The note's own ``links`` list stays the source of truth for order: every
rewrite keeps the first-seen order and drops repeats and self-links.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import networkx as nx

from ..notes import unique

#: ``resolve(note_id)`` -> the active note a link to ``note_id`` should point at, or None to drop it
Resolver = Callable[[str], "str | None"]


class LinkGraph:
    """Directed links between notes, with the rewrites a merge or a repair needs."""

    def __init__(self) -> None:
        self._graph: nx.DiGraph = nx.DiGraph()
        self._links: dict[str, list[str]] = {}

    @classmethod
    def from_links(cls, links: Mapping[str, Sequence[str]]) -> "LinkGraph":
        """A graph of the given sources (active notes) and their link lists."""
        graph = cls()
        for source, targets in links.items():
            graph.set_links(source, targets)
        return graph

    def __contains__(self, note_id: object) -> bool:
        return note_id in self._links

    def __len__(self) -> int:
        return len(self._links)

    def links(self, note_id: str) -> list[str]:
        """The current link list of a source note (empty for an unknown one)."""
        return list(self._links.get(note_id, ()))

    def set_links(self, source: str, targets: Iterable[str]) -> None:
        """Replace the out-links of ``source``."""
        if self._graph.has_node(source):
            self._graph.remove_edges_from(list(self._graph.out_edges(source)))
        else:
            self._graph.add_node(source)
        kept = unique(t for t in targets if t != source)
        self._links[source] = kept
        self._graph.add_edges_from((source, t) for t in kept)

    def remove(self, source: str) -> None:
        """Forget a source's out-links (it became inactive); links *to* it stay until redirected."""
        self._links.pop(source, None)
        if self._graph.has_node(source):
            self._graph.remove_edges_from(list(self._graph.out_edges(source)))

    def linkers(self, target: str) -> list[str]:
        """Sources that link to ``target``, sorted (a stable write order)."""
        if not self._graph.has_node(target):
            return []
        return sorted(s for s in self._graph.predecessors(target) if s in self._links)

    def absorbed_links(self, survivor: str, loser: str) -> list[str]:
        """The survivor's links after absorbing the loser's: union, no self, no loser."""
        merged = [*self.links(survivor), *self.links(loser)]
        return unique(t for t in merged if t not in (survivor, loser))

    def redirect(self, loser: str, survivor: str) -> dict[str, list[str]]:
        """Point every link to ``loser`` at ``survivor``; returns the changed link lists.

        The graph is updated at once; the caller writes the returned lists. A note that linked
        to both ends up with one link; the survivor's own link to the loser disappears.
        """
        changed: dict[str, list[str]] = {}
        for source in self.linkers(loser):
            if source == loser:
                continue
            new = unique(survivor if t == loser else t for t in self._links[source])
            new = [t for t in new if t != source]
            if new != self._links[source]:
                self.set_links(source, new)
                changed[source] = new
        return changed

    def repair(self, resolve: Resolver) -> dict[str, list[str]]:
        """Rewrite every link through ``resolve`` (merged -> survivor, gone -> dropped).

        Returns the changed link lists, keyed by source, in sorted order.
        """
        changed: dict[str, list[str]] = {}
        for source in sorted(self._links):
            old = self._links[source]
            new: list[str] = []
            for target in old:
                final = resolve(target)
                if final is not None and final != source and final not in new:
                    new.append(final)
            if new != old:
                self.set_links(source, new)
                changed[source] = new
        return changed

    def complete(self) -> dict[str, list[str]]:
        """Give every one-way link between two sources its other half (the target links back,
        appended last); returns the changed link lists, keyed by target, in sorted order.

        Links are written both ways (``amem.backlinks``): a one-way link between two active
        notes is one whose second write a kill lost. A link to a note that is not a source
        (inactive, unknown) is left to ``repair``.
        """
        added: dict[str, list[str]] = {}
        for source in sorted(self._links):
            for target in self._links[source]:
                if target != source and target in self._links \
                        and source not in self._links[target]:
                    added.setdefault(target, []).append(source)
        changed: dict[str, list[str]] = {}
        for target in sorted(added):
            new = unique([*self._links[target], *added[target]])
            self.set_links(target, new)
            changed[target] = new
        return changed

    def dangling(self, is_live: Callable[[str], bool]) -> list[tuple[str, str]]:
        """Every ``(source, target)`` whose target is not live, or that is a self-link."""
        return sorted((s, t) for s, targets in self._links.items() for t in targets
                      if t == s or not is_live(t))
