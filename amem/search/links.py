"""Step 7 of a search: breadth-first expansion over the matches' links."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import ranking
from ..backends.base import HasId, Hit, Where
from ..config import AmemConfig
from ..index import NoteIndex
from ..notes import point_id
from .result import SearchResult, make_result


def expand(index: NoteIndex, config: AmemConfig, agent_id: str, seeds: Sequence[Hit],
           qvec: np.ndarray, scope: Where, gate: float) -> list[SearchResult]:
    """Fetch linked notes hop by hop, then let the pure BFS decide what is admitted.

    A linked note is admitted by its query similarity (the calibrated scale, not the raw
    cosine) reaching ``gate``.
    """
    payloads: dict[str, dict[str, Any]] = {h.payload["id"]: h.payload for h in seeds}
    similarity: dict[str, float | None] = {}
    frontier = list(payloads)
    for _ in range(config.link_hops):
        wanted = [link for nid in frontier for link in payloads[nid].get("links", [])
                  if link not in payloads and link not in similarity]
        wanted = list(dict.fromkeys(wanted))
        if not wanted:
            break
        # The search's own filter (tenant, active, unexpired, current, subject, topics, event
        # time, metadata) decides what links admit.
        where = Where(must=(HasId(tuple(point_id(agent_id, n) for n in wanted)), scope))
        hits = {h.payload["id"]: h for h in index.backend.iterate(where, with_vectors=True)}
        frontier = []
        for nid in wanted:
            hit = hits.get(nid)
            if hit is None or hit.dense is None:
                similarity[nid] = None
                continue
            payloads[nid] = hit.payload
            similarity[nid] = index.query_similarity(float(np.dot(qvec, hit.dense)))
            frontier.append(nid)
    added = ranking.expand_links(
        [h.payload["id"] for h in seeds],
        links_of=lambda nid: payloads[nid].get("links", []) if nid in payloads else [],
        cosine_of=lambda nid: similarity.get(nid),
        hops=config.link_hops, min_cosine=gate, max_added=config.link_max_added)
    return [make_result(payloads[nid], similarity[nid] or 0.0, 0.0, "link", 0.0, "link")
            for nid in added]


__all__ = ["expand"]
