"""Page timings of the web inspector (``tools.ui``) at N notes: each page fetched over HTTP
from a real server, its build time read from the page's ``Server-Timing`` header.

    python -m benchmarks.ui_pages_bench --notes 1000 --notes 100000

The notes are LoCoMo turns (repeated with a counter past the data's end, or synthetic text
without the data), embedded with the hashing embedder and written as engine points, so that
100k notes build in minutes; the pages' cost is the engine's page, count and search, which
the embedder does not change (a search embeds one query). One agent holds every
note, so each page reads the largest tenant. Every page is fetched ``--repeat`` times after one
warm-up; the median and the worst are printed in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

SUBJECTS = ("caroline", "melanie", "alice", "bob", "carol", "dave", "erin", "frank")


def texts(n: int) -> list[dict[str, Any]]:
    from benchmarks.datasets import DEFAULT_LOCOMO

    turns: list[str] = []
    if DEFAULT_LOCOMO.exists():
        for sample in json.loads(DEFAULT_LOCOMO.read_text(encoding="utf-8")):
            conv = sample["conversation"]
            for k in range(1, 40):
                turns += [f"{t['speaker']}: {t['text']}" for t in conv.get(f"session_{k}", [])]
    if not turns:
        turns = [f"synthetic note about topic {i % 97} and place {i % 31}" for i in range(1000)]
    return [{"text": f"{turns[i % len(turns)]} (#{i})", "subjects": [SUBJECTS[i % len(SUBJECTS)]],
             "metadata": {"batch": str(i % 10)}} for i in range(n)]


def build(n: int, root: Path) -> tuple[Any, Any]:
    """A store of ``n`` notes written as engine points (as ``search_bench`` fills its store:
    the write path's dedup, linking and judgement would take hours at 100k and do not change
    what a page costs). Note i links to i-1 and i+7 so that neighbourhoods have edges."""
    from amem import MemoryStore
    from amem.embed.hashing import HashingEmbedder
    from amem.notes import Note, content_hash
    from lcm import LcmConfig, LcmStore

    embedder = HashingEmbedder()
    memory = MemoryStore(str(root / "notes"), embedder=embedder, agent_id="bench")
    items = texts(n)
    started = time.perf_counter()
    stamp = "2026-01-01T00:00:00+00:00"
    for at in range(0, n, 1000):
        chunk = items[at:at + 1000]
        vectors = embedder.embed([c["text"] for c in chunk], kind="passage")
        points = []
        for k, (item, vector) in enumerate(zip(chunk, vectors)):
            i = at + k
            links = [f"n{j}" for j in (i - 1, i + 7) if 0 <= j < n]
            note = Note(id=f"n{i}", content=item["text"], agent_id="bench", timestamp=stamp,
                        last_accessed=stamp, hash=content_hash(item["text"]), links=links,
                        subjects=item["subjects"], metadata=item["metadata"])
            points.append(memory.index.make_point(note, vector))
        memory.index.write_points(points)
    memory.flush()
    print(f"  built {n} notes in {time.perf_counter() - started:.0f} s", flush=True)
    lcm = LcmStore(str(root / "lcm.db"), LcmConfig(log_file_enabled=False))
    for c in range(20):
        lcm.ingest(f"agent:bench:c{c}", [{"role": "user" if i % 2 == 0 else "assistant",
                                          "content": f"conversation {c} turn {i}"} for i in range(200)])
    return memory, lcm


def measure(n: int, repeat: int, root: Path) -> dict[str, tuple[float, float]]:
    import httpx

    from tests.tools.http_server import OWNER_SECRET, running_http
    from tools import ToolFacade
    from tools.http_guard import GuardConfig
    from tools.mcp_server import OwnerAccess
    from tools.reports import plain_owner_reports

    memory, lcm = build(n, root)
    some_id = f"n{n // 2}"  # a note in the middle of the store, whatever its size
    facade = ToolFacade(memory, lcm, agent_id="bench")

    report = plain_owner_reports(memory, lcm, {"state": "never"})
    pages = {"notes": "/ui/notes", "notes page 2": None, "notes by subject": "/ui/notes?subject=alice",
             "notes by metadata": "/ui/notes?meta=batch%3D3", "notes full text": "/ui/notes?q=dog+painting",
             "search playground": "/ui/search?q=what+did+Caroline+paint", "note": f"/ui/note/{some_id}",
             "graph: neighbourhood": f"/ui/graph?note={some_id}", "graph: subject (300 nodes)": "/ui/graph?subject=alice",
             "graph: search": "/ui/graph?q=painting", "conversations": "/ui/conversations",
             "conversation": "/ui/conversation/1", "health (owner)": "/ui/health"}
    out: dict[str, tuple[float, float]] = {}
    try:  # a failed page still closes the stores (the engine flushes into a temporary folder)
        with running_http(facade, guard=GuardConfig(record_secret=OWNER_SECRET),
                          owner=OwnerAccess(report)) as url:
            root_url = url.removesuffix("/mcp")
            with httpx.Client(base_url=root_url, trust_env=False, timeout=120,
                              headers={"Authorization": f"Bearer {OWNER_SECRET}"}) as http:
                first = http.get("/ui/notes?agent=bench").text
                cursor = first.split("cursor=")[1].split("&")[0].split('"')[0] if "cursor=" in first else ""
                pages["notes page 2"] = f"/ui/notes?cursor={cursor}"
                for name, path in pages.items():
                    assert path is not None
                    sep = "&" if "?" in path else "?"
                    times = []
                    for i in range(repeat + 1):
                        res = http.get(f"{path}{sep}agent=bench")
                        assert res.status_code == 200, (name, res.status_code, res.text[:300])
                        dur = float(res.headers["server-timing"].split("dur=")[1])
                        if i:
                            times.append(dur)
                    out[name] = (statistics.median(times), max(times))
    finally:
        memory.close()
        lcm.close()
    return out


def main(argv: list[str] | None = None) -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, action="append", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    results = {}
    for n in args.notes:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"{n} notes:", flush=True)
            results[n] = measure(n, args.repeat, Path(tmp))
            for name, (median, worst) in results[n].items():
                print(f"  {name:28s} median {median:7.1f} ms   worst {worst:7.1f} ms", flush=True)


if __name__ == "__main__":
    main()
