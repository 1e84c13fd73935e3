"""The read path: ``search`` = BM25 + dense cosine fused, heat boost, link expansion.

The pipeline, step by step (the numbers match the issue that specifies it):

1. embed the query locally, while step 2 runs on a worker (``amem.search.beside``: the BM25
   leg needs the query's terms, not its vector);
   1b. for ranking, the vector moved off what the tenant's notes share, their words in common
   and their mean (``amem.search.centroid``): steps 3, 4 and 4b rank by what the query asks
   beyond what the store is about anyway;
2. BM25 over content + keywords + tags, as the engine's sparse vector (only notes sharing a
   term with the query are ranked);
3. dense cosine search;
4. fusion (``fusion`` in the config): by default z-score fusion, ``sigmoid(0.4 z_bm25 +
   0.6 z_cosine)`` with each score standardised over the candidates (every candidate's
   cosine is read); or RRF, ``sum_i w_i / (k + rank_i)`` with ranks from 1 (k = 60);
   4b. with z-score fusion, a note is lifted by the best fused standing of the notes told right
   before or after it in event time (``amem.search.adjacent``), which may bring in a neighbour
   neither ranking found (``found_by: "neighbour"``);
   4b2. with z-score fusion, the candidates the first five link to are lifted by their
   standing, never past the third (``amem.search.linked``);
   4b3. a Chinese question's subject (its start, held word for word by one of the first five)
   taken out, the first 20 lifted by their BM25 score for what it asks past it
   (``amem.search.subject``);
   4c. the first 20 reordered by maximal marginal relevance against near-repeats
   (``amem.search.diverse``);
   4d. a question naming a period (a day, a month, a year, the week before a day) lifts the
   candidates told in it (``amem.search.timeq``);
   4e. among the first 20, a note that asks steps back (``amem.search.replies``): a question
   is rarely what answers one;
5. heat boost ``fused * (1 + 0.002 ln(1 + retrieval_count) / (age_days + 1))``, knowledge
   exempt (a tie-breaker: a count says a note was returned, not that it was right); then the
   usage boost: a note the agent opened after a search whose query has cosine >= 0.97 to this
   one is lifted by up to x2 (``amem.search.usage``, ``ranking.usage_boost``;
   ``boosted_by: "usage"``);
   matches are ordered by this ``score`` (``rrf`` keeps the fused score before the boost,
   whichever the fusion: the field's name is older than z-score fusion);
6. with ``min_similarity``, matches below it on the query scale are dropped (so a search can
   answer "nothing relevant");
   5b. (after 6, over the matches) a question among the first matches gives its place to the
   reply told right after it (``replies.replies_first``: order only, over the payloads read
   for the results);
7. breadth-first expansion over links, 2 hops, admitting notes whose query similarity is at
   least ``link_min_cosine`` (and ``min_similarity``), at most 8, appended after the matches
   with ``via: "link"``; within a hop, the notes more of the hop before link to come first
   (``ranking.expand_links``).

``similarity`` is the query-to-note scale of ``amem.similarity`` (0 = unrelated, 1 = a typical
answer, always in [-1, 1]); ``found_by`` says which ranking found a match (``bm25``, ``dense``
or ``both``) or ``link``. Then ``retrieval_count`` and ``last_accessed`` are bumped for the
returned matches only, and the query and the returned ids are remembered (in memory) so that
a ``get`` of one of them records the query on the note (``amem.search.usage``).
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import bm25, ranking
from ..backends.base import Hit, StoreFacts, Where
from ..config import AmemConfig
from ..errors import ValidationError
from ..index import NoteIndex
from ..kernel.errors import DiskFullError
from ..notefields import ASKS, search_conditions
from ..notes import age_days, check_limit, check_str_list, check_text, now_iso
from ..text import tokenize
from . import adjacent, diverse, linked, replies, timeq, usage
from .beside import embed_beside_bm25
from .centroid import Centroids
from .filters import LAPSED_MAX, build_filter, check_min_similarity
from .fuse import fill_cosines, fuse, settle_ties
from .links import expand
from .result import SearchResult, found_by, make_result
from .subject import lift as lift_past_subject  # ``subject`` is a search's argument
from .visibility import LapsedCache, live_ids

log = logging.getLogger(__name__)

#: seconds a search waits for the write lock to count its retrievals before it skips them
HEAT_LOCK_WAIT_S = 0.25
#: the payload keys ranking reads from every candidate (steps 4-5 and the history order); the
#: returned matches' whole payloads are read afterwards, once: a whole payload per candidate
#: cost a search at 10k notes ~2 ms, as much as the engine's own query
RANK_FIELDS = ("id", "note_type", "retrieval_count", "last_accessed", usage.FIELD,
               "superseded_by", "partly_superseded_by", "event_ts", ASKS)


class _Pass(NamedTuple):
    """One pass of the pipeline's reads: what ``search`` shows and counts afterwards."""

    results: list[SearchResult]
    #: the returned matches (point id, payload read), whose retrievals are counted
    matches: list[tuple[str, dict[str, Any]]]
    qvec: np.ndarray
    now: Any


class Searcher:
    """The read path of one store: built once with the index, the settings and the recent
    searches (which a ``get`` reads to record usage heat)."""

    def __init__(self, index: NoteIndex, config: AmemConfig,
                 recent: usage.RecentSearches) -> None:
        self._index = index
        self._config = config
        self._recent = recent
        #: the successors that no longer hide what they replaced, kept between writes
        self._lapsed = LapsedCache(index, LAPSED_MAX)
        #: what each tenant's notes share (step 1b), kept between searches
        self._centroids = Centroids(index)

    def search(self, query: str, *, limit: int, topics_filter: Sequence[str] | None,
               subject: str | None, agent_id: str, expand_links: bool | None = None,
               heat: bool | None = None, min_similarity: float | None = None,
               include_superseded: bool = False, since: Any = None, before: Any = None,
               metadata: Any = None, record_usage: bool = True,
               tags: Any = None) -> list[SearchResult]:
        """The pipeline of the module docstring, for one agent (``record_usage=False``: no
        retrieval counted, no recent search remembered; a look, not a use).

        The engine is not told the conditions the store's facts make vacuous (the tenant of
        the agent owning every point, ``is_active``, expiry, supersession): on a plain
        segment each condition costs the engine's scan (``amem.backends._edge_tenants``,
        ``amem.backends._edge_live``). A write during the search that ends a fact moves the
        backend's epoch; the search then runs again with every condition said."""
        options: dict[str, Any] = dict(
            limit=limit, topics_filter=topics_filter, subject=subject, agent_id=agent_id,
            expand_links=expand_links, heat=heat, min_similarity=min_similarity,
            include_superseded=include_superseded, since=since, before=before,
            metadata=metadata, tags=tags)
        done = self._index.read_as_tenant(
            agent_id, lambda facts: self._run(query, facts=facts, **options))
        # A result lists only links the caller can follow: a target deleted, merged or expired
        # (and not yet swept) stays in the payload until the sweep, never in what is shown.
        live = live_ids(self._index, agent_id,
                        (link for r in done.results for link in r.links))
        for r in done.results:
            r.links = [link for link in r.links if link in live]
        if record_usage:
            self._bump_heat(done.matches, done.now)
            self._recent.searched(agent_id, done.qvec, [r.id for r in done.results])
        return done.results

    def _run(self, query: str, *, limit: int, topics_filter: Sequence[str] | None,
             subject: str | None, agent_id: str, expand_links: bool | None,
             heat: bool | None, min_similarity: float | None, include_superseded: bool,
             since: Any, before: Any, metadata: Any, tags: Any,
             facts: StoreFacts) -> "_Pass":
        """The pipeline's reads and ranking (``facts``: the conditions they make vacuous left
        out of the engine's filters); it changes nothing, so ``search`` can drop a pass and
        run it again."""
        index, cfg = self._index, self._config
        check_text(query, field="query", max_chars=cfg.max_query_chars)
        check_limit(limit, maximum=cfg.max_limit)
        topics = check_str_list(topics_filter, field="topicsFilter")
        if subject is not None:
            check_text(subject, field="subject", max_chars=200)
        floor = check_min_similarity(min_similarity)
        # event time, metadata and tags (checked)
        narrow = search_conditions(since, before, metadata, tags)
        # a flag is a bool, not any truthy value: "no" from a caller must not turn link
        # expansion or heat on (None takes the config's setting)
        for name, flag in (("expand_links", expand_links), ("heat", heat)):
            if flag is not None and not isinstance(flag, bool):
                raise ValidationError(f"{name} must be true or false (or None for the "
                                      f"configured default)", field=name)
        if not isinstance(include_superseded, bool):
            raise ValidationError("include_superseded must be true or false",
                                  field="include_superseded")
        use_heat = cfg.heat if heat is None else heat
        use_links = cfg.link_expansion if expand_links is None else expand_links

        where = build_filter(index, agent_id, subject, topics, lapsed=self._lapsed,
                             include_superseded=include_superseded, facts=facts)
        # they narrow both legs and the link expansion inside the engine, not after the fact
        where = Where(must=(*where.must, *narrow))
        terms = tokenize(query)
        pool = max(cfg.candidates, limit)
        engine = index.backend
        # the BM25 leg needs no vector: it runs on a worker while the query is embedded
        qvec, bm25_hits = embed_beside_bm25(                                    # 1, 2
            lambda: index.embed_query(query), engine,
            bm25.query_vector(terms) if terms else None, where, pool, RANK_FIELDS)
        # ranking's vector; what is shown and gated keeps the query's own (amem.search.centroid)
        rank_vec = self._centroids.rank_vector(qvec, query, agent_id, cfg)          # 1b
        # the dense leg and the BM25 hits' cosines in one engine round trip
        legs = engine.search_legs(rank_vec, None, where, pool, fields=RANK_FIELDS,  # 3
                                  sparse_hits=bm25_hits)
        sparse_hits = settle_ties(legs.sparse)
        dense_hits = settle_ties(legs.dense)
        # on rank_vec's scale, as fusion compares them
        cosine = {**legs.sparse_cosines, **{h.id: h.score for h in dense_hits}}
        fused, table = fuse(cfg, engine, rank_vec, sparse_hits, dense_hits, pool, cosine)  # 4
        fused, brought = adjacent.lift(cfg, engine, rank_vec, where, fused, sparse_hits,  # 4b
                                       dense_hits, table, cosine, RANK_FIELDS)
        fused, seeds = linked.lift(cfg, engine, agent_id, fused)                # 4b2
        fused, seeds = lift_past_subject(cfg, engine, query, fused, seeds)     # 4b3
        fused = diverse.diversify(cfg, engine, fused, index.similarities)       # 4c
        by_id: dict[str, Hit] = {h.id: h for h in sparse_hits}
        by_id.update({h.id: h for h in dense_hits})
        by_id.update({h.id: h for h in brought})
        fused = timeq.lift(cfg, query, fused, by_id.values())                  # 4d
        fused, whole = replies.questions_back(cfg, engine, fused, by_id)        # 4e
        whole = {**seeds, **whole}  # payloads read whole, by step 4b2, 4b3 or 4e
        in_sparse = {h.id for h in sparse_hits}
        in_dense = {h.id for h in dense_hits}
        now = index.clock.now()
        scored: list[tuple[str, float, float]] = []                             # (pid, rrf, final)
        use_usage = use_heat and cfg.usage_factor > 0
        boosted: set[str] = set()
        for pid, score in fused:
            payload = by_id[pid].payload
            final = score
            # a note never returned has no boost (ln 1 = 0): its access time is not parsed
            count = int(payload.get("retrieval_count", 0))
            if use_heat and count > 0 and payload.get("note_type") != "knowledge":  # 5
                final = ranking.heat_boost(score, count,
                                           age_days(payload.get("last_accessed", ""), now),
                                           cfg.heat_factor)
            if use_usage and payload.get(usage.FIELD):
                lifted = ranking.usage_boost(
                    final, usage.best_cosine(payload[usage.FIELD], index.embedder.model_id,
                                             qvec),
                    cfg.usage_threshold, cfg.usage_factor)
                if lifted > final:
                    boosted.add(pid)
                    final = lifted
            scored.append((pid, score, final))
        order = {pid: i for i, (pid, _, _) in enumerate(scored)}
        scored.sort(key=lambda t: (-t[2], order[t[0]]))
        # a note changed in part (always shown) keeps its rank, its newer note read right
        # before it; a replaced fact (shown with include_superseded) right after the note
        # that replaced it
        partial = [(str(by_id[pid].payload.get("id")), by_id[pid].payload.get("partly_superseded_by"))
                   for pid, _, _ in scored]
        if any(by for _, by in partial):
            scored = [scored[i] for i in ranking.changed_in_part_order(partial)]
        if include_superseded:
            scored = [scored[i] for i in ranking.history_order(
                [(str(by_id[pid].payload.get("id")), by_id[pid].payload.get("superseded_by"))
                 for pid, _, _ in scored])]
        # Without a floor only the returned matches need a cosine; with one, every candidate may.
        wanted = scored if floor is not None else scored[:limit]
        # the query's own cosines, on the scale similarity is calibrated for: ranking's when
        # step 1b left the vector as it was, else from the stored vectors (the head's are
        # kept by step 4c)
        shown = cosine if rank_vec is qvec else {}
        fill_cosines(engine, qvec, [pid for pid, _, _ in wanted], shown)
        sim = {pid: index.query_similarity(shown[pid]) for pid, _, _ in wanted if pid in shown}
        if floor is not None:                                                   # 6
            scored = [t for t in scored if sim.get(t[0], -1.0) >= floor]
        matches = scored[:limit]
        # The matches' whole payloads, in one read of those steps 4b2 and 4e did not read; a match
        # hard-deleted since the query (the expiry sweep) is gone and left out.
        unread = [pid for pid, _, _ in matches if pid not in whole]
        whole = {pid: whole[pid] for pid, _, _ in matches if pid in whole}
        whole.update({h.id: h for h in engine.retrieve(unread)} if unread else {})
        matches = [m for m in matches if m[0] in whole]
        by_id.update(whole)
        matches = replies.replies_first(cfg, matches, whole, include_superseded)  # 5b

        results = [make_result(by_id[pid].payload, sim.get(pid, 0.0), rrf_score, "match", final,
                               found_by(pid in in_sparse, pid in in_dense)
                               if pid in in_sparse or pid in in_dense else "neighbour",
                               "usage" if pid in boosted else None)
                   for pid, rrf_score, final in matches]

        if use_links and matches:                                               # 7
            gate = cfg.link_min_cosine if floor is None else max(cfg.link_min_cosine, floor)
            results.extend(expand(index, cfg, agent_id, [by_id[pid] for pid, _, _ in matches],
                                  qvec, where, gate))
        return _Pass(results, [(pid, by_id[pid].payload) for pid, _, _ in matches], qvec, now)

    def _bump_heat(self, matches: Sequence[tuple[str, dict[str, Any]]], now: Any) -> None:
        """Count a retrieval for each returned match (not for every candidate).

        The counts come from the payloads the query already returned, so this costs one small
        payload write per match and no extra read. Two concurrent searches returning the same
        note may count it once instead of twice: heat is a ranking hint, not an audit log.
        The writes take the store's write lock like every other change, but a search never
        waits behind maintenance holding it for minutes (consolidation): then it counts nothing.
        """
        if not matches:
            return
        lock = self._index.lock
        if not lock.acquire(timeout=HEAT_LOCK_WAIT_S):
            log.info("heat: %d retrievals not counted while the store was busy", len(matches))
            return
        try:
            stamp = now_iso(now)
            for pid, payload in matches:
                self._index.backend.set_payload(
                    pid, {"retrieval_count": int(payload.get("retrieval_count", 0)) + 1,
                          "last_accessed": stamp})
        except DiskFullError as exc:  # a read must not fail for its ranking hint
            log.warning("heat: retrievals not counted, the disk is full: %s", exc)
        finally:
            lock.release()


__all__ = ["HEAT_LOCK_WAIT_S", "Searcher"]
