"""Consolidation: merge near-duplicate notes, cascade their links, resolve ``pending_merge``.

Per agent, one run does, in this order:

1. **Resume.** An active note whose ``merged_into`` is set is a merge a crashed run started;
   it is finished first (or the mark is cleared when its survivor is gone).
2. **Repair links.** Every link to a merged note is pointed at its survivor, links to notes
   that no longer exist (or were deleted) are dropped, self-links and repeats go.
3. **Group** active notes by ``(note_type, category)``. Knowledge notes (``note_type ==
   "knowledge"``) follow their own rule: they are grouped, paired and merged only with
   knowledge notes of the same category, never with memory notes, because a knowledge note is
   a general fact and a memory note is about a subject; merging them would tie one to the other.
4. **Pairs**: for every note, its nearest neighbours inside its group with cosine >=
   threshold, exact, by blocked matrix products over the snapshot's vectors (never a Python
   loop over all pairs, never an approximate index).
5. **Clusters**: pairs are taken best first and joined only while every member stays within
   the threshold of the cluster's survivor (the most informative member), so a chain
   A~B~C with A !~ C never folds C into A. Two notes of one supersession chain (a fact and
   the note that replaced it, ``amem.supersede``) never share a cluster: merging them would
   lose the history (they are often close: "Alice drinks coffee", "Alice drinks tea now").
6. **Merge** each loser into its survivor (LLM when configured, offline otherwise; see
   :mod:`amem.consolidate_merge`) and cascade its links.
7. **Pending**: a note still flagged ``pending_merge`` is merged into its nearest neighbour of
   the same note type (any category and not of its supersession chain) when that is within the
   threshold; else the flag is cleared.

Write order of one merge, so that a crash anywhere leaves no link pointing at an inactive or
missing note and the next run finishes the job: mark the loser ``merged_into`` (it stays
active), write the survivor (its history records the loser, which makes the step idempotent),
point every link to the loser at the survivor, then deactivate the loser.

A second run over a consolidated store writes nothing. Adds that run while consolidation is
writing are not blocked; a link one of them makes to a note being merged is repaired by the
next run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from .backends.base import HasId, Match, Where
from .consolidate_merge import MergeLLM, loser_entry, merge_notes, note_key, was_merged
from .consolidate_report import AgentReport, ConsolidationReport
from .graph import LinkGraph
from .lineage import Chains
from .neighbours import threshold_neighbours
from .notes import Note, point_id

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: cosine at or above which two notes of a group are duplicates
DEFAULT_THRESHOLD = 0.75
#: neighbours kept per note; a cluster larger than this still forms through its members' own
#: neighbour lists
NEIGHBOURS = 8
#: merge passes per run (later passes query only the previous pass's survivors)
MAX_PASSES = 4

#: ``progress(stage, done, total)``; stages: scan, pairs, merge, pending
Progress = Callable[[str, int, int], None]


def consolidate(store: "MemoryStore", *, agent_ids: Sequence[str] | None = None,
                progress: Progress | None = None, llm: MergeLLM | None = None,
                threshold: float | None = None, index_first: bool | None = None
                ) -> ConsolidationReport:
    """Consolidate the notes of ``agent_ids`` (every agent in the store when None).

    Args:
        store: the open note store.
        agent_ids: tenants to consolidate; None means every agent with a note.
        progress: called as ``progress(stage, done, total)`` (the CLI draws a bar).
        llm: merges by this model when given (offline on any ``LLMError``).
        threshold: duplicate cosine; default ``store.config.consolidate_threshold`` (0.75).
        index_first: build the engine index first. Pair finding never uses it (it is exact,
            in memory); only the pending step's engine queries, which are exact as well.
    """
    cfg_threshold = store.config.consolidate_threshold
    thr = float(cfg_threshold if threshold is None else threshold)
    if not -1.0 <= thr <= 1.0:
        raise ValueError(f"threshold is a cosine and must lie in [-1, 1], got {thr}")
    started = time.perf_counter()
    agents = list(store.agents() if agent_ids is None else agent_ids)
    report = ConsolidationReport({}, thr)
    # Every neighbour search here is exact (an HNSW index loses neighbours), so building the
    # index first only helps callers that ask for it; the nightly job optimises afterwards.
    if index_first:
        log.info("building the engine index before consolidation")
        store.backend.optimize()
        report.indexed_first = True
    for agent in agents:
        # the threshold is on the calibrated scale; engine scores and dot products are raw
        run = _AgentRun(store, agent, store.raw_cosine(thr), llm, progress)
        report.agents[agent] = run.run()
    report.duration = time.perf_counter() - started
    log.info("consolidated %d agent(s): %d merges, %d links rewritten in %.1fs", len(agents),
             report.merges, report.links_rewritten, report.duration)
    return report


def plan_clusters(pairs: Sequence[tuple[str, str, float]], vectors: dict[str, np.ndarray],
                  keys: dict[str, Any], threshold: float,
                  lineage: Mapping[str, str] | None = None
                  ) -> list[tuple[str, list[tuple[str, float]]]]:
    """Duplicate clusters from scored pairs: ``[(survivor, [(loser, cosine), ...]), ...]``.

    Pairs are joined best first; two clusters join only if every member of the union is
    within ``threshold`` of the union's survivor (the member with the largest key), and no
    two members share a ``lineage`` (a supersession chain's id; notes absent have none).
    Vectors must be unit length. Survivors come sorted, losers best first.
    """
    chains = lineage or {}
    root: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for a, b, _ in sorted(pairs, key=lambda p: (-p[2], p[0], p[1])):
        ra, rb = root.get(a, a), root.get(b, b)
        if ra == rb:
            continue
        union = members.get(ra, [ra]) + members.get(rb, [rb])
        chained = [chains[m] for m in union if m in chains]
        if len(chained) != len(set(chained)):
            continue  # a fact and its successor (or predecessor): keep both, and the history
        survivor = max(union, key=lambda m: keys[m])
        sv = vectors[survivor]
        if any(float(vectors[m] @ sv) < threshold for m in union if m != survivor):
            continue
        members.pop(ra, None)
        members.pop(rb, None)
        members[survivor] = union
        for m in union:
            root[m] = survivor
    out = []
    for survivor in sorted(members):
        sv = vectors[survivor]
        losers = sorted(((m, float(vectors[m] @ sv)) for m in members[survivor] if m != survivor),
                        key=lambda x: (-x[1], x[0]))
        out.append((survivor, losers))
    return out


@dataclass
class _Entry:
    """What a run keeps of one active note: enough to plan, not the whole payload."""

    vector: np.ndarray
    group: tuple[str, str]
    key: tuple[Any, ...]
    pending: bool
    merged_into: str | None


class _AgentRun:
    """One agent's consolidation; holds the snapshot and the link graph."""

    def __init__(self, store: "MemoryStore", agent: str, threshold: float,
                 llm: MergeLLM | None, progress: Progress | None) -> None:
        self.store, self.agent, self.thr, self.llm = store, agent, threshold, llm
        self._progress = progress
        self.report = AgentReport(agent)
        self.active: dict[str, _Entry] = {}
        #: inactive notes: id -> merged_into (None: deleted, not merged)
        self.inactive: dict[str, str | None] = {}
        self.graph = LinkGraph()
        self._seen_pairs: set[tuple[str, str]] = set()
        #: note id -> its supersession chain (only notes in one); see ``plan_clusters``
        self.lineage: dict[str, str] = {}

    def progress(self, stage: str, done: int, total: int) -> None:
        # about 200 calls per stage: every item of a small run, every half percent of a big one
        step = max(1, total // 200)
        if self._progress is not None and (done == total or done % step == 0):
            self._progress(stage, done, total)

    def run(self) -> AgentReport:
        started = time.perf_counter()
        self._scan()
        self._resume()
        self._repair()
        # Later passes query only the survivors of the last one: a pair refused because a
        # cluster member was too far from the survivor may be fine once that member is gone,
        # and a second run must not find it (it would not be idempotent).
        survivors = self._merge_pass(self._pairs(None))
        for _ in range(MAX_PASSES - 1):
            if not survivors:
                break
            survivors = self._merge_pass(self._pairs(sorted(s for s in survivors if s in self.active)))
        self._pending()
        self.report.duration = time.perf_counter() - started
        return self.report

    # ------------------------------------------------------------------ snapshot

    def _scan(self) -> None:
        links: dict[str, list[str]] = {}
        chain = Chains()
        total = self.store.backend.count(Where(must=(Match("agent_id", self.agent),
                                                     Match("is_active", True))))
        for note, vector in self.store.iter_notes(agent_id=self.agent, include_inactive=True,
                                                  with_vectors=True):
            if not note.is_active:
                self.inactive[note.id] = note.merged_into
                continue
            if vector is None:
                raise RuntimeError(f"the engine returned no vector for note {note.id!r}")
            norm = float(np.linalg.norm(vector))
            self.active[note.id] = _Entry(
                np.asarray(vector, dtype=np.float32) / (norm or 1.0),
                (note.note_type, note.category), note_key(note), note.pending_merge,
                note.merged_into)
            links[note.id] = note.links
            for other in (note.superseded_by, *note.supersedes):
                if other:
                    chain.join(note.id, other)
            self.progress("scan", min(len(self.active), total), total)
        self.graph = LinkGraph.from_links(links)
        self.lineage = chain.roots()
        self.report.notes = len(self.active)
        self.report.groups = len({e.group for e in self.active.values()})

    def _resolve(self, note_id: str) -> str | None:
        """The active note a link to ``note_id`` should point at (None: drop the link)."""
        seen: set[str] = set()
        while note_id not in self.active:
            if note_id in seen or note_id not in self.inactive:
                return None
            seen.add(note_id)
            nxt = self.inactive[note_id]
            if nxt is None:
                return None
            note_id = nxt
        return note_id

    # ------------------------------------------------------------------ resume and repair

    def _resume(self) -> None:
        started = sorted(k for k, e in self.active.items() if e.merged_into)
        for loser in started:
            target = self.active[loser].merged_into
            survivor = self._resolve(target) if target else None
            if survivor is None or survivor == loser:
                self.store.update_payload(loser, self.agent, {"merged_into": None})
                self.active[loser].merged_into = None
                continue
            log.info("finishing an interrupted merge of %s into %s", loser, survivor)
            self._merge(survivor, loser, None)
            self.report.resumed += 1

    def _repair(self) -> None:
        self._learn_unknown_targets()
        for source, new in self.graph.repair(self._resolve).items():
            self.store.update_payload(source, self.agent, {"links": new})
            self.report.links_rewritten += 1

    def _learn_unknown_targets(self) -> None:
        """Look up link targets the snapshot does not know (notes added since the scan)."""
        unknown = sorted({t for s in list(self.active) for t in self.graph.links(s)
                          if t not in self.active and t not in self.inactive})
        for start in range(0, len(unknown), 256):
            chunk = unknown[start:start + 256]
            hits = self.store.backend.retrieve([point_id(self.agent, t) for t in chunk],
                                               with_vectors=True)
            for hit in hits:
                note = Note.from_payload(hit.payload)
                if note.agent_id != self.agent:
                    continue
                if note.is_active and hit.dense is not None:
                    # Live but unplanned (group ("", "")): a valid link target, not paired now.
                    self.active[note.id] = _Entry(hit.dense, ("", ""), note_key(note), False, None)
                    self.graph.set_links(note.id, note.links)
                elif not note.is_active:
                    self.inactive[note.id] = note.merged_into

    # ------------------------------------------------------------------ pairs

    def _pairs(self, only: list[str] | None) -> list[tuple[str, str, float]]:
        """Scored pairs: each note's (of ``only``, or every planned note) best neighbours.

        Exact, inside each group, from the snapshot's unit vectors by blocked matrix products
        (:func:`amem.neighbours.threshold_neighbours`); an approximate engine index missed ~45%
        of planted duplicates at 100k notes, and one exact engine query per note took 28 min.
        """
        wanted = set(self.active) if only is None else set(only)
        groups: dict[tuple[str, str], list[str]] = {}
        for note_id, entry in self.active.items():
            if entry.group != ("", ""):
                groups.setdefault(entry.group, []).append(note_id)
        queried = sum(1 for members in groups.values() for m in members if m in wanted)
        found: dict[tuple[str, str], float] = {}
        done = 0
        for group in sorted(groups):
            members = sorted(groups[group])
            rows = np.array([i for i, m in enumerate(members) if m in wanted], dtype=np.int64)
            if rows.size == 0:
                continue
            matrix = np.stack([self.active[m].vector for m in members])
            for block in threshold_neighbours(matrix, rows, self.thr, NEIGHBOURS):
                for q, c, score in zip(block.rows.tolist(), block.neighbours.tolist(),
                                       block.scores.tolist()):
                    a, b = members[q], members[c]
                    key = (a, b) if a < b else (b, a)
                    found[key] = max(found.get(key, -1.0), score)
                done += block.queried
                self.progress("pairs", done, queried)
        self._seen_pairs.update(found)
        self.report.pairs = len(self._seen_pairs)
        return [(a, b, s) for (a, b), s in sorted(found.items())]

    # ------------------------------------------------------------------ merge

    def _merge(self, survivor: str, loser: str, score: float | None) -> None:
        store, agent = self.store, self.agent
        hits = {h.payload.get("id"): h for h in store.backend.retrieve(
            [point_id(agent, survivor), point_id(agent, loser)], with_vectors=True)}
        if survivor not in hits or loser not in hits:
            self.report.warnings.append(f"merge of {loser} into {survivor} skipped: a note is gone")
            return
        s_note = Note.from_payload(hits[survivor].payload)
        l_note = Note.from_payload(hits[loser].payload)
        if not (s_note.is_active and l_note.is_active):
            self.report.warnings.append(
                f"merge of {loser} into {survivor} skipped: a note is no longer active")
            return
        # 1. intent: the loser stays active (and linkable) but says where it is going
        if l_note.merged_into != survivor:
            store.update_payload(loser, agent, {"merged_into": survivor})
        # 2. the survivor absorbs the loser, unless a crashed run already wrote it
        if not was_merged(s_note, loser):
            links = self.graph.absorbed_links(survivor, loser)
            merged = merge_notes(s_note, l_note, links=links,
                                 similarity=None if score is None else self.store.similarity(score),
                                 now=store.clock.now(), llm=self.llm,
                                 max_chars=store.config.max_text_chars)
            vector = hits[survivor].dense
            if (vector is None or s_note.vector_stale
                    or merged.note.embed_text() != s_note.embed_text()):
                vector = store.embed_passages([merged.note.embed_text()])[0]
            store.update_note(merged.note, vector)  # fields and vector; never a revival
            self.graph.set_links(survivor, links)
            self._count_merge_kind(merged.merged_by, merged.llm_error, loser, survivor)
            if s_note.pending_merge:
                self.report.pending_resolved += 1
            entry = self.active[survivor]
            norm = float(np.linalg.norm(vector)) or 1.0
            entry.vector = np.asarray(vector, dtype=np.float32) / norm
            entry.key, entry.pending = note_key(merged.note), False
        # 3. cascade: every link to the loser now points at the survivor, and so does every
        # supersession mark (the loser's fact lives on in the survivor)
        for source, new in self.graph.redirect(loser, survivor).items():
            store.update_payload(source, agent, {"links": new})
            self.report.links_rewritten += 1
        self._inherit_supersessions(survivor, loser, l_note.supersedes)
        # 4. only now is the loser soft-deleted
        store.update_payload(loser, agent, {
            "is_active": False, "merged_into": survivor, "pending_merge": False,
            "evolution_history": [*l_note.evolution_history,
                                  loser_entry(survivor, store.clock.now())]})
        if l_note.pending_merge:
            self.report.pending_resolved += 1
        self.active.pop(loser, None)
        self.inactive[loser] = survivor
        self.graph.remove(loser)
        self.report.merges += 1
        self.report.merged.append((loser, survivor))

    def _inherit_supersessions(self, survivor: str, loser: str, older: list[str]) -> None:
        """The notes ``loser`` had superseded are now superseded by ``survivor``.

        The survivor's ``supersedes`` is written first: a kill before the older notes are
        re-marked leaves them naming the loser, and the resumed merge does this again.
        """
        store, agent = self.store, self.agent
        hits = store.backend.retrieve([point_id(agent, o) for o in older if o != survivor])
        moved = sorted(str(h.payload["id"]) for h in hits if h.payload.get("agent_id") == agent
                       and h.payload.get("superseded_by") == loser)
        if not moved:
            return
        now = store.backend.retrieve([point_id(agent, survivor)])
        if not now:
            return
        current = list(now[0].payload.get("supersedes") or [])
        store.update_payload(survivor, agent, {
            "supersedes": current + [m for m in moved if m not in current]})
        for old in moved:
            store.update_payload(old, agent, {"superseded_by": survivor})
        # the survivor now belongs to the loser's chain: a later pass must keep them apart
        chain = self.lineage.get(loser) or loser
        former = self.lineage.get(survivor)
        for note_id, root in list(self.lineage.items()):
            if former is not None and root == former:
                self.lineage[note_id] = chain
        self.lineage[survivor] = chain
        for old in moved:
            self.lineage[old] = chain

    def _merge_pass(self, pairs: list[tuple[str, str, float]]) -> set[str]:
        """Plan clusters from ``pairs`` and merge them; returns the survivors."""
        clusters = plan_clusters(pairs, {k: e.vector for k, e in self.active.items()},
                                 {k: e.key for k, e in self.active.items()}, self.thr,
                                 self.lineage)
        total = sum(len(losers) for _, losers in clusters)
        done = 0
        for survivor, losers in clusters:
            for loser, score in losers:
                self._merge(survivor, loser, score)
                done += 1
                self.progress("merge", done, total)
        return {survivor for survivor, _ in clusters}

    def _count_merge_kind(self, merged_by: str, error: str | None, loser: str,
                          survivor: str) -> None:
        if merged_by.startswith("llm:"):
            self.report.llm_merges += 1
        elif error is not None:
            self.report.llm_fallbacks += 1
            self.report.warnings.append(
                f"merge of {loser} into {survivor}: LLM failed ({error}); merged offline")

    # ------------------------------------------------------------------ pending

    def _same_type_where(self, note_id: str) -> Where:
        """Active notes of the agent with ``note_id``'s note type (any category), not itself."""
        must = (Match("agent_id", self.agent), Match("is_active", True),
                Match("note_type", self.active[note_id].group[0]))
        return Where(must=must, must_not=(HasId((point_id(self.agent, note_id),)),))

    def _pending(self) -> None:
        flagged = sorted(k for k, e in self.active.items() if e.pending)
        for done, note_id in enumerate(flagged, 1):
            entry = self.active.get(note_id)
            if entry is None or not entry.pending:
                continue  # merged away, or a merge already resolved it
            # The nearest note outside its supersession chain: a new fact flagged pending
            # is often close to the very fact it replaced, and must not swallow it.
            mine = self.lineage.get(note_id)
            hits = self.store.backend.dense_search(entry.vector, self._same_type_where(note_id),
                                                   4 if mine else 1, exact=True)
            best = next((h for h in hits if mine is None
                         or self.lineage.get(str(h.payload.get("id"))) != mine), None)
            other = best.payload.get("id") if best is not None else None
            if best is not None and best.score >= self.thr and other in self.active:
                other_key = note_key(Note.from_payload(best.payload))
                if other_key > entry.key:
                    self._merge(other, note_id, float(best.score))
                else:
                    self._merge(note_id, other, float(best.score))
            else:
                self.store.update_payload(note_id, self.agent, {"pending_merge": False})
                entry.pending = False
                self.report.pending_resolved += 1
            self.progress("pending", done, len(flagged))


__all__ = ["consolidate", "ConsolidationReport", "AgentReport", "plan_clusters",
           "DEFAULT_THRESHOLD", "Progress"]
