"""The CMRC benchmark can give each sentence its article's title (``--source-title``), and the
retrieval benchmark runs once per embedding realization (``--realizations``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import retrieval
from benchmarks.datasets import Corpus, Doc, Query, load_cmrc
from benchmarks.retrieval import (_bm25_tokens, baseline_views, halves, source_fields,
                                  titled_text)
from amem.notes import compose_embed_text

#: two articles in CMRC's SQuAD layout; the answer to the first question lies in a sentence
#: that does not name its subject (as "他于...毕业于..." in the real data)
ARTICLES = {"version": "test", "data": [
    {"id": "A", "title": "楼曾瑞", "paragraphs": [{"id": "A1", "context":
        "楼曾瑞是香港数学家。他于1981年毕业于香港中文大学数学系。",
        "qas": [{"id": "q0", "question": "楼曾瑞毕业于哪个大学？",
                 "answers": [{"text": "香港中文大学", "answer_start": 16}]}]}]},
    {"id": "B", "title": "", "paragraphs": [{"id": "B1", "context":
        "陈大文毕业于北京大学。陈大文是作家。",
        "qas": [{"id": "q1", "question": "陈大文的职业是什么？",
                 "answers": [{"text": "作家", "answer_start": 15}]}]}]}]}


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    path = tmp_path / "cmrc.json"
    path.write_text(json.dumps(ARTICLES, ensure_ascii=False), encoding="utf-8")
    return path


def test_each_sentence_knows_its_article_title_and_each_question_its_paragraph(data: Path) -> None:
    (corpus,) = load_cmrc(data)
    assert [(d.id, d.source) for d in corpus.docs] == [
        ("p0s0", "楼曾瑞"), ("p0s1", "楼曾瑞"), ("p1s0", None), ("p1s1", None)]
    assert [(q.relevant, q.part) for q in corpus.queries] == [({"p0s1"}, 0), ({"p1s1"}, 1)]
    (whole,) = load_cmrc(data, unit="paragraph")
    assert [d.source for d in whole.docs] == ["楼曾瑞", None]


def test_the_title_goes_to_the_field_the_mode_names_and_nowhere_without_one() -> None:
    doc = Doc("p0s1", "他于1981年毕业于香港中文大学数学系。", source="楼曾瑞")
    assert source_fields(doc, "off") == {}
    assert source_fields(doc, "tag") == {"tags": ["楼曾瑞"]}
    assert source_fields(doc, "keyword") == {"keywords": ["楼曾瑞"]}
    assert source_fields(doc, "subject") == {"subjects": ["楼曾瑞"]}
    assert source_fields(doc, "text") == {}
    assert titled_text(doc, doc.text, "text") == "楼曾瑞：他于1981年毕业于香港中文大学数学系。"
    assert titled_text(doc, doc.text, "keyword") == doc.text
    untitled = Doc("p1s0", "陈大文是作家。")
    assert source_fields(untitled, "keyword") == {}
    assert titled_text(untitled, untitled.text, "text") == untitled.text


def test_baselines_get_the_title_as_the_store_does() -> None:
    """BM25: the title's tokens the sentence lacks, once; dense: the store's embedded text."""
    named = Doc("a", "楼曾瑞是数学家。", source="楼曾瑞")
    bare = Doc("b", "他毕业于大学。", source="楼曾瑞")
    corpus = Corpus("c", [named, bare])
    texts = {d.id: d.text for d in corpus.docs}
    plain_tokens, plain_dense = baseline_views(corpus, texts, "off", chinese=True)
    tokens, dense = baseline_views(corpus, texts, "keyword", chinese=True)
    title = _bm25_tokens("楼曾瑞", chinese=True)
    assert title and set(title) & set(plain_tokens[0])  # the named sentence shares a token
    assert tokens[0] == plain_tokens[0] + [t for t in title if t not in plain_tokens[0]]
    assert tokens[1] == plain_tokens[1] + title  # the bare one gets every title token, once
    assert len(set(tokens[1])) == len(tokens[1])
    assert plain_dense == [named.text, bare.text]
    assert dense == [compose_embed_text(named.text, ["楼曾瑞"], [], ""),
                     compose_embed_text(bare.text, ["楼曾瑞"], [], "")]
    assert dense[1].endswith("Keywords: 楼曾瑞") and dense[0] == named.text
    subject_tokens, subject_dense = baseline_views(corpus, texts, "subject", chinese=True)
    assert subject_tokens == tokens  # the store counts a subject's terms as a keyword's
    assert subject_dense == [named.text, bare.text + "\nSubjects: 楼曾瑞"]


def test_halves_by_document_split_the_questions_of_the_first_and_second_half() -> None:
    queries = [Query(f"q{i}", {f"d{i}"}, "all", part=i) for i in range(4)]
    corpus = Corpus("c", [], queries)
    ranked = [["d0"], ["x"], ["d2"], ["d3"]]  # the second question misses
    out = halves([corpus], {"store": [ranked]})["store"]
    assert out["first"]["hit@1"] == 0.5 and out["first"]["n"] == 2
    assert out["second"]["hit@1"] == 1.0
    assert out["a"]["hit@1"] == 1.0 and out["b"]["hit@1"] == 0.5
    no_parts = halves([Corpus("l", [], [Query("q", {"d"}, "1")])], {"store": [[["d"]]]})
    assert set(no_parts["store"]) == {"a"}


def test_the_store_ranks_the_sentence_without_its_subject_first_with_the_title(
        data: Path, tmp_path: Path) -> None:
    out = {}
    for mode in ("off", "keyword"):
        out[mode] = tmp_path / f"{mode}.json"
        assert retrieval.main(["cmrc", "--data", str(data), "--embedder", "hashing",
                               "--source-title", mode, "--no-baselines", "--out", str(out[mode])]) == 0
    plain = json.loads(out["off"].read_text())
    titled = json.loads(out["keyword"].read_text())
    assert titled["settings"]["source_title"] == "keyword"
    assert plain["results"]["store"]["all"]["hit@1"] == 0.5  # the named sentence wins
    assert titled["results"]["store"]["all"]["hit@1"] == 1.0


def test_a_title_needs_the_cmrc_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert retrieval.parse_args(["cmrc"]).source_title == "off"
    assert retrieval.main(["locomo", "--source-title", "tag"]) == 2
    assert "--source-title tag needs the cmrc task" in capsys.readouterr().err


def test_realizations_run_once_each_and_report_the_spread(
        data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "spread.json"
    assert retrieval.main(["cmrc", "--data", str(data), "--embedder", "hashing", "--no-baselines",
                           "--cache", str(tmp_path / "cache"), "--realizations", "0,2",
                           "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    runs = result["realizations"]
    assert [runs[k]["settings"]["realization"] for k in ("0", "2")] == [0, 2]
    # the hashing embedder has no batch noise: both realizations read the same
    assert result["spread"]["store"]["all hit@1"] == [0.5, 0.5]
    assert "| store | all hit@1 | 0.500 | 0.500 | 0.000 |" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "hashing-v1-d64.alone.npz", "hashing-v1-d64.with2.npz"]  # a cache file each


def test_the_spread_is_each_figure_per_realization() -> None:
    def result(hit1: float) -> dict[str, Any]:
        return {"results": {"store": {"all": {"hit@1": hit1, "hit@10": 0.9, "MRR": 0.7}},
                            "bm25": {"all": {"hit@1": 0.5}}}}
    rows = retrieval.spread("cmrc", {0: result(0.70), 1: result(0.72)})
    assert rows["store"]["all hit@1"] == [0.70, 0.72]
    assert rows["bm25"] == {"all hit@1": [0.5, 0.5]}  # figures a method lacks are left out
    assert "| store | all hit@1 | 0.700 | 0.720 | 0.020 |" in retrieval.spread_table(
        "cmrc", {0: result(0.70), 1: result(0.72)})
    for bad in ("4", "0,0", "x", ""):
        with pytest.raises(SystemExit):
            retrieval.parse_args(["locomo", "--realizations", bad])
