"""Offline keyword extraction: English, Chinese, Japanese, Korean, speakers, determinism, quiet jieba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amem.enrich import extract_keywords
from amem.enrich.english import STOPWORDS
from amem.enrich.keywords import analyse, speaker_names, split_speaker, word_key

ROOT = Path(__file__).resolve().parents[3]

TECH = ("The deploy to production failed because the Qdrant collection was created with the wrong vector size "
        "(384 instead of 768). Fix: recreate the Qdrant collection and re-embed all notes with the e5 model.")
DIALOGUE = ("[1:56 pm on 8 May, 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.\n"
            "[1:58 pm on 8 May, 2023] Melanie: Wow Caroline, that support group sounds amazing! I painted a lake "
            "sunrise last week.")
CHINESE = "我们的项目上线时间推迟到下周五，因为数据库迁移还没有完成，需要和客户沟通新的截止日期。"
JAPANESE = "機械学習モデルのデプロイにはDockerとKubernetesを使います。サーバーの設定を確認してください。"
KOREAN = "저는 어제 친구와 함께 서울에서 한국 음식을 먹었어요. 비빔밥이 정말 맛있었어요."


def test_english_keywords_are_the_specific_terms() -> None:
    kws = extract_keywords(TECH)
    assert kws[0] == "Qdrant collection"  # a name-like phrase that occurs twice
    joined = " ".join(kws).lower()
    for term in ("vector size", "e5 model", "deploy"):
        assert term in joined
    for generic in ("instead", "the", "with", "all", "384"):
        assert generic not in [k.lower() for k in kws]


def test_keywords_never_include_stop_words_or_bare_numbers() -> None:
    assert extract_keywords("it was so and then we had been there with them 2023 12 7") == []
    for kw in extract_keywords(TECH + " " + DIALOGUE):
        assert kw.lower() not in STOPWORDS
        assert not kw.isdigit()


def test_speaker_names_and_timestamps_are_not_keywords() -> None:
    assert speaker_names(DIALOGUE) == {"Caroline", "Melanie"}
    kws = extract_keywords(DIALOGUE)
    lowered = [k.lower() for k in kws]
    assert "caroline" not in lowered and "melanie" not in lowered  # also when named in the body
    assert not any(k in lowered for k in ("may", "pm", "1:56"))
    assert "LGBTQ support group" in kws
    assert any("sunrise" in k for k in lowered)


def test_labels_are_not_speakers() -> None:
    assert split_speaker("Note: the build uses uv") == ("Note", "the build uses uv")
    assert speaker_names("Note: the build uses uv\nTODO: pin numpy") == frozenset()
    assert split_speaker("http://example.com: not a speaker") == (None, "http://example.com: not a speaker")


def test_chinese_keywords_by_jieba_tfidf() -> None:
    kws = extract_keywords(CHINESE)
    assert {"数据库", "上线", "迁移"} <= set(kws)
    assert all(len(k) >= 2 for k in kws)
    assert not {"我们", "因为", "需要"} & set(kws)


def test_japanese_kana_and_korean_hangul_do_not_vanish() -> None:
    ja = extract_keywords(JAPANESE)
    assert "機械学習モデル" in ja and "デプロイ" in ja and "サーバー" in ja
    assert "Kubernetes" in ja
    ko = extract_keywords(KOREAN)
    assert "서울" in ko and "비빔밥" in ko and "친구" in ko  # particles stripped: 친구와 -> 친구
    assert not any(k.endswith("요") for k in ko)


def test_mixed_text_keeps_the_main_language_first() -> None:
    kws = extract_keywords("We benchmarked the Qdrant embedded engine against SQLite FTS on a laptop (数据库).")
    assert kws[0] in ("Qdrant", "Qdrant embedded engine", "SQLite FTS")
    assert "数据库" in kws


def test_word_key_folds_plurals_and_possessives() -> None:
    assert word_key("Caroline's") == "caroline"
    assert word_key("libraries") == "library"
    assert word_key("notes") == "note"
    assert word_key("watches") == "watch"
    assert word_key("analysis") == "analysis"
    assert word_key("class") == "class"


def test_limit_is_respected() -> None:
    long_text = " ".join(f"Term{i} zebra{i} gizmo{i}." for i in range(30))
    assert len(extract_keywords(long_text, limit=5)) == 5
    assert len(analyse(long_text).keywords) == 8


def test_deterministic_across_processes_and_jieba_is_quiet() -> None:
    """Same keywords in two fresh interpreters with different hash seeds; nothing printed."""
    script = ("import json, sys\nfrom amem.enrich import OfflineEnricher\n"
              "e = OfflineEnricher()\n"
              "texts = json.loads(sys.stdin.read())\n"
              "print(json.dumps([[list(r.keywords), list(r.tags), r.context, r.category]"
              " for r in map(e.enrich, texts)], ensure_ascii=False))\n")
    texts = json.dumps([TECH, DIALOGUE, CHINESE, JAPANESE, KOREAN])
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", script], input=texts, capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""  # jieba's "Building prefix dict..." must not leak
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    in_process = [extract_keywords(t) for t in json.loads(texts)]
    assert [o[0] for o in outs[0]] == in_process


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", "12 34 56"])
def test_no_keywords_from_nothing(text: str) -> None:
    assert extract_keywords(text) == []


def test_a_text_is_read_once_and_the_callers_keywords_are_their_own() -> None:
    """One read of a text serves every later step (enrichment, the link rule, evolution, the
    supersession judge); the keyword list handed to a caller is a copy, so changing it cannot
    change what the next step reads."""
    text = "Caroline: I joined the pottery class at the community centre in Boston."
    first = analyse(text)
    assert analyse(text) is first  # shared: the second step pays no second read
    assert analyse(text, limit=3) is not first and len(analyse(text, limit=3).keywords) <= 3
    mine = extract_keywords(text)
    mine.append("not a keyword")
    assert "not a keyword" not in analyse(text).keywords
    assert extract_keywords(text) == first.keywords


def test_a_read_of_what_is_not_text_fails_as_before() -> None:
    with pytest.raises((TypeError, AttributeError)):
        analyse(["not", "a", "string"])  # type: ignore[arg-type]
