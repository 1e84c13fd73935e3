"""benchmarks.sentences_sim's parts: the sentence split, the best row per note, and late
chunking's sentence vectors read off one encoder run of the default embedder."""

from __future__ import annotations

from typing import Any

import numpy as np

from amem.embed import make_embedder
from benchmarks.datasets import Doc
from benchmarks.sentences_sim import best_of, late_vectors, sentences


def test_a_turn_splits_into_its_sentences_with_date_and_speaker() -> None:
    doc = Doc("D1:1", "Melanie: Wow, Caroline! That's great! I just signed up for a pottery "
                      "class yesterday. It's like therapy for me.", date_label="3 July 2023")
    text, parts = sentences(doc)
    assert text.startswith("[3 July 2023] Melanie: Wow, Caroline!")
    # "Wow, Caroline!" and "That's great!" are under three words: not indexed alone
    assert parts == ["[3 July 2023] Melanie: I just signed up for a pottery class yesterday.",
                     "[3 July 2023] Melanie: It's like therapy for me."]
    short = Doc("D1:2", "Caroline: Thanks, Mel!", date_label=None)
    assert sentences(short) == ("Caroline: Thanks, Mel!", ["Caroline: Thanks, Mel!"])


def test_best_of_takes_each_notes_best_row_per_query() -> None:
    scores = np.array([[0.1, 0.9], [0.5, 0.2], [0.3, 0.4]])
    owner = np.array([0, 0, 1])
    assert best_of(owner, scores, 3).tolist() == [[0.5, 0.9], [0.3, 0.4], [-1.0, -1.0]]


def test_late_vectors_stand_for_their_own_sentence() -> None:
    raw = make_embedder("e5-small")
    text = ("[3 July 2023] Melanie: I just signed up for a pottery class yesterday. "
            "The quarterly tax report is due to the accountant on Friday.")
    pottery, tax = late_vectors(raw, text)
    assert np.isclose(np.linalg.norm(pottery), 1.0) and np.isclose(np.linalg.norm(tax), 1.0)
    asks = raw.embed(["Who took a pottery class?", "When is the tax report due?"], kind="query")
    # the span a question is about scores higher for it than the other span of the same run
    # (absolutely both lean to the whole turn: e5's token states carry the passage's context)
    assert float(pottery @ asks[0]) > float(tax @ asks[0])
    assert float(tax @ asks[1]) > float(pottery @ asks[1])


def test_sentence_legs_score_the_dense_side_and_reach_the_engine_for_the_rest() -> None:
    """The in-store wrapper: with ``whole`` a search ranks as the plain store does; with
    ``sentences`` a note is scored by its best sentence's vector."""
    from amem import MemoryStore, load_config
    from amem.backends.edge import EdgeBackend
    from amem.embed.hashing import HashingEmbedder
    from benchmarks.sentences_sim import SentenceLegs

    embedder = HashingEmbedder(dim=128)
    texts = {"a": "Melanie: Wow, great news! I signed up for a pottery class yesterday.",
             "b": "Caroline: The pottery exhibit was great news for the town museum.",
             "c": "Melanie: We went camping with the kids last weekend."}
    config = load_config(overrides={"heat": False, "link_expansion": False})
    ranked: dict[str | None, Any] = {}
    for scoring in ("whole", "sentences", None):
        inner = EdgeBackend.temporary(embedder.dim)
        backend = SentenceLegs(inner, scoring) if scoring else inner
        with MemoryStore(config=config, embedder=embedder, backend=backend) as store:
            store.add_many([{"text": t, "id": i} for i, t in texts.items()], enrich=False)
            if isinstance(backend, SentenceLegs):
                rows = {}
                for h in inner.iterate(None):
                    parts = [p.strip() for p in h.payload["content"].split("!")]
                    rows[h.id] = (embedder.embed([h.payload["content"]])[0],
                                  embedder.embed([p for p in parts if p]))
                backend.index(rows)
            query = "I signed up for a pottery class yesterday."
            ranked[scoring] = [(r.id, round(r.score, 6)) for r in store.search(query, limit=3)]
            dense = store.index.backend.search_legs(embedder.embed([query], kind="query")[0],
                                                    None, None, 3).dense
            ranked[f"{scoring} dense"] = {h.payload.get("id", h.id): h.score for h in dense}
    assert ranked["whole"] == ranked[None]  # the wrapper scoring whole vectors is the store
    a_whole, a_best = ranked["whole dense"]["a"], ranked["sentences dense"]["a"]
    assert a_best > a_whole  # the pottery sentence alone is nearer the question than the turn
