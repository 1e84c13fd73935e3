"""The crowded-store setting of benchmarks.retrieval: distractors that are never the evidence,
under fresh names, and a smoke run of the whole setting on a tiny slice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import retrieval
from benchmarks.crowd import crowd, renamed, speakers
from benchmarks.datasets import DEFAULT_LOCOMO, Corpus, Doc, Query, load_locomo


def _conv(name: str, a: str, b: str, turns: int) -> Corpus:
    docs = [Doc(f"D1:{i}", f"{a if i % 2 else b}: hi {b if i % 2 else a}, turn {i}",
                timestamp="2023-05-08T13:56:00", date_label="8 May 2023") for i in range(turns)]
    return Corpus(name, docs, [Query("what did Ann say?", {"D1:1"}, "1")])


def test_distractors_come_from_other_conversations_under_fresh_names() -> None:
    target, other = _conv("t", "Ann", "Bob", 4), _conv("o", "Cid", "Dee", 5)
    crowded = crowd(target, [target, other], 12)
    assert len(crowded.docs) == 12 and crowded.docs[:4] == target.docs
    extra = crowded.docs[4:]
    # two renamings of the other conversation (5 + 3 turns), never a turn of the target
    assert [d.id.split(":")[0] for d in extra] == ["x0"] * 5 + ["x1"] * 3
    assert all(":o:" in d.id for d in extra)
    names = {d.text.split(":")[0] for d in extra}
    assert names.isdisjoint({"Ann", "Bob", "Cid", "Dee"}) and len(names) == 4
    # a renaming names both speakers consistently, in the prefix and in the text
    first = extra[1].text
    speaker, rest = first.split(": ", 1)
    assert speaker in names and "Cid" not in rest and "Dee" not in rest
    # each renaming moves its dates, so renamings read as other days too
    assert extra[0].date_label != target.docs[0].date_label != extra[5].date_label
    assert crowded.queries is target.queries


def test_a_crowd_refuses_sizes_it_cannot_build() -> None:
    target = _conv("t", "Ann", "Bob", 4)
    with pytest.raises(ValueError, match="below t's own 4 notes"):
        crowd(target, [target], 3)
    with pytest.raises(ValueError, match="no other conversation"):
        crowd(target, [target], 10)
    three = Corpus("m", [Doc("D1:0", "A: x"), Doc("D1:1", "B: y"), Doc("D1:2", "C: z")])
    assert speakers(three) == ["A", "B", "C"]
    with pytest.raises(ValueError, match="3 speakers"):
        renamed(three, 0, set())


def test_crowded_locomo_never_holds_a_copy_of_the_evidence() -> None:
    corpora = load_locomo(DEFAULT_LOCOMO)
    crowded = crowd(corpora[1], corpora, 1500)
    own = {d.text for d in corpora[1].docs}
    extra = crowded.docs[len(corpora[1].docs):]
    assert len(crowded.docs) == 1500 and not own & {d.text for d in extra}
    relevant = {r for q in crowded.queries for r in q.relevant}
    assert relevant <= {d.id for d in corpora[1].docs}


@pytest.mark.skipif(not DEFAULT_LOCOMO.exists(), reason=f"benchmark data not found: {DEFAULT_LOCOMO}")
def test_smoke_run_of_the_crowded_setting(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert retrieval.main(["locomo", "--corpora", "conv-30", "--crowd", "600",
                           "--embedder", "hashing", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["settings"]["crowd"] == 600
    assert result["timings"]["per_corpus"][0]["docs"] == 600
    for method in ("store", "bm25", "dense", "rrf"):
        assert 0.0 < result["results"][method]["cat1-4"]["R@10"] <= 1.0
        assert result["per_corpus"][method]["conv-30"]["n"] == 81


def test_crowd_needs_the_locomo_task(capsys: pytest.CaptureFixture[str]) -> None:
    assert retrieval.main(["cmrc", "--crowd", "600"]) == 2
    assert "--crowd N needs the locomo task" in capsys.readouterr().err
