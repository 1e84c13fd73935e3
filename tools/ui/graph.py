"""The inspector's graph: notes and their links as a server-drawn SVG.

Three ways in: the neighbourhood of a note (links both ways, two hops), the notes of a subject,
or a search's results with what they link to. At most ``MAX_NODES`` notes, read in pages.

The layout is deterministic and linear-time so that a few hundred nodes draw in milliseconds
and stay readable: the notes are grouped (by hop from the centre, or by their consolidation
cluster: a note that absorbed others in ``consolidate_merge`` and those it absorbed share a
group), each group is an arc of one ring, and a node's label is its ``<title>`` (shown on
hover and read by screen readers) with the full text one click away. Merged clusters are
outlined; each state (``tools.ui.states``) has its own look, which the legend names.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from amem.backends.base import Match, MatchAny, Where
from amem.notefields import SUBJECT_KEYS, subject_key
from amem.notes import Note, point_id

from .html import Html, attr, esc, link, url
from .states import KINDS, state_of

if TYPE_CHECKING:
    from amem import MemoryStore

MAX_NODES = 300
#: the time of a picture drawn without one: nothing has expired yet
_NEVER = datetime.max.replace(tzinfo=timezone.utc)
SIZE = 900
_PALETTE = ("#1f5fa8", "#a8321f", "#2a7a2a", "#7a2a7a", "#8a6100", "#006d75", "#5a5a5a", "#b0306b")


@dataclass
class Graph:
    """Nodes (notes by id), their group, and the links between them."""

    nodes: dict[str, Note] = field(default_factory=dict)
    group: dict[str, int] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    truncated: bool = False

    def add(self, note: Note, group: int) -> bool:
        if note.id in self.nodes:
            return True
        if len(self.nodes) >= MAX_NODES:
            self.truncated = True
            return False
        self.nodes[note.id] = note
        self.group[note.id] = group
        return True

    def link_all(self) -> None:
        """Draw every link between two notes on the picture (both directions read as one)."""
        for note in self.nodes.values():
            for target in note.links:
                if target in self.nodes and target != note.id:
                    self.edges.add(tuple(sorted((note.id, target))))  # type: ignore[arg-type]


def _fetch(store: MemoryStore, agent: str, ids: list[str]) -> list[Note]:
    hits = store.index.backend.retrieve([point_id(agent, i) for i in ids[:MAX_NODES]])
    return [Note.from_payload(h.payload) for h in hits
            if h.payload.get("agent_id") == agent and h.payload.get("is_active")]


def _linking_to(store: MemoryStore, agent: str, ids: list[str]) -> list[Note]:
    if not ids:
        return []
    where = Where(must=(Match("agent_id", agent), Match("is_active", True),
                        MatchAny("links", tuple(ids[:MAX_NODES]))))
    hits, _ = store.index.backend.scroll(where, limit=MAX_NODES, offset=None)
    return [Note.from_payload(h.payload) for h in hits]


def neighbourhood(store: MemoryStore, agent: str, note_id: str, hops: int = 2) -> Graph:
    """``note_id`` and the notes within ``hops`` links of it, either direction."""
    centre, _ = store.index.load(note_id, agent, include_inactive=True)
    graph = Graph()
    graph.add(centre, 0)
    frontier = [centre]
    for hop in range(1, hops + 1):
        out_ids = [t for n in frontier for t in n.links if t not in graph.nodes]
        found = _fetch(store, agent, list(dict.fromkeys(out_ids)))
        found += _linking_to(store, agent, [n.id for n in frontier])
        nxt = []
        for note in found:
            if note.id not in graph.nodes and graph.add(note, hop):
                nxt.append(note)
        frontier = nxt
        if not frontier:
            break
    graph.link_all()
    return graph


def by_subject(store: MemoryStore, agent: str, subject: str) -> Graph:
    """The notes naming ``subject``, grouped by consolidation cluster."""
    where = Where(must=(Match("agent_id", agent), Match("is_active", True),
                        Match(SUBJECT_KEYS, subject_key(subject))))  # any spelling
    hits, _ = store.index.backend.scroll(where, limit=MAX_NODES + 1, offset=None)
    graph = Graph()
    notes = [Note.from_payload(h.payload) for h in hits]
    for note in notes:
        graph.add(note, 0)
    _cluster_groups(graph)
    graph.link_all()
    return graph


def from_search(store: MemoryStore, agent: str, query: str) -> Graph:
    """A search's results (group 0) and the notes they link to (group 1)."""
    results = store.search(query, limit=20, agent_id=agent, expand_links=False,
                           record_usage=False)  # drawing the results is no use of them
    graph = Graph()
    for note in _fetch(store, agent, [r.id for r in results]):
        graph.add(note, 0)
    linked = [t for n in list(graph.nodes.values()) for t in n.links if t not in graph.nodes]
    for note in _fetch(store, agent, list(dict.fromkeys(linked))):
        graph.add(note, 1)
    graph.link_all()
    return graph


def absorbed(note: Note) -> list[str]:
    """The notes consolidation merged into ``note`` (its ``consolidate_merge`` entries)."""
    return [str(e["merged"]) for e in note.evolution_history
            if e.get("action") == "consolidate_merge" and e.get("merged")]


def _cluster_groups(graph: Graph) -> None:
    """One group (one arc, one colour) per consolidation cluster: a merge survivor with the
    notes it links to on the picture (what it absorbed is inactive and not drawn, but counted
    on the survivor); notes outside any cluster keep group 0."""
    cluster = 1
    for note in list(graph.nodes.values()):
        if absorbed(note) and graph.group[note.id] == 0:
            graph.group[note.id] = cluster
            for other in note.links:
                if other in graph.nodes and graph.group[other] == 0:
                    graph.group[other] = cluster
            cluster += 1


def layout(graph: Graph) -> dict[str, tuple[float, float]]:
    """Positions: group 0 in the centre (one node) or its own ring, each further group an arc
    of the outer rings, nodes spread evenly so that labels do not pile up."""
    centre = SIZE / 2
    groups: dict[int, list[str]] = {}
    for node_id in sorted(graph.nodes, key=lambda i: (graph.group[i], i)):
        groups.setdefault(graph.group[node_id], []).append(node_id)
    pos: dict[str, tuple[float, float]] = {}
    ordered = sorted(groups)
    rings = max(1, len(ordered))
    for ring, g in enumerate(ordered):
        members = groups[g]
        if ring == 0 and len(members) == 1:
            pos[members[0]] = (centre, centre)
            continue
        # the outer ring leaves room for the labels
        radius = 60 + (centre - 190) * (ring + 1) / rings
        for i, node_id in enumerate(members):
            angle = 2 * math.pi * i / len(members) + ring * 0.35
            pos[node_id] = (centre + radius * math.cos(angle), centre + radius * math.sin(angle))
    return pos


#: how each state is drawn: (fill, stroke, dashes); None: the node's group colour
_LOOK: dict[str, tuple[str | None, str | None, str]] = {
    "current": (None, None, ""),
    "partly superseded": (None, "#111111", "4 2"),
    "superseded": ("#ffffff", None, ""),
    "expired": ("#ffffff", "#5a5a5a", "2 2"),
    "merged": ("#c8c8c8", "#5a5a5a", ""),
    "deleted": ("#c8c8c8", "#5a5a5a", "1 2"),
}
_LEGEND_WORDS = {"current": "current (filled)",
                 "partly superseded": "partly superseded (filled, dashed dark outline)",
                 "superseded": "superseded (hollow)", "expired": "expired (hollow, dotted grey)",
                 "merged": "merged away (grey)", "deleted": "deleted (grey, dotted)"}


def legend() -> Html:
    """What each look means, each with its own small circle."""
    items = []
    for kind in KINDS:
        fill, stroke, dash = _LOOK[kind]
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        items.append(f'<li data-state="{attr(kind)}"><svg width="22" height="22" aria-hidden="true">'
                     f'<circle cx="11" cy="11" r="8" fill="{fill or _PALETTE[0]}" '
                     f'stroke="{stroke or _PALETTE[0]}" stroke-width="2"{dashes}/></svg> '
                     f"{esc(_LEGEND_WORDS[kind])}</li>")
    return Html(f'<ul class="legend" id="graph-legend" aria-label="What the circles mean">'
                f'{"".join(items)}<li>colour: ring or cluster; a heavy black ring: a consolidation '
                "survivor</li></ul>")


def svg(graph: Graph, agent: str, title: str, now: datetime | None = None) -> Html:
    """The picture: edges, then nodes as links to their note page, drawn by their state
    (``now`` decides which have expired: none without it)."""
    pos = layout(graph)
    lines = [f'<line x1="{pos[a][0]:.1f}" y1="{pos[a][1]:.1f}" x2="{pos[b][0]:.1f}" '
             f'y2="{pos[b][1]:.1f}"/>' for a, b in sorted(graph.edges)]
    small = len(graph.nodes) > 60
    circles = []
    for node_id, note in graph.nodes.items():
        x, y = pos[node_id]
        colour = _PALETTE[graph.group[node_id] % len(_PALETTE)]
        state = state_of(note, now or _NEVER)
        fill, edge, dash = _LOOK[state.kind]
        fill, edge = fill or colour, edge or colour
        radius = 5 if small else 9
        # labels point away from the centre, so that they do not cross the picture
        left = x < SIZE / 2 - 1
        anchor = ' text-anchor="end"' if left else ""
        label = "" if small else (f'<text x="{x - 11 if left else x + 11:.1f}" y="{y + 4:.1f}"'
                                  f"{anchor}>{esc(note.content[:28])}</text>")
        words = f" ({state.words})"
        merged = absorbed(note)
        if merged:  # a consolidation survivor: a heavier ring, and how many it absorbed
            words += f" (absorbed {len(merged)} notes in consolidation)"
            edge, dash = "#111111", ""
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        width = 4 if merged else 3 if dash else 2
        circles.append(
            f'<a href="{attr(url("note/" + node_id, agent=agent))}" class="node" data-id="{attr(node_id)}"'
            f' data-merged="{len(merged)}" data-state="{attr(state.kind)}">'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius + (2 if merged else 0)}" fill="{fill}" '
            f'stroke="{edge}" stroke-width="{width}"{dashes}>'
            f"<title>{esc(node_id)}{esc(words)}: {esc(note.content[:200])}</title></circle>"
            f"{label}</a>")
    return Html(
        f'<svg id="graph" role="img" aria-labelledby="graph-title" viewBox="0 0 {SIZE} {SIZE}" '
        f'width="100%" data-nodes="{len(graph.nodes)}" data-edges="{len(graph.edges)}">'
        f'<title id="graph-title">{esc(title)}</title><g class="edges">{"".join(lines)}</g>'
        f'<g class="nodes">{"".join(circles)}</g></svg>')


def render_graph(store: MemoryStore, agent: str, note_id: str, subject: str, query: str) -> Html:
    form = Html(
        f'<form method="get" action="{attr(url("graph"))}" aria-label="Choose the graph">'
        f'<input type="hidden" name="agent" value="{attr(agent)}">'
        f'<div class="field"><label for="g-note">Around note id</label><input id="g-note" name="note" value="{attr(note_id)}"></div>'
        f'<div class="field"><label for="g-subject">Subject</label><input id="g-subject" name="subject" value="{attr(subject)}"></div>'
        f'<div class="field"><label for="g-q">Search results of</label><input id="g-q" name="q" type="search" value="{attr(query)}"></div>'
        '<button type="submit">Draw</button></form>')
    if note_id:
        graph, title = neighbourhood(store, agent, note_id), f"Two hops around note {note_id}"
    elif subject:
        graph, title = by_subject(store, agent, subject), f"Notes about {subject}, by consolidation cluster"
    elif query:
        graph, title = from_search(store, agent, query), f"Results of {query!r} and what they link to"
    else:
        return Html(form + "<p>Choose a note, a subject or a search.</p>")
    more = (f"; only the first {MAX_NODES} are drawn" if graph.truncated else "")
    now = store.index.clock.now()
    listing = "".join(f"<li>{link(url('note/' + i, agent=agent), i)} "
                      f"({state_of(n, now).html(agent)}): {esc(n.content[:120])}</li>"
                      for i, n in list(graph.nodes.items())[:MAX_NODES])
    return Html(
        f"{form}<p id=\"graph-summary\">{len(graph.nodes)} notes, {len(graph.edges)} links{esc(more)}. "
        f"Hover a node for its text and state, click it for the note.</p>{legend()}"
        f"{svg(graph, agent, title, now)}"
        f'<details><summary>The same notes as a list</summary><ul>{listing}</ul></details>')


__all__ = ["Graph", "MAX_NODES", "absorbed", "by_subject", "from_search", "layout", "neighbourhood",
           "render_graph", "svg"]
