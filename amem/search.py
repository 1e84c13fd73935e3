"""The read path: ``search`` = BM25 + dense cosine fused by RRF, heat boost, link expansion.

The pipeline, step by step (the numbers match the issue that specifies it):

1. embed the query locally;
2. BM25 over content + keywords + tags, as the engine's sparse vector (only notes sharing a
   term with the query are ranked);
3. dense cosine search;
4. RRF fusion, ``sum_i w_i / (k + rank_i)`` with ranks from 1 (k = 60 by default);
5. heat boost ``rrf * (1 + 0.05 ln(1 + retrieval_count) / (age_days + 1))``, knowledge exempt;
6. breadth-first expansion over links, 2 hops, admitting notes with cosine >= 0.25, at most 8,
   appended after the matches with ``via: "link"``.

Then ``retrieval_count`` and ``last_accessed`` are bumped for the returned matches only.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import bm25, ranking
from .backends.base import HasId, Hit, IsEmpty, Match, Where
from .notes import age_days, check_limit, check_str_list, check_text, now_iso, point_id
from .text import tokenize

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)


@dataclass
class SearchResult:
    """One hit as the tools return it."""

    id: str
    content: str
    context: str
    keywords: list[str]
    tags: list[str]
    topics: list[str]
    links: list[str]
    timestamp: str
    note_type: str
    similarity: float
    rrf: float
    via: str  # "match" or "link"
    subjects: list[str] = field(default_factory=list)
    category: str = "General"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_filter(store: "MemoryStore", agent_id: str, subject: str | None,
                 topics: Sequence[str]) -> Where:
    """Tenant + active, then the optional subject and topics rules as nested clauses."""
    must: list[Any] = list(store.tenant_filter(agent_id))
    if subject is not None:
        # Notes naming the subject, plus notes naming nobody.
        must.append(Where(should=(Match("subjects", subject), IsEmpty("subjects"))))
    if topics:
        # Knowledge notes must carry every topic; memory notes pass through.
        knowledge = Where(must=(Match("note_type", "knowledge"),
                                *(Match("topics", t) for t in topics)))
        must.append(Where(should=(Match("note_type", "memory"), knowledge)))
    return Where(must=tuple(must))


def run_search(store: "MemoryStore", query: str, *, limit: int, topics_filter: Sequence[str] | None,
               subject: str | None, agent_id: str, expand_links: bool | None = None,
               heat: bool | None = None) -> list[SearchResult]:
    cfg = store.config
    check_text(query, field="query", max_chars=cfg.max_query_chars)
    check_limit(limit, maximum=cfg.max_limit)
    topics = check_str_list(topics_filter, field="topicsFilter")
    if subject is not None:
        check_text(subject, field="subject", max_chars=200)
    use_heat = cfg.heat if heat is None else heat
    use_links = cfg.link_expansion if expand_links is None else expand_links

    qvec = store.embed_query(query)                                         # 1
    where = build_filter(store, agent_id, subject, topics)
    terms = tokenize(query)
    pool = max(cfg.candidates, limit)
    sparse_hits = (store.backend.sparse_search(bm25.query_vector(terms), where, pool)
                   if terms else [])                                        # 2
    dense_hits = _settle_ties(store.backend.dense_search(qvec, where, pool))  # 3
    sparse_hits = _settle_ties(sparse_hits)
    fused = ranking.rrf([[h.id for h in sparse_hits], [h.id for h in dense_hits]],
                        k=cfg.rrf_k, weights=[cfg.sparse_weight, cfg.dense_weight])  # 4

    by_id: dict[str, Hit] = {h.id: h for h in sparse_hits}
    by_id.update({h.id: h for h in dense_hits})
    cosine = {h.id: h.score for h in dense_hits}
    now = store.clock.now()
    scored: list[tuple[str, float, float]] = []                             # (pid, rrf, final)
    for pid, score in fused:
        payload = by_id[pid].payload
        final = score
        if use_heat and payload.get("note_type") != "knowledge":            # 5
            final = ranking.heat_boost(score, int(payload.get("retrieval_count", 0)),
                                       age_days(payload.get("last_accessed", ""), now),
                                       cfg.heat_factor)
        scored.append((pid, score, final))
    order = {pid: i for i, (pid, _, _) in enumerate(scored)}
    scored.sort(key=lambda t: (-t[2], order[t[0]]))
    matches = scored[:limit]

    missing = [pid for pid, _, _ in matches if pid not in cosine]
    if missing:  # BM25-only matches: their cosine comes from their stored vector
        for hit in store.backend.retrieve(missing, with_vectors=True):
            if hit.dense is not None:
                cosine[hit.id] = float(np.dot(qvec, hit.dense))

    results = [_result(by_id[pid].payload, store.similarity(cosine[pid]) if pid in cosine else 0.0,
                       rrf_score, "match") for pid, rrf_score, _ in matches]

    if use_links and matches:                                               # 6
        results.extend(_expand(store, agent_id, [by_id[pid] for pid, _, _ in matches], qvec,
                               topics, subject))
    _bump_heat(store, [(pid, by_id[pid].payload) for pid, _, _ in matches], now)
    return results


def _settle_ties(hits: list[Hit]) -> list[Hit]:
    """Order equal scores by id: engines break ties differently, results must not differ.

    Scores are compared at 1e-6 so float noise between engines cannot reorder real ties.
    """
    return sorted(hits, key=lambda h: (-round(h.score, 6), h.id))


def _expand(store: "MemoryStore", agent_id: str, seeds: Sequence[Hit], qvec: np.ndarray,
            topics: Sequence[str], subject: str | None) -> list[SearchResult]:
    """Fetch linked notes hop by hop, then let the pure BFS decide what is admitted."""
    cfg = store.config
    payloads: dict[str, dict[str, Any]] = {h.payload["id"]: h.payload for h in seeds}
    cos: dict[str, float | None] = {}
    frontier = list(payloads)
    for _ in range(cfg.link_hops):
        wanted = [link for nid in frontier for link in payloads[nid].get("links", [])
                  if link not in payloads and link not in cos]
        wanted = list(dict.fromkeys(wanted))
        if not wanted:
            break
        # The search's own filter (tenant, active, subject, topics) decides what links admit.
        where = Where(must=(HasId(tuple(point_id(agent_id, n) for n in wanted)),
                            build_filter(store, agent_id, subject, topics)))
        hits = {h.payload["id"]: h for h in store.backend.iterate(where, with_vectors=True)}
        frontier = []
        for nid in wanted:
            hit = hits.get(nid)
            if hit is None or hit.dense is None:
                cos[nid] = None
                continue
            payloads[nid] = hit.payload
            cos[nid] = store.similarity(float(np.dot(qvec, hit.dense)))
            frontier.append(nid)
    added = ranking.expand_links(
        [h.payload["id"] for h in seeds],
        links_of=lambda nid: payloads[nid].get("links", []) if nid in payloads else [],
        cosine_of=lambda nid: cos.get(nid),
        hops=cfg.link_hops, min_cosine=cfg.link_min_cosine, max_added=cfg.link_max_added)
    return [_result(payloads[nid], cos[nid] or 0.0, 0.0, "link") for nid in added]


def _bump_heat(store: "MemoryStore", matches: Sequence[tuple[str, dict[str, Any]]],
               now: Any) -> None:
    """Count a retrieval for each returned match (not for every candidate).

    The counts come from the payloads the query already returned, so this costs one small
    payload write per match and no extra read. Two concurrent searches returning the same
    note may count it once instead of twice: heat is a ranking hint, not an audit log.
    """
    stamp = now_iso(now)
    for pid, payload in matches:
        store.backend.set_payload(pid, {"retrieval_count": int(payload.get("retrieval_count", 0)) + 1,
                                        "last_accessed": stamp})


def _result(payload: dict[str, Any], similarity: float, rrf_score: float, via: str) -> SearchResult:
    return SearchResult(
        id=payload["id"], content=payload["content"], context=payload.get("context", ""),
        keywords=list(payload.get("keywords", [])), tags=list(payload.get("tags", [])),
        topics=list(payload.get("topics", [])), links=list(payload.get("links", [])),
        timestamp=payload.get("timestamp", ""), note_type=payload.get("note_type", "memory"),
        similarity=round(float(similarity), 6), rrf=round(float(rrf_score), 8), via=via,
        subjects=list(payload.get("subjects", [])), category=payload.get("category", "General"))
