"""Step 4b3 (``amem.search.subject``): past the subject a Chinese question names, what it asks
decides among the sentences about that subject."""

from __future__ import annotations

import math
import time

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed import make_embedder
from amem.embed.hashing import HashingEmbedder
from amem.search.subject import (SUBJECT_MAX_CHARS, asked_terms, lift_by, question_subject)
from amem.text import tokenize

#: an article of our own, in the shape of an encyclopaedia's: the first sentence names the
#: subject, the one that answers does not
SATELLITE = [
    "星河一号气象卫星是中国航天科技集团研制的一颗极轨气象卫星，服务于国家气象中心。",
    "卫星于2003年5月在太原卫星发射中心由长征四号火箭发射升空，设计寿命为8年。",
    "它搭载了多通道扫描辐射计和微波湿度计，每天两次覆盖全球。",
    "星河一号气象卫星退役后，其业务由星河二号接替。",
]
OTHERS = [
    "青松湖国家公园位于云南省西北部，面积约为1200平方公里。",
    "公园内栖息着滇金丝猴和黑颈鹤等珍稀动物。",
    "青松湖国家公园每年十月至次年三月为观鸟季节。",
    "白鹭书院是南宋时期创办的一所书院，位于江西省吉安市。",
    "书院的首任山长是理学家欧阳守道。",
    "白鹭书院在清末改为新式学堂，现为省级文物保护单位。",
]


def test_the_subject_is_the_longest_start_a_text_holds() -> None:
    texts = ["星河一号气象卫星是一颗极轨气象卫星。", "设计寿命为8年。"]
    assert question_subject("星河一号气象卫星的设计寿命是多少年？", texts) == "星河一号气象卫星"
    assert question_subject("月亮有多远？", texts) == ""  # not even two characters held
    # the question's other terms, none of the subject's
    terms = asked_terms("星河一号气象卫星的设计寿命是多少年？", "星河一号气象卫星")
    assert "寿命" in terms and "设计" in terms
    assert not set(terms) & set(tokenize("星河一号气象卫星"))
    assert asked_terms("星河一号气象卫星的设计寿命是多少年？", "") == []


def test_a_long_question_held_by_a_long_note_stops_at_a_name_s_length() -> None:
    """A question copied from the start of a long note is looked for a name's length at most,
    not once per character of it."""
    note = "甲" * 100_000
    started = time.process_time()
    assert question_subject("甲" * 5_000, [note] * 5) == "甲" * SUBJECT_MAX_CHARS
    assert time.process_time() - started < 1.0


def test_the_lift_is_a_z_score_over_the_head_and_the_rest_keeps_its_place() -> None:
    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    moved = lift_by(ranked, {"b": 3.0}, 1.0, head=3)
    assert [item for item, _ in moved] == ["b", "a", "c", "d"]
    values = [0.0, 3.0, 0.0]
    mean = sum(values) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 3)
    assert dict(moved)["b"] == pytest.approx(
        1 / (1 + math.exp(-(math.log(0.8 / 0.2) + (3.0 - mean) / std))))
    assert moved[3] == ("d", 0.6)
    # nobody holds what is asked, or everybody alike: nothing moves
    assert lift_by(ranked, {}, 1.0, head=3) == ranked
    assert lift_by(ranked, {"a": 1.0, "b": 1.0, "c": 1.0}, 1.0, head=3) == ranked


def _first(store: MemoryStore, question: str) -> str:
    return store.search(question, limit=3, expand_links=False)[0].id


def test_with_the_default_embedder_the_sentence_that_answers_passes_the_one_naming_the_subject(
        ) -> None:
    notes = [{"text": text, "id": f"s{i}", "enrich": False} for i, text in enumerate(SATELLITE)]
    notes += [{"text": text, "id": f"o{i}", "enrich": False} for i, text in enumerate(OTHERS)]
    embedder = make_embedder("e5-small")
    firsts = {}
    for lift in (0.0, 0.5):
        config = load_config(overrides={"heat": False, "subject_lift": lift})
        with MemoryStore(":memory:", config=config, embedder=embedder) as store:
            store.add_many(notes)
            firsts[lift] = [_first(store, q) for q in (
                "星河一号气象卫星的设计寿命是多少年？", "白鹭书院的首任山长是谁？")]
    # without the step the sentence naming the satellite comes first; with it, the answer
    assert firsts[0.0][0] == "s0"
    assert firsts[0.5][0] == "s1"
    # where the answer came first already, it stays
    assert firsts[0.0][1] == firsts[0.5][1] == "o4"
    assert load_config().subject_lift == 0.5  # the default measured


def test_a_question_without_han_characters_and_rrf_fusion_are_left_as_they_were() -> None:
    notes = [{"text": t, "id": f"n{i}", "enrich": False} for i, t in enumerate([
        "What did Maria cook on Sunday? A lasagne, she said.",
        "What did Maria plant in spring? Tomatoes and basil in the garden.",
        "Maria planted tomatoes in spring and cooked a lasagne.",
    ])]
    orders = {}
    for name, overrides in (("off", {"subject_lift": 0.0}), ("on", {}),
                            ("rrf off", {"fusion": "rrf", "subject_lift": 0.0}),
                            ("rrf on", {"fusion": "rrf"})):
        config = load_config(overrides={"heat": False, **overrides})
        with MemoryStore(":memory:", config=config, embedder=HashingEmbedder()) as store:
            store.add_many(notes)
            orders[name] = [[r.id for r in store.search(q, limit=3, expand_links=False)]
                            for q in ("What did Maria plant in spring?", "星河一号 寿命")]
    assert orders["on"] == orders["off"]
    assert orders["rrf on"] == orders["rrf off"]
