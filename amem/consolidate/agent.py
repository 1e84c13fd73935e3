"""One agent's consolidation run: snapshot, resume, repair, pairs, merges, pending.

The steps and the write order of a merge are those of ``amem.consolidate`` (its docstring).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..backends.base import HasId, Match, Where
from ..index import NoteIndex
from ..notes import Note, about_the_same, now_iso, point_id
from ..supersede.marks import mark
from ..write.together import (Apart, kept_apart, labels_nested, same_expiry,
                             taken_out, told_on_other_days)
from ..write.values import state_different_values
from .graph import LinkGraph
from .lineage import Chains
from .merge import MergeLLM, loser_entry, merge_notes, merged_text, note_key, was_merged
from .neighbours import threshold_neighbours
from .plan import plan_clusters
from .report import AgentReport

log = logging.getLogger(__name__)

#: neighbours kept per note; a cluster larger than this still forms through its members' own
#: neighbour lists
NEIGHBOURS = 8
#: merge passes per run (later passes query only the previous pass's survivors)
MAX_PASSES = 4

@dataclass
class _Entry:
    """What a run keeps of one active note: enough to plan, not the whole payload."""

    vector: np.ndarray
    group: tuple[str, str]
    key: tuple[Any, ...]
    pending: bool
    merged_into: str | None
    #: whom the note is about: notes about different people are never merged
    subjects: tuple[str, ...] = ()
    #: the text: notes stating different values are never merged (amem.write.values)
    content: str = ""
    #: what a merge keeps of one note only: notes differing in them stay apart
    #: (amem.write.together)
    expires_at: str = ""
    event_time: str = ""
    timestamp: str = ""
    metadata: dict[str, Any] | None = None
    #: what a person separated from it (``amem separate``): never merged with those again
    apart: Apart | None = None

    def times(self) -> dict[str, str]:
        return {"event_time": self.event_time, "timestamp": self.timestamp}


class AgentRun:
    """One agent's consolidation; holds the snapshot and the link graph."""

    def __init__(self, index: NoteIndex, agent: str, threshold: float,
                 llm: MergeLLM | None, progress: Callable[[str, int, int], None] | None) -> None:
        self.index, self.agent, self.thr, self.llm = index, agent, threshold, llm
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
            survivors = self._merge_pass(
                self._pairs(sorted(s for s in survivors if s in self.active)))
        self._pending()
        self.report.duration = time.perf_counter() - started
        return self.report

    # ------------------------------------------------------------------ snapshot

    def _scan(self) -> None:
        links: dict[str, list[str]] = {}
        chain = Chains()
        total = self.index.backend.count(Where(must=(Match("agent_id", self.agent),
                                                     Match("is_active", True))))
        for note, vector in self.index.iter_notes(self.agent, include_inactive=True,
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
                note.merged_into, tuple(note.subjects), note.content, note.expires_at,
                note.event_time, note.timestamp, dict(note.metadata) or None,
                Apart(note.id, note.hash, frozenset(note.kept_apart),
                      taken_out(note.evolution_history)))
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
                self.index.update_payload(loser, self.agent, {"merged_into": None})
                self.active[loser].merged_into = None
                continue
            log.info("finishing an interrupted merge of %s into %s", loser, survivor)
            self._merge(survivor, loser, None)
            self.report.resumed += 1

    def _repair(self) -> None:
        self._learn_unknown_targets()
        for source, new in self.graph.repair(self._resolve).items():
            self.index.update_payload(source, self.agent, {"links": new})
            self.report.links_rewritten += 1
        # After the redirects: a link now pointing at a survivor gets its other half too.
        for target, new in self.graph.complete().items():
            self.index.update_payload(target, self.agent, {"links": new})
            self.report.links_completed += 1

    def _learn_unknown_targets(self) -> None:
        """Look up link targets the snapshot does not know (notes added since the scan)."""
        unknown = sorted({t for s in list(self.active) for t in self.graph.links(s)
                          if t not in self.active and t not in self.inactive})
        for start in range(0, len(unknown), 256):
            chunk = unknown[start:start + 256]
            hits = self.index.backend.retrieve([point_id(self.agent, t) for t in chunk],
                                               with_vectors=True)
            for hit in hits:
                note = Note.from_payload(hit.payload)
                if note.agent_id != self.agent:
                    continue
                if note.is_active and hit.dense is not None:
                    # Live but unplanned (group ("", "")): a valid link target, not paired now.
                    self.active[note.id] = _Entry(hit.dense, ("", ""), note_key(note), False, None,
                                                  tuple(note.subjects))
                    self.graph.set_links(note.id, note.links)
                elif not note.is_active:
                    self.inactive[note.id] = note.merged_into

    # ------------------------------------------------------------------ pairs

    def _pairs(self, only: list[str] | None) -> list[tuple[str, str, float]]:
        """Scored pairs: each note's (of ``only``, or every planned note) best neighbours.

        Exact, inside each group, from the snapshot's unit vectors by blocked matrix products
        (:func:`amem.consolidate.neighbours.threshold_neighbours`); an approximate engine index
        missed ~45% of planted duplicates at 100k notes, and one exact engine query per note
        took 28 min.
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
        index, agent = self.index, self.agent
        hits = {h.payload.get("id"): h for h in index.backend.retrieve(
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
        # 0. a merge whose text would pass the note size limit keeps both notes: the survivor
        # cannot hold the loser's facts, and a merge must not leave them in its history alone
        if (not was_merged(s_note, loser)
                and len(merged_text(s_note, l_note)) > index.config.max_text_chars):
            self.report.warnings.append(
                f"{loser} not merged into {survivor}: the merged text would pass max_text_chars "
                f"({index.config.max_text_chars}); both stay")
            return
        # 1. intent: the loser stays active (and linkable) but says where it is going
        if l_note.merged_into != survivor:
            index.update_payload(loser, agent, {"merged_into": survivor})
        # 2. the survivor absorbs the loser, unless a crashed run already wrote it
        if not was_merged(s_note, loser):
            links = self.graph.absorbed_links(survivor, loser)
            # the links step 3 points at the survivor, recorded for ``amem separate``
            linkers = {source: survivor in self.graph.links(source)
                       for source in self.graph.linkers(loser) if source not in (loser, survivor)}
            merged = merge_notes(s_note, l_note, links=links,
                                 similarity=None if score is None else self.index.similarity(score),
                                 now=index.clock.now(), llm=self.llm,
                                 max_chars=index.config.max_text_chars, linkers=linkers)
            vector = hits[survivor].dense
            if (vector is None or s_note.vector_stale
                    or merged.note.embed_text() != s_note.embed_text()):
                vector = index.embed_passages([merged.note.embed_text()])[0]
            index.update_note(merged.note, vector)  # fields and vector; never a revival
            self.graph.set_links(survivor, links)
            self._count_merge_kind(merged.merged_by, merged.llm_error, loser, survivor)
            if s_note.pending_merge:
                self.report.pending_resolved += 1
            entry = self.active[survivor]
            norm = float(np.linalg.norm(vector)) or 1.0
            entry.vector = np.asarray(vector, dtype=np.float32) / norm
            entry.key, entry.pending = note_key(merged.note), False
            entry.subjects = tuple(merged.note.subjects)
        # 3. cascade: every link to the loser now points at the survivor, and so does every
        # supersession mark (the loser's fact lives on in the survivor)
        for source, new in self.graph.redirect(loser, survivor).items():
            index.update_payload(source, agent, {"links": new})
            self.report.links_rewritten += 1
        self._inherit_supersessions(survivor, loser, l_note.supersedes)
        # 4. only now is the loser soft-deleted
        index.update_payload(loser, agent, {
            "is_active": False, "merged_into": survivor, "pending_merge": False,
            "evolution_history": [*l_note.evolution_history,
                                  loser_entry(survivor, index.clock.now())]})
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
        index, agent = self.index, self.agent
        hits = index.backend.retrieve([point_id(agent, o) for o in older if o != survivor])
        moved = sorted(str(h.payload["id"]) for h in hits if h.payload.get("agent_id") == agent
                       and h.payload.get("superseded_by") == loser)
        if not moved:
            return
        now = index.backend.retrieve([point_id(agent, survivor)])
        if not now:
            return
        current = list(now[0].payload.get("supersedes") or [])
        index.update_payload(survivor, agent, {
            "supersedes": current + [m for m in moved if m not in current]})
        at = now_iso(index.clock.now())
        for old in moved:  # the one write of a mark (``amem.supersede.mark``)
            mark(index, agent, old, survivor, at=at, decided_by="merge")
        # last: the merged note lists nothing it still hides (search reads a deleted or merged
        # note's non-empty list as an interrupted write, amem.search.visibility.lapsed_successors)
        index.update_payload(loser, agent, {"supersedes": [o for o in older if o not in moved]})
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
                                 self.lineage, {k: e.subjects for k, e in self.active.items()},
                                 self._apart)
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

    def _apart(self, a: str, b: str) -> bool:
        """Whether two active notes must stay apart however alike: they state different values
        (another fact), or differ in what a merge keeps of one note only (expiry, event day,
        labels; ``amem.write.together``)."""
        ea, eb = self.active[a], self.active[b]
        separated = ea.apart is not None and eb.apart is not None and kept_apart(ea.apart, eb.apart)
        return (separated or not same_expiry(ea.expires_at, eb.expires_at)
                or told_on_other_days(ea.times(), eb.times())
                or not labels_nested(ea.metadata, eb.metadata)
                or state_different_values(ea.content, eb.content))

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
            hits = self.index.backend.dense_search(entry.vector, self._same_type_where(note_id),
                                                   4 if mine or entry.subjects else 1, exact=True)
            best = next((h for h in hits
                         if (mine is None or self.lineage.get(str(h.payload.get("id"))) != mine)
                         and about_the_same(entry.subjects, h.payload.get("subjects") or ())
                         and not state_different_values(entry.content,
                                                        str(h.payload.get("content", "")))
                         and same_expiry(entry.expires_at, h.payload.get("expires_at"))
                         and not told_on_other_days(entry.times(), h.payload)
                         and labels_nested(entry.metadata, h.payload.get("metadata"))
                         and not (entry.apart is not None
                                  and kept_apart(entry.apart, Apart.of(h.payload)))),
                        None)
            other = best.payload.get("id") if best is not None else None
            if best is not None and best.score >= self.thr and other in self.active:
                other_key = note_key(Note.from_payload(best.payload))
                if other_key > entry.key:
                    self._merge(other, note_id, float(best.score))
                else:
                    self._merge(note_id, other, float(best.score))
            else:
                self.index.update_payload(note_id, self.agent, {"pending_merge": False})
                entry.pending = False
                self.report.pending_resolved += 1
            self.progress("pending", done, len(flagged))


__all__ = ["AgentRun", "MAX_PASSES", "NEIGHBOURS"]
