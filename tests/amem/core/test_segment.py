"""Chinese segmentation: one loader, jieba's TF-IDF on one cut, and a cost bounded by length."""

from __future__ import annotations

from amem import segment
from amem.enrich.keywords import analyse
from amem.text import tokenize

PROSE = [
    "北京大学是中国近代第一所国立综合性大学，创办于1898年，初名京师大学堂。",
    "小明昨天在图书馆借了三本关于机器学习的书，打算下周末之前全部读完。",
    "这家公司的季度收入增长了百分之二十，主要来自云计算和人工智能服务。",
    "我对花生过敏，所以每次在外面吃饭都要先问服务员菜里有没有花生。",
]


def test_keywords_score_exactly_as_jiebas_extract_tags() -> None:
    _, analyse_mod = segment.jieba_modules()
    for text in PROSE + ["".join(PROSE) * 3]:
        ours = segment.tfidf_keywords(segment.cut(text), 20)
        assert ours == analyse_mod.extract_tags(text, topK=20, withWeight=True)


def test_long_runs_are_cut_by_the_dictionary_alone() -> None:
    jieba, _ = segment.jieba_modules()
    short = PROSE[1]
    long_run = "中" * (segment.HMM_MAX_CHARS + 1)
    assert segment.use_hmm(short) and not segment.use_hmm(long_run)
    assert segment.cut(short) == jieba.lcut(short, HMM=True)
    assert segment.cut(long_run) == jieba.lcut(long_run, HMM=False)
    assert segment.cut_for_search(long_run) == list(jieba.cut_for_search(long_run, HMM=False))


def test_a_long_degenerate_note_still_has_its_terms_and_keywords() -> None:
    text = "中" * 32000 + "。" + PROSE[3]
    terms = tokenize(text)
    assert "中中" in terms and "花生" in terms  # bigrams and dictionary words of both parts
    assert "花生" in analyse(text).keywords
