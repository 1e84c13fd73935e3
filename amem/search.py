"""The read path: ``search`` = BM25 + dense cosine fused, heat boost, link expansion.

The pipeline, step by step (the numbers match the issue that specifies it):

1. embed the query locally;
2. BM25 over content + keywords + tags, as the engine's sparse vector (only notes sharing a
   term with the query are ranked);
3. dense cosine search;
4. fusion (``fusion`` in the config): by default z-score fusion, ``sigmoid(0.4 z_bm25 +
   0.6 z_cosine)`` with each score standardised over the candidates (every candidate's
   cosine is read); or RRF, ``sum_i w_i / (k + rank_i)`` with ranks from 1 (k = 60);
5. heat boost ``fused * (1 + 0.002 ln(1 + retrieval_count) / (age_days + 1))``, knowledge
   exempt (a tie-breaker: a count says a note was returned, not that it was right); then the
   usage boost: a note the agent opened after a search whose query has cosine >= 0.97 to this
   one is lifted by up to x2 (``amem.usage``, ``ranking.usage_boost``; ``boosted_by: "usage"``);
   matches are ordered by this ``score`` (``rrf`` keeps the fused score before the boost,
   whichever the fusion: the field's name is older than z-score fusion);
6. with ``min_similarity``, matches below it on the query scale are dropped (so a search can
   answer "nothing relevant");
7. breadth-first expansion over links, 2 hops, admitting notes whose query similarity is at
   least ``link_min_cosine`` (and ``min_similarity``), at most 8, appended after the matches
   with ``via: "link"``.

``similarity`` is the query-to-note scale of ``amem.similarity`` (0 = unrelated, 1 = a typical
answer, always in [-1, 1]); ``found_by`` says which ranking found a match (``bm25``, ``dense``
or ``both``) or ``link``. Then ``retrieval_count`` and ``last_accessed`` are bumped for the
returned matches only, and the query and the returned ids are remembered (in memory) so that
a ``get`` of one of them records the query on the note (``amem.usage``).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import bm25, ranking, usage
from .backends.base import HasId, Hit, IsEmpty, Match, MatchAny, Where
from .errors import ValidationError
from .notefields import search_conditions
from .notes import age_days, check_limit, check_str_list, check_text, now_iso, point_id
from .text import tokenize
from .visibility import expired_ids, live_ids

#: at most this many expired, unswept successors release their older facts before the sweep
_LAPSED_MAX = 1000

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
    #: the score matches are ordered by (``rrf`` after the heat boost); 0 for linked notes
    score: float = 0.0
    #: "bm25", "dense" or "both" for a match; "link" for a linked note
    found_by: str = "link"
    #: the newer note that replaced this one (only with ``include_superseded``)
    superseded_by: str | None = None
    #: when the event happened (UTC ISO; the write time when none was given)
    event_time: str = ""
    #: the caller's labels (``amem.notefields``)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: "usage" when the agent opened this note after a near-identical query (``amem.usage``)
    boosted_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_filter(store: "MemoryStore", agent_id: str, subject: str | None,
                 topics: Sequence[str], *, include_superseded: bool = False) -> Where:
    """Tenant + active (+ current: not superseded, unless history is asked for), then the
    optional subject and topics rules as nested clauses."""
    must: list[Any] = list(store.tenant_filter(agent_id))
    if not include_superseded:  # amem.supersede: a replaced fact is history, not an answer
        # ... unless what replaced it has expired: until the sweep deletes the successor (and
        # clears the mark), the older fact is current again, as it is once the sweep has run.
        lapsed = expired_ids(store, agent_id, limit=_LAPSED_MAX)
        current = IsEmpty("superseded_by")
        must.append(Where(should=(current, MatchAny("superseded_by", tuple(lapsed))))
                    if lapsed else current)
    if subject is not None:
        # Notes naming the subject, plus notes naming nobody.
        must.append(Where(should=(Match("subjects", subject), IsEmpty("subjects"))))
    if topics:
        # Knowledge notes must carry every topic; memory notes pass through.
        knowledge = Where(must=(Match("note_type", "knowledge"),
                                *(Match("topics", t) for t in topics)))
        must.append(Where(should=(Match("note_type", "memory"), knowledge)))
    return Where(must=tuple(must))


def check_min_similarity(value: Any) -> float | None:
    """None, or a number in [-1, 1] (the query-to-note scale)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= value <= 1.0:
        raise ValidationError(f"min_similarity must be a number in [-1, 1], got {value!r}",
                              field="min_similarity")
    return float(value)


def run_search(store: "MemoryStore", query: str, *, limit: int, topics_filter: Sequence[str] | None,
               subject: str | None, agent_id: str, expand_links: bool | None = None,
               heat: bool | None = None, min_similarity: float | None = None,
               include_superseded: bool = False, since: Any = None, before: Any = None,
               metadata: Any = None) -> list[SearchResult]:
    cfg = store.config
    check_text(query, field="query", max_chars=cfg.max_query_chars)
    check_limit(limit, maximum=cfg.max_limit)
    topics = check_str_list(topics_filter, field="topicsFilter")
    if subject is not None:
        check_text(subject, field="subject", max_chars=200)
    floor = check_min_similarity(min_similarity)
    narrow = search_conditions(since, before, metadata)  # event time and metadata (checked)
    use_heat = cfg.heat if heat is None else heat
    use_links = cfg.link_expansion if expand_links is None else expand_links

    qvec = store.embed_query(query)                                         # 1
    if not isinstance(include_superseded, bool):
        raise ValidationError("include_superseded must be true or false",
                              field="include_superseded")
    where = build_filter(store, agent_id, subject, topics, include_superseded=include_superseded)
    # they narrow both legs and the link expansion inside the engine, not after the fact
    where = Where(must=(*where.must, *narrow))
    terms = tokenize(query)
    pool = max(cfg.candidates, limit)
    sparse_hits = (store.backend.sparse_search(bm25.query_vector(terms), where, pool)
                   if terms else [])                                        # 2
    dense_hits = _settle_ties(store.backend.dense_search(qvec, where, pool))  # 3
    sparse_hits = _settle_ties(sparse_hits)
    cosine = {h.id: h.score for h in dense_hits}
    fused = _fuse(store, qvec, sparse_hits, dense_hits, pool, cosine)        # 4

    by_id: dict[str, Hit] = {h.id: h for h in sparse_hits}
    by_id.update({h.id: h for h in dense_hits})
    in_sparse = {h.id for h in sparse_hits}
    in_dense = {h.id for h in dense_hits}
    now = store.clock.now()
    scored: list[tuple[str, float, float]] = []                             # (pid, rrf, final)
    use_usage = use_heat and cfg.usage_factor > 0
    boosted: set[str] = set()
    for pid, score in fused:
        payload = by_id[pid].payload
        final = score
        if use_heat and payload.get("note_type") != "knowledge":            # 5
            final = ranking.heat_boost(score, int(payload.get("retrieval_count", 0)),
                                       age_days(payload.get("last_accessed", ""), now),
                                       cfg.heat_factor)
        if use_usage and payload.get(usage.FIELD):
            lifted = ranking.usage_boost(
                final, usage.best_cosine(payload[usage.FIELD], store.embedder.model_id, qvec),
                cfg.usage_threshold, cfg.usage_factor)
            if lifted > final:
                boosted.add(pid)
                final = lifted
        scored.append((pid, score, final))
    order = {pid: i for i, (pid, _, _) in enumerate(scored)}
    scored.sort(key=lambda t: (-t[2], order[t[0]]))
    if include_superseded:  # a replaced fact right after the note that replaced it
        from .supersede import history_order

        scored = [scored[i] for i in history_order(
            [(str(by_id[pid].payload.get("id")), by_id[pid].payload.get("superseded_by"))
             for pid, _, _ in scored])]
    # Without a floor only the returned matches need a cosine; with one, every candidate may.
    wanted = scored if floor is not None else scored[:limit]
    _fill_cosines(store, qvec, [pid for pid, _, _ in wanted], cosine)
    sim = {pid: store.query_similarity(c) for pid, c in cosine.items()}
    if floor is not None:                                                   # 6
        scored = [t for t in scored if sim.get(t[0], -1.0) >= floor]
    matches = scored[:limit]

    results = [_result(by_id[pid].payload, sim.get(pid, 0.0), rrf_score, "match", final,
                       _found_by(pid in in_sparse, pid in in_dense),
                       "usage" if pid in boosted else None)
               for pid, rrf_score, final in matches]

    if use_links and matches:                                               # 7
        gate = cfg.link_min_cosine if floor is None else max(cfg.link_min_cosine, floor)
        results.extend(_expand(store, agent_id, [by_id[pid] for pid, _, _ in matches], qvec,
                               where, gate))
    # A result lists only links the caller can follow: a target deleted, merged or expired
    # (and not yet swept) stays in the payload until the sweep, never in what is shown.
    live = live_ids(store, agent_id, (link for r in results for link in r.links))
    for r in results:
        r.links = [link for link in r.links if link in live]
    _bump_heat(store, [(pid, by_id[pid].payload) for pid, _, _ in matches], now)
    store.recent_searches.searched(agent_id, qvec, [r.id for r in results])
    return results


def _fuse(store: "MemoryStore", qvec: np.ndarray, sparse_hits: Sequence[Hit],
          dense_hits: Sequence[Hit], pool: int, cosine: dict[str, float]
          ) -> list[tuple[str, float]]:
    """Step 4: the configured fusion of the two rankings (``amem.ranking``), best first.

    z-score fusion needs every candidate's cosine: a BM25-only candidate's comes from its
    stored vector (one read of at most ``pool`` points; guessing it from the dense cut-off
    measured MRR 0.550 -> 0.501 on LoCoMo dev). Its missing BM25 score is
    ``ranking.unranked_score`` of the BM25 list.
    """
    cfg = store.config
    weights = [cfg.sparse_weight, cfg.dense_weight]
    if cfg.fusion == "rrf":
        return ranking.rrf([[h.id for h in sparse_hits], [h.id for h in dense_hits]],
                           k=cfg.rrf_k, weights=weights)
    candidates = [h.id for h in sparse_hits] + [h.id for h in dense_hits]
    _fill_cosines(store, qvec, candidates, cosine)
    # Scores at 1e-6, as in _settle_ties: engines (and an engine's cosine against ours from
    # the stored vector) differ in the 7th digit, which must not reorder equal notes.
    bm25_scores = {h.id: round(h.score, 6) for h in sparse_hits}
    cosines = {pid: round(c, 6) for pid, c in cosine.items()}
    # a candidate without a stored vector (none should lack one) gets the dense list's floor
    dense_floor = min((cosines[h.id] for h in dense_hits), default=0.0)
    return ranking.zscore_fusion(
        candidates, [bm25_scores, cosines], weights,
        [ranking.unranked_score(list(bm25_scores.values()), pool), dense_floor])


def _found_by(sparse: bool, dense: bool) -> str:
    return "both" if sparse and dense else ("bm25" if sparse else "dense")


def _fill_cosines(store: "MemoryStore", qvec: np.ndarray, pids: Sequence[str],
                  cosine: dict[str, float]) -> None:
    """BM25-only candidates have no cosine from the engine: take it from their stored vector."""
    missing = [pid for pid in pids if pid not in cosine]
    if missing:
        for hit in store.backend.retrieve(missing, with_vectors=True):
            if hit.dense is not None:
                cosine[hit.id] = float(np.dot(qvec, hit.dense))


def _settle_ties(hits: list[Hit]) -> list[Hit]:
    """Order equal scores by id: engines break ties differently, results must not differ.

    Scores are compared at 1e-6 so float noise between engines cannot reorder real ties.
    """
    return sorted(hits, key=lambda h: (-round(h.score, 6), h.id))


def _expand(store: "MemoryStore", agent_id: str, seeds: Sequence[Hit], qvec: np.ndarray,
            scope: Where, gate: float) -> list[SearchResult]:
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
        # The search's own filter (tenant, active, unexpired, current, subject, topics, event
        # time, metadata) decides what links admit.
        where = Where(must=(HasId(tuple(point_id(agent_id, n) for n in wanted)), scope))
        hits = {h.payload["id"]: h for h in store.backend.iterate(where, with_vectors=True)}
        frontier = []
        for nid in wanted:
            hit = hits.get(nid)
            if hit is None or hit.dense is None:
                cos[nid] = None
                continue
            payloads[nid] = hit.payload
            cos[nid] = store.query_similarity(float(np.dot(qvec, hit.dense)))
            frontier.append(nid)
    added = ranking.expand_links(
        [h.payload["id"] for h in seeds],
        links_of=lambda nid: payloads[nid].get("links", []) if nid in payloads else [],
        cosine_of=lambda nid: cos.get(nid),
        hops=cfg.link_hops, min_cosine=gate, max_added=cfg.link_max_added)
    return [_result(payloads[nid], cos[nid] or 0.0, 0.0, "link", 0.0, "link") for nid in added]


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


def _result(payload: dict[str, Any], similarity: float, rrf_score: float, via: str,
            score: float, found_by: str, boosted_by: str | None = None) -> SearchResult:
    return SearchResult(
        id=payload["id"], content=payload["content"], context=payload.get("context", ""),
        keywords=list(payload.get("keywords", [])), tags=list(payload.get("tags", [])),
        topics=list(payload.get("topics", [])), links=list(payload.get("links", [])),
        timestamp=payload.get("timestamp", ""), note_type=payload.get("note_type", "memory"),
        similarity=round(float(similarity), 6), rrf=round(float(rrf_score), 8), via=via,
        subjects=list(payload.get("subjects", [])), category=payload.get("category", "General"),
        score=round(float(score), 8), found_by=found_by,
        superseded_by=payload.get("superseded_by"),
        event_time=payload.get("event_time") or payload.get("timestamp", ""),
        metadata=dict(payload.get("metadata") or {}), boosted_by=boosted_by)
