"""Step 4b3 (``amem.search.subject``) on the CMRC benchmark's data, with the default embedder
(apart from the data-free tests, so that a checkout without the data runs only this to a skip).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed import make_embedder
from benchmarks.datasets import DEFAULT_CMRC


def _first(store: MemoryStore, question: str) -> str:
    return store.search(question, limit=3, expand_links=False)[0].id


@pytest.mark.slow
def test_on_cmrc_the_store_finds_more_answers_first(tmp_path: Path) -> None:
    """The first 40 articles of CMRC 2018 (the benchmark's data; skipped without it), with the
    default embedder: the measured gain (hit@1 0.707 -> 0.744 on all 300 articles) shows in a
    part of it."""
    from benchmarks.datasets import load_cmrc
    from benchmarks.embcache import CachedEmbedder

    if not Path(DEFAULT_CMRC).is_file():
        pytest.skip(f"benchmark data not found at {DEFAULT_CMRC}")
    corpus = load_cmrc(DEFAULT_CMRC)[0]
    articles = {doc.id.split("s")[0] for doc in corpus.docs[:40 * 12]}
    docs = [d for d in corpus.docs if d.id.split("s")[0] in articles]
    held = {d.id for d in docs}
    queries = [q for q in corpus.queries if set(q.relevant) <= held]
    embedder = CachedEmbedder(make_embedder("e5-small"), tmp_path)  # embedded once for both
    hits = {}
    for lift in (0.0, 0.5):
        config = load_config(overrides={"heat": False, "subject_lift": lift})
        with MemoryStore(":memory:", config=config, embedder=embedder) as store:
            first = {d.text: d for d in reversed(docs)}  # exact repeats once
            store.add_many([{"text": d.text, "id": d.id, "enrich": False} for d in docs
                            if first[d.text] is d])
            hits[lift] = sum(_first(store, q.text) in q.relevant for q in queries) / len(queries)
    assert len(queries) > 100
    assert hits[0.5] >= hits[0.0] + 0.02, hits
