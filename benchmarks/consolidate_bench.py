"""Consolidation at scale: time on 10k (and 100k) notes with planted duplicates, and merge quality.

    python -m benchmarks.consolidate_bench                # 10k notes
    python -m benchmarks.consolidate_bench --full         # 10k and 100k notes (minutes)
    python -m benchmarks.consolidate_bench --quick        # 2k notes, a smoke run
    python -m benchmarks.consolidate_bench --sizes 5000 --out benchmarks/out/consolidate.json

Vectors are **synthetic unit vectors** from a planted embedder, so every cosine is under
control: each fact (cluster) has a random base direction in 384 dimensions; a note of the
fact embeds to ``normalise(base + 0.42 * noise(text))`` (two notes of one fact: cosine about
0.85). A share of facts (``--near-share``) gets a *near miss*: a different fact whose base is
at cosine 0.85 to it, so its notes sit at about 0.72, just under the 0.75 threshold, and must
not merge. ``--dup-share`` of all notes are planted duplicates (extra notes of an existing
fact, at most three per fact). Every note links to two random others, so the cascade works.

Reported per size: consolidation time, the time of a second (idempotent) run, and both as
ratios to a plain full scroll of the store with vectors in the same process (absolute times
move with the machine's load); precision (merges joining two notes of one fact / merges) and
recall (such merges / planted duplicates); the broken links left (must be 0).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import platform
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.kernel.clock import ManualClock
from amem.notes import CATEGORIES, Note

from ._util import write_result

DIM = 384
NOISE = 0.42
NEAR_BASE_COSINE = 0.85
_CLUSTER = re.compile(r"^\[f(\d+)\]")


class PlantedEmbedder:
    """Text ``"[f<fact>] ..."`` -> the fact's base direction plus text-seeded noise."""

    def __init__(self, bases: np.ndarray) -> None:
        self.bases = bases

    @property
    def model_id(self) -> str:
        return f"planted-{DIM}"

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            match = _CLUSTER.match(text)
            first_line = text.split("\n", 1)[0]  # the content: keywords added by a merge keep the vector
            seed = int.from_bytes(hashlib.blake2b(first_line.encode(), digest_size=8).digest(), "little")
            noise = np.random.default_rng(seed).standard_normal(DIM)
            noise /= np.linalg.norm(noise)
            base = self.bases[int(match.group(1))] if match else np.zeros(DIM)
            vec = base + NOISE * noise
            out[row] = vec / np.linalg.norm(vec)
        return out


def plant(n: int, dup_share: float, near_share: float, seed: int = 7
          ) -> tuple[list[Note], np.ndarray, dict[str, int]]:
    """``n`` notes, ``dup_share`` of them planted duplicates; returns notes, bases, note -> fact."""
    rng = np.random.default_rng(seed)
    pyrng = random.Random(seed)
    n_dups = int(round(n * dup_share))
    n_facts = n - n_dups
    bases = rng.standard_normal((n_facts, DIM))
    bases /= np.linalg.norm(bases, axis=1, keepdims=True)
    # near misses: fact j+1 is bent towards fact j (cosine NEAR_BASE_COSINE) for a share of facts
    near = pyrng.sample(range(0, n_facts - 1, 2), int(near_share * n_facts / 2))
    for j in near:
        orth = bases[j + 1] - (bases[j + 1] @ bases[j]) * bases[j]
        orth /= np.linalg.norm(orth)
        bases[j + 1] = NEAR_BASE_COSINE * bases[j] + np.sqrt(1 - NEAR_BASE_COSINE ** 2) * orth
    facts = list(range(n_facts))
    extra: dict[int, int] = {}
    while sum(extra.values()) < n_dups:
        f = pyrng.randrange(n_facts)
        if extra.get(f, 0) < 2:
            extra[f] = extra.get(f, 0) + 1
    members = facts + [f for f, k in sorted(extra.items()) for _ in range(k)]
    pyrng.shuffle(members)
    category = {f: CATEGORIES[pyrng.randrange(len(CATEGORIES))] for f in range(n_facts)}
    for j in near:  # a near miss shares its neighbour's category: a real test of precision
        category[j + 1] = category[j]
    notes: list[Note] = []
    truth: dict[str, int] = {}
    # A duplicate repeats its fact's words (in another order): with words of its own it would
    # state other values, another fact that no merge joins (amem.write.values).
    fact_words: dict[int, list[str]] = {}
    for i, fact in enumerate(members):
        nid = f"n{i:06d}"
        if fact not in fact_words:
            fact_words[fact] = [f"w{pyrng.randrange(5000)}" for _ in range(pyrng.randrange(4, 12))]
        order = list(fact_words[fact])
        pyrng.shuffle(order)
        words = " ".join(order)
        notes.append(Note(id=nid, content=f"[f{fact}] {words}", agent_id="bench",
                          category=category[fact], timestamp=f"2026-01-01T00:{i % 60:02d}:00+00:00"))
        truth[nid] = fact
    ids = [note.id for note in notes]
    for note in notes:
        note.links = sorted({pyrng.choice(ids) for _ in range(2)} - {note.id})
    return notes, bases, truth


def _load(store: MemoryStore, notes: list[Note]) -> None:
    for start in range(0, len(notes), 1000):
        chunk = notes[start:start + 1000]
        vectors = store.index.embed_passages([n.embed_text() for n in chunk])
        store.index.write_points([store.index.make_point(n, v) for n, v in zip(chunk, vectors)])
    store.flush()


def _broken_links(store: MemoryStore) -> int:
    notes = {n.id: n for n, _ in store.iter_notes(agent_id="bench", include_inactive=True)}
    return sum(1 for n in notes.values() if n.is_active for t in n.links
               if t == n.id or t not in notes or not notes[t].is_active)


def measure(n: int, *, dup_share: float, near_share: float) -> dict[str, Any]:
    notes, bases, truth = plant(n, dup_share, near_share)
    embedder = PlantedEmbedder(bases)
    store = MemoryStore(config=load_config(overrides={"agent_id": "bench"}), embedder=embedder,
                        clock=ManualClock("2026-03-01T00:00:00+00:00"),
                        backend=EdgeBackend.temporary(DIM))
    try:
        started = time.perf_counter()
        _load(store, notes)
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        scanned = sum(1 for _ in store.iter_notes(all_agents=True, with_vectors=True))
        scroll_s = time.perf_counter() - started
        started = time.perf_counter()
        report = store.consolidate(all_agents=True)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        again = store.consolidate(all_agents=True)
        second_s = time.perf_counter() - started
        merged = report.agents["bench"].merged
        correct = sum(1 for loser, survivor in merged if truth[loser] == truth[survivor])
        planted = n - len(set(truth.values()))
        return {
            "notes": n, "scanned": scanned, "planted_duplicates": planted,
            "near_miss_fact_pairs": int(near_share * (n - planted) / 2), "pairs": report.pairs,
            "merges": report.merges, "correct_merges": correct,
            "precision": round(correct / report.merges, 4) if report.merges else None,
            "recall": round(correct / planted, 4) if planted else None,
            "links_rewritten": report.links_rewritten, "broken_links_after": _broken_links(store),
            "indexed_first": report.indexed_first,
            "load_s": round(load_s, 2), "scroll_s": round(scroll_s, 2),
            "consolidate_s": round(first_s, 2), "second_run_s": round(second_s, 2),
            "second_run_merges": again.merges,
            "consolidate_over_scroll": round(first_s / scroll_s, 1),
            "second_run_over_scroll": round(second_s / scroll_s, 1),
        }
    finally:
        store.close()


def run(quick: bool = False, *, sizes: Sequence[int] | None = None, full: bool = False,
        dup_share: float = 0.1, near_share: float = 0.1) -> dict[str, Any]:
    """Measure every size; ``quick`` = 2k notes, default 10k, ``full`` adds 100k."""
    if sizes is None:
        sizes = [2_000] if quick else ([10_000, 100_000] if full else [10_000])
    results = [measure(n, dup_share=dup_share, near_share=near_share) for n in sizes]
    return {
        "benchmark": "consolidate", "vectors": f"synthetic planted unit vectors, {DIM}-d",
        "backend": "edge (qdrant-edge, embedded)", "dup_share": dup_share,
        "near_share": near_share, "threshold": 0.75, "results": results,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "loadavg": [round(x, 2) for x in os.getloadavg()]},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2k notes (a smoke run)")
    parser.add_argument("--full", action="store_true", help="also 100k notes (several minutes)")
    parser.add_argument("--sizes", type=int, nargs="+", help="note counts to measure")
    parser.add_argument("--dup-share", type=float, default=0.1, help="share of planted duplicates")
    parser.add_argument("--near-share", type=float, default=0.1,
                        help="share of facts with a near-miss neighbour fact")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if not 0 <= args.dup_share < 0.5 or not 0 <= args.near_share <= 1:
        parser.error("--dup-share must lie in [0, 0.5) and --near-share in [0, 1]")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = run(args.quick, sizes=args.sizes, full=args.full, dup_share=args.dup_share,
                 near_share=args.near_share)
    print(write_result(result, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
