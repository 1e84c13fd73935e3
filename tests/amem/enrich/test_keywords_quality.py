"""Offline keywords and topics on real sentences: informative words and names, never a pair
led or closed by a grammar word or a verb (``alice prefers``, ``prefers-green``).

LoCoMo dialogue turns and CMRC 2018 Chinese sentences from ``../shared/benchdata`` (skipped
when the data is absent); a few literal sentences keep the rules checked without it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest

from benchmarks.datasets import BENCHDATA

from amem.enrich.english import STOPWORDS, is_verb
from amem.enrich.keywords import extract_keywords, split_speaker
from amem.enrich.offline import OfflineEnricher, normalise_tag

SHARED = BENCHDATA
LOCOMO, CMRC = SHARED / "locomo_dev.json", SHARED / "cmrc2018_dev_part.json"

#: verb forms written out here, not taken from the module under test, so a verb list that
#: lost them would fail this test
PLAIN_VERBS = frozenset("prefers preferred went joined said told thought bought decided wanted "
                        "moved loves loved gave took made got felt knew sounds".split())
#: Chinese function words (conjunctions, pronouns, directions, numerals) and a common verb
ZH_FUNCTION = frozenset("之后 之前 由于 因为 所以 但是 以及 其中 这种 这个 我们 他们 两个 一个 喜欢 "
                        "认为 觉得".split())


@lru_cache(maxsize=1)
def locomo_turns() -> list[str]:
    """Every turn of the first LoCoMo conversation as ``"<speaker>: <text>"``."""
    conv = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]["conversation"]
    return [f"{t['speaker']}: {t['text']}" for key, turns in conv.items()
            if key.startswith("session_") and isinstance(turns, list) for t in turns]


@lru_cache(maxsize=1)
def cmrc_sentences() -> list[str]:
    data = json.loads(CMRC.read_text(encoding="utf-8"))["data"][:40]
    text = "".join(p["paragraphs"][0]["context"] for p in data)
    return [s for s in re.findall(r"[^。！？；]+[。！？；]?", text) if len(s) >= 8]


def bad_edges(phrase: str, split: str = r"\s+") -> list[str]:
    """Why ``phrase`` is not a keyword: a stop word or a verb at its start or its end (words
    split at ``split``: spaces in a keyword, ``-`` in a topic made by the offline rules)."""
    words = [w for w in re.split(split, phrase) if w]
    problems = []
    for word in {words[0].lower(), words[-1].lower()}:
        if word in STOPWORDS:
            problems.append(f"{phrase!r}: stop word {word!r} at an edge")
        if (is_verb(word) or word in PLAIN_VERBS) and not phrase[:1].isupper():
            problems.append(f"{phrase!r}: verb {word!r} at an edge")
    return problems


def test_the_issue_sentence_gives_words_and_a_name() -> None:
    for text in ("Alice prefers green tea over coffee", "Alice loves green tea and coffee"):
        result = OfflineEnricher().enrich(text)
        assert "Alice" in result.keywords and "coffee" in result.keywords
        assert not [k for k in result.keywords if "prefer" in k.lower() or "love" in k.lower()]
        assert not [t for t in result.topics if "prefer" in t or t == "alice"]  # the subject


def test_multi_word_names_stay_whole() -> None:
    kws = extract_keywords("Bob is moving to New York next month to join Google.")
    assert "New York" in kws and "Google" in kws and "Bob" in kws
    assert not [k for k in kws if k.lower().startswith("join")]
    kws = extract_keywords("Melanie: I'm a fan of Bach and Mozart, and of modern music like "
                           "Ed Sheeran's \"Perfect\".")
    assert "Ed Sheeran" in kws and "Bach" in kws and "Mozart" in kws


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared benchdata absent")
def test_locomo_keywords_and_topics_have_no_grammar_or_verb_edges() -> None:
    enricher = OfflineEnricher()
    problems: list[str] = []
    keywords = 0
    for turn in locomo_turns():
        result = enricher.enrich(turn)
        keywords += len(result.keywords)
        for phrase in result.keywords:
            problems.extend(bad_edges(phrase))
        # a topic made from a keyword was checked as the keyword ("like-minded individuals")
        from_keywords = {normalise_tag(k) for k in result.keywords}
        problems.extend(p for t in result.topics if t not in from_keywords for p in bad_edges(t, "-"))
    assert keywords > 1000  # the check ran over real output
    assert problems == []


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared benchdata absent")
def test_locomo_names_are_found_and_written_as_names() -> None:
    """A name said in a turn (the partner's name, a singer, a place) is one of its keywords,
    in its capitalised form; the turn's own speaker never is."""
    enricher = OfflineEnricher()
    names = ("Caroline", "Melanie", "Sweden", "Amy Ellis Nutt", "Matt Patterson")
    said = found = 0
    for turn in locomo_turns():
        speaker, body = split_speaker(turn)
        keywords = enricher.enrich(turn).keywords
        assert speaker not in keywords
        for name in names:
            if name != speaker and re.search(rf"\b{name}\b", body):
                said += 1
                found += name in keywords
    assert said >= 40
    assert found / said >= 0.8, f"{found} of {said} names found"


@pytest.mark.skipif(not CMRC.exists(), reason="shared benchdata absent")
def test_cmrc_keywords_are_content_words_and_names() -> None:
    sentences = cmrc_sentences()
    enricher = OfflineEnricher()
    function_words: list[str] = []
    for sentence in sentences:
        keywords = enricher.enrich(sentence).keywords
        function_words.extend(k for k in keywords if k in ZH_FUNCTION)
    assert len(sentences) > 100
    assert function_words == []
    # people and places named in the passages are keywords of their sentences
    for name, sentence in (("苏镜宇", "苏镜宇原名苏博，因为婶婶认为他命中缺金，改名镜宇。"),
                           ("徐晓飞", "之后徐晓飞返回鹿屋体育大学继续深造，2012年3月毕业。")):
        assert sentence in sentences
        assert name in extract_keywords(sentence)[:3]


def test_no_verb_or_possessive_pairs_and_no_times_of_day() -> None:
    # issue 28: "password rotates", "dave laptop", "Alice closed", "near Alice" and 下午
    # ("afternoon") were keywords
    cases = {
        "The admin password rotates every 90 days": ["admin password"],
        "Dave's laptop broke yesterday": ["Dave", "laptop"],
        "The green tea shop near Alice closed": ["green tea shop", "Alice"],
        "周六下午去公园跑步": ["跑步", "公园"],
    }
    for text, expected in cases.items():
        assert extract_keywords(text) == expected, text
    for text in ("We met in the afternoon to plan the launch", "下午三点开会讨论预算",
                 "午後に会議があります", "오후에 회의가 있어요"):
        said = " ".join(extract_keywords(text)).lower()
        assert not any(w in said for w in ("afternoon", "下午", "午後", "오후")), (text, said)
