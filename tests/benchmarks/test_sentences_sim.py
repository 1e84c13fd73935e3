"""benchmarks.sentences_sim's parts: the sentence split, the best row per note, and late
chunking's sentence vectors read off one encoder run of the default embedder."""

from __future__ import annotations

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
