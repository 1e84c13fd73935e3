"""Where the RAM goes: writing N notes, opening an N-note store, and searching it (edge engine).

    python -m benchmarks.memory_bench --size 100000                 # build, open, search
    python -m benchmarks.memory_bench --size 100000 --with-model    # the default model loaded too
    python -m benchmarks.memory_bench --open /path/to/store         # only open + search a store
    python -m benchmarks.memory_bench --open DIR --table            # as `amem serve` opens it
    python -m benchmarks.memory_bench --large 1000000 --keep DIR    # build a big store (resumable)

Every step runs in a fresh child process:

* ``build``: tiny unique notes (``open_bench``'s) imported with ``import_file(enrich=False)``
  and the hashing embedder at 384-d (the default model's size; its ~150 MB are counted only
  with ``--with-model``, which loads it and embeds a few texts before the import), then
  ``optimize()`` (the HNSW build, in the engine's own child process). Reports the process's
  peak RSS (VmHWM) and the interpreter's RSS before the import.
  The index builds run in child processes (the bulk write's builds on a copy, and
  ``optimize()``): a thread samples each build child's ``/proc/<pid>/status`` (``RssAnon``,
  ``RssFile``) and ``smaps`` split every ``SAMPLE_S``, and reports the largest sample, split
  like the open's (the segment the engine is writing shows as ``builder:<component>``).
* ``open``: ``MemoryStore(path)``, then 100 searches. Reports RSS after the open and after the
  searches, each split per engine component from ``/proc/self/smaps`` (the file each mapped
  page belongs to: dense vectors, quantized vectors, HNSW graph, sparse index, payload
  storage, each payload index, id tracker, WAL) plus the anonymous memory (the heap: what
  the engine loaded into RAM rather than mapped, and Python's own).

``--large`` writes through the store's index in chunks of half the store's segment limit
(``EdgeBackend.segment_points``, ``SEGMENT_SHARE``; what a bulk import's growth trigger does),
each followed by ``optimize()``: the build children's peak is that of a bounded segment plus
the store loaded. ``--one-build`` writes everything, then builds once (one plain segment of
every point: the build's peak follows the store's size).

File-backed pages are page cache the kernel can take back under pressure; they still count
in RSS once touched, which is why a component kept "on disk" (memory-mapped, not populated
at load) shows here only by what the searches touched.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from benchmarks._util import run_child
from benchmarks.open_bench import write_notes

DIM = 384
SEARCHES = 100
_QUERY_WORDS = ["tea", "deploy", "garden", "invoice", "bicycle", "allergy", "birthday", "kernel"]
_UUID = re.compile(r"/segments/[0-9a-f-]{36}/")
#: the segment an optimizer is writing (moved into ``segments/`` when done)
_BUILDER = re.compile(r"/temp_segments/[^/]+/")
#: seconds between two samples of a build child
SAMPLE_S = 0.5


def _status_mb(*keys: str) -> dict[str, float]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key = line.split(":", 1)[0]
            if key in keys:
                out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


def component(path: str) -> str | None:
    """The engine component a mapped file belongs to (None: not a store file); a segment
    being built is ``builder:<component>``."""
    building = _BUILDER.search(path)
    if building is not None:
        inner = component(path[:building.start()] + "/segments/" + "0" * 36 + "/"
                          + path[building.end():])
        return f"builder:{inner}"
    match = _UUID.search(path)
    if match is None:
        return "wal" if "/shard/wal/" in path else None
    rest = path[match.end():]
    head = rest.split("/", 1)[0]
    if head == "payload_index":
        name = rest.split("/")[1] if "/" in rest else "config"
        parts = name.split("-")
        # <hash>-<first 8 chars of the field>-<kind>: the field and the index kind
        return f"payload_index:{parts[1]}-{parts[-1]}" if len(parts) >= 3 else "payload_index:other"
    if head.startswith("vector_storage-") and "quantized" in rest:
        return f"quantized-{head.split('-', 1)[1]}"
    if "id_tracker" in head:
        return "id_tracker"
    return head


def smaps_split(pid: int | str = "self") -> dict[str, float]:
    """Resident MB per component of the store's mapped files, plus ``anon`` and ``other_file``.

    A file mapped twice counts twice, as in RSS (the engine's segment builder maps its
    vector and payload files twice: ``builder:*`` shows about twice their size)."""
    rss: dict[str, float] = defaultdict(float)
    current: str | None = "anon"
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as smaps:
        for line in smaps:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) > 5 else ""
                if not path or path.startswith("["):
                    current = "anon"
                else:
                    current = component(path) or "other_file"
            elif first == "Rss:":
                rss[current or "anon"] += int(line.split()[1]) / 1024
    return {k: round(v, 1) for k, v in sorted(rss.items(), key=lambda kv: -kv[1]) if v >= 0.05}


def _children() -> set[int]:
    """The pids of this process's children (every thread's)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return pids


class BuildSampler:
    """Samples this process's children (the index build's) while it runs; ``peak()`` is the
    largest sample (``VmRSS``), with its ``RssAnon``/``RssFile`` and smaps split.

    ``VmHWM`` of a child is read at each sample, so a peak between two samples still shows
    there (the process's own high-water mark); ``RUSAGE_CHILDREN`` gives the same maximum once
    the children have ended.
    """

    def __init__(self, every: float = SAMPLE_S) -> None:
        self.every = every
        self.samples = 0
        self.children: set[int] = set()
        self._peak: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="build-sampler", daemon=True)

    def __enter__(self) -> BuildSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            for pid in _children():
                try:
                    status = _status_of(pid)
                    if "VmRSS" not in status:  # a zombie: its memory is gone
                        continue
                    if status["VmRSS"] > self._peak.get("VmRSS", -1.0):
                        split = smaps_split(pid)
                        self._peak = {**status, "pid": pid, "smaps": split}
                    else:
                        self._peak["VmHWM"] = max(self._peak.get("VmHWM", 0.0), status["VmHWM"])
                except (OSError, ValueError):  # it ended between the listing and the read
                    continue
                self.children.add(pid)
                self.samples += 1

    def peak(self) -> dict[str, Any]:
        """The largest sample since the start (or the last ``take``)."""
        return dict(self._peak, children=len(self.children), samples=self.samples)

    def take(self) -> dict[str, Any]:
        """``peak()``, then start over (one build's peak at a time)."""
        out, self._peak = self.peak(), {}
        return out


def _status_of(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


def _load_model() -> dict[str, Any]:
    from amem.embed import make_embedder

    before = _status_mb("VmRSS")["VmRSS"]
    model = make_embedder()
    model.embed(["warm the model up with a few texts"] * 8, kind="passage")
    return {"model": model.model_id, "model_rss_mb": round(_status_mb("VmRSS")["VmRSS"] - before, 1)}


def child_build(store: Path, src: Path, with_model: bool) -> dict[str, Any]:
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.importer import import_file

    out: dict[str, Any] = _load_model() if with_model else {}
    out["rss_before_mb"] = _status_mb("VmRSS")["VmRSS"]
    started = time.perf_counter()
    with BuildSampler() as sampler, MemoryStore(store, embedder=HashingEmbedder(DIM)) as memory:
        report = import_file(memory, src, enrich=False)
        out["import_s"] = round(time.perf_counter() - started, 1)
        out["import_builds"] = memory.index.build.runs
        out["after_import"] = _status_mb("VmRSS", "VmHWM", "RssAnon", "RssFile")
        optimizing = time.perf_counter()
        memory.optimize()
        out["optimize_s"] = round(time.perf_counter() - optimizing, 1)
        out["segments"] = _segments(memory)
    out["created"] = report.created
    out["peak_rss_mb"] = _status_mb("VmHWM")["VmHWM"]
    # the builds run in child processes of their own (the import's on a copy, optimize()'s):
    # their peak apart, and the largest sample split
    out["build_child_peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    out["build_child_peak_sample"] = sampler.peak()
    return out


def _segments(memory: Any) -> int | None:
    """The engine's segment count (edge only)."""
    shard = getattr(memory.index.backend, "shard", None)
    return None if shard is None else int(shard.info().segments_count)


def child_open(store: Path, with_model: bool, table: bool = False) -> dict[str, Any]:
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.search import Searcher  # noqa: F401  (the search modules load before the store)
    from amem.text import tokenize

    tokenize("预热 warm up")  # the tokenizers' dictionaries are a fixed cost, not the store's
    out: dict[str, Any] = _load_model() if with_model else {}
    out["rss_before_mb"] = _status_mb("VmRSS")["VmRSS"]
    out["smaps_before"] = smaps_split()
    started = time.perf_counter()
    memory = MemoryStore(store, embedder=HashingEmbedder(DIM))
    out["open_s"] = round(time.perf_counter() - started, 2)
    out["after_open"] = _status_mb("VmRSS", "RssAnon", "RssFile")
    out["smaps_open"] = smaps_split()
    if table:  # as `amem serve` opens it: the ranking table filled before the searches
        started = time.perf_counter()
        memory.keep_ranking_fields(wait=3600)
        out["table_fill_s"] = round(time.perf_counter() - started, 1)
        out["table"] = memory.info().rank_table
        out["after_table"] = _status_mb("VmRSS", "RssAnon", "RssFile")
    took = []
    for i in range(SEARCHES):
        query = f"{_QUERY_WORDS[i % 8]} {_QUERY_WORDS[(i * 3) % 8]} item {i * 7 % 997}"
        t0 = time.perf_counter()
        memory.search(query, limit=10)
        took.append(time.perf_counter() - t0)
    took.sort()
    out["search_p50_ms"] = round(1000 * took[len(took) // 2], 1)
    out["after_search"] = _status_mb("VmRSS", "VmHWM", "RssAnon", "RssFile")
    out["smaps_search"] = smaps_split()
    out["points"] = memory.index.backend.count(None)
    memory.close()
    return out


def build_large(store: Path, size: int, chunk: int | None = None, *,
                one_build: bool = False, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Write ``size`` tiny notes into the store at ``store`` through its index (the points the
    importer would write: real payloads and BM25 vectors, hashing vectors), flushed every
    ``chunk`` notes and resumed from the store's count, each chunk followed by ``optimize()``
    (``one_build``: a single one at the end); the last line's figures.

    ``chunk`` defaults to ``SEGMENT_SHARE`` of the store's segment limit (``segment_points``):
    what a bulk import's growth trigger builds at that size. The importer's per-note work (dedup
    lookups, supersession checks) is skipped: at ~300 notes/s it would take an hour for 1M
    notes on this machine, and it does not change what the finished store holds.
    """
    import hashlib

    from amem import MemoryStore, index_build
    from amem.embed.hashing import HashingEmbedder
    from amem.notes import Note

    # an older tree (an A/B run) has no share: half, as this one
    share = float(getattr(index_build, "SEGMENT_SHARE", 0.5))

    words = ["tea", "deploy", "garden", "invoice", "bicycle", "allergy", "birthday", "kernel"]
    embedder = HashingEmbedder(DIM)
    builds: list[float] = []
    with BuildSampler() as sampler, MemoryStore(store, embedder=embedder) as memory:
        index = memory.index
        segment = getattr(index.backend, "segment_points", None)
        step = chunk or (int(share * segment) if isinstance(segment, int) else 50_000)
        done = index.backend.count(None)
        started = time.perf_counter()
        while done < size:
            top = min(size, done + step)
            for lo in range(done, top, 1000):
                notes = []
                for i in range(lo, min(top, lo + 1000)):
                    text = f"note {i}: {words[i % 8]} {words[(i // 8) % 8]} item {i % 997} batch {i // 997}"
                    digest = hashlib.sha256(text.encode()).hexdigest()
                    notes.append(Note(id=f"big-{i}", content=text, agent_id="default", hash=digest,
                                      timestamp="2026-12-01T00:00:00+00:00",
                                      last_accessed="2026-12-01T00:00:00+00:00",
                                      event_time="2026-12-01T00:00:00+00:00"))
                vectors = embedder.embed([n.content for n in notes], kind="passage")
                index.write_points([index.make_point(n, v) for n, v in zip(notes, vectors)])
            memory.flush()
            done = top
            line: dict[str, Any] = {"written": done, "s": round(time.perf_counter() - started),
                                    "rss_mb": _status_mb("VmRSS")["VmRSS"]}
            if not one_build or done >= size:
                optimizing = time.perf_counter()
                memory.optimize()
                builds.append(time.perf_counter() - optimizing)
                child = sampler.take()
                line.update(build_s=round(builds[-1]), segments=_segments(memory),
                            build_child={k: child.get(k) for k in ("VmHWM", "RssAnon", "RssFile")})
            say(json.dumps(line))
        last: dict[str, Any] = {"points": done, "builds": len(builds), "builds_s": round(sum(builds)),
                "segments": _segments(memory), "peak_rss_mb": _status_mb("VmHWM")["VmHWM"]}
    last["build_child_peak_rss_mb"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    last["build_child_last_sample"] = sampler.peak()
    say(json.dumps(last))
    return last


def _child(*args: str) -> dict[str, Any]:
    return run_child("benchmarks.memory_bench", *args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="notes to build (default 100k)")
    parser.add_argument("--open", help="only open and search this existing store")
    parser.add_argument("--keep", help="build the store here and keep it (default: a temp dir)")
    parser.add_argument("--large", type=int, help="build a store of this many notes at --keep")
    parser.add_argument("--with-model", action="store_true", help="load the default model first")
    parser.add_argument("--table", action="store_true",
                        help="with --open: keep the ranking table (as `amem serve` does), "
                             "filled before the searches")
    parser.add_argument("--chunk", type=int, help="with --large: notes a chunk (default: half "
                        "the store's segment limit)")
    parser.add_argument("--one-build", action="store_true",
                        help="with --large: one build at the end, not one a chunk")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args(argv)
    model = "1" if args.with_model else "0"
    if args.child:
        kind, *rest = args.child
        result = (child_build(Path(rest[0]), Path(rest[1]), rest[2] == "1") if kind == "build"
                  else child_open(Path(rest[0]), rest[1] == "1", rest[2:] == ["table"]))
        print(json.dumps(result))
        return 0
    if args.large:
        if not args.keep:
            parser.error("--large needs --keep DIR")
        if args.chunk is not None and args.chunk < 1:
            parser.error(f"--chunk must be a positive number of notes, got {args.chunk}")
        build_large(Path(args.keep), args.large, args.chunk, one_build=args.one_build,
                    say=lambda line: print(line, flush=True))
        return 0
    summary: dict[str, Any] = {"size": args.size, "with_model": args.with_model}
    if args.open:
        summary["open"] = _child("open", args.open, model, *(["table"] if args.table else []))
    else:
        with tempfile.TemporaryDirectory(prefix="amem-memory-bench-") as tmp:
            store = Path(args.keep) if args.keep else Path(tmp) / "store"
            src = Path(tmp) / "notes.jsonl"
            write_notes(src, args.size)
            summary["build"] = _child("build", str(store), str(src), model)
            print(json.dumps({"build": summary["build"]}), flush=True)
            summary["open"] = _child("open", str(store), model)
    summary["load_avg"] = round(os.getloadavg()[0], 1)
    print(json.dumps(summary["open"]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
