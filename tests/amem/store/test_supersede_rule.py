"""The offline supersede rule measured on a labelled set: real LoCoMo turns and written pairs.

``tests/fixtures/supersede_pairs.json`` holds the labels (see its ``about``). The LoCoMo pairs
are read from the shared benchmark data by dia_id (never copied into the project); without
that file only the written pairs are measured. The rule was tuned while this set was written,
so these are figures on the tuning set: they hold the rule to what it does, a fall below the
thresholds is a regression, and the LoCoMo half (real turns, mostly hard negatives: the same
speaker, the same topic, words like "now", "still", "started") is the part that says how it
behaves on text nobody wrote for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from amem.embed import Embedder, make_embedder
from amem.supersede import FactView, RuleJudge, change_marker, replaces, same_subject
from benchmarks.datasets import BENCHDATA
from benchmarks.supersede_judge_bench import (EmbedderMeaning, load_changes, load_turns,
                                              rule_tally, third_person)

PAIRS = Path(__file__).resolve().parents[2] / "fixtures" / "supersede_pairs.json"
LOCOMO = BENCHDATA / "locomo_dev.json"


def _labelled() -> dict[str, Any]:
    return dict(json.loads(PAIRS.read_text(encoding="utf-8")))


def _written() -> list[tuple[FactView, FactView, bool]]:
    rows = []
    for p in _labelled()["written"]:
        old = FactView("old", p["old"], tuple(p.get("old_subjects", p["subjects"])))
        rows.append((old, FactView("new", p["new"], tuple(p["subjects"])), bool(p["replaces"])))
    return rows


def _locomo() -> list[tuple[FactView, FactView, bool]]:
    samples = {s["sample_id"]: s for s in json.loads(LOCOMO.read_text(encoding="utf-8"))}
    rows = []
    for p in _labelled()["locomo"]:
        conv = samples[p["sample"]]["conversation"]
        turns = {t["dia_id"]: t for key, session in conv.items()
                 if key.startswith("session_") and isinstance(session, list) for t in session}
        old, new = turns[p["old"]], turns[p["new"]]
        assert old["speaker"] == new["speaker"]
        rows.append((FactView("old", old["text"], (old["speaker"],)),
                     FactView("new", new["text"], (new["speaker"],)), bool(p["replaces"])))
    return rows


@pytest.fixture(scope="module")
def e5() -> Embedder:
    """The default embedder: the rule's meaning gate is on its note-to-note scale."""
    return make_embedder("e5-small")


def _scores(rows: list[tuple[FactView, FactView, bool]],
            embedder: Embedder) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of the rule as a store runs it:
    the judge with the embedder's meaning, each older note with its similarity to the new."""
    meaning = EmbedderMeaning(embedder)
    judge = RuleJudge(meaning)
    tp = fp = fn = 0
    for old, new, label in rows:
        measured = FactView(old.id, old.content, old.subjects,
                            similarity=meaning.similarities(new.content, [old.content])[0])
        said = bool(judge.judge(new, [measured]).ids)
        tp += said and label
        fp += said and not label
        fn += label and not said
    return tp, fp, fn


def test_written_pairs_precision_and_recall(e5: Embedder) -> None:
    rows = _written()
    assert sum(label for _, _, label in rows) >= 15 and sum(not lab for _, _, lab in rows) >= 15
    tp, fp, fn = _scores(rows, e5)
    precision, recall = tp / max(1, tp + fp), tp / max(1, tp + fn)
    assert precision >= 0.95, (tp, fp, fn)
    assert recall >= 0.8, (tp, fp, fn)


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared benchdata absent")
def test_real_locomo_turns_few_false_alarms(e5: Embedder) -> None:
    rows = _locomo()
    tp, fp, fn = _scores(rows, e5)
    negatives = sum(not label for _, _, label in rows)
    # precision first: at most one of the 15 real look-alikes (same speaker, same topic) is
    # taken for a change; the one real change (a job lost after a new job) is found
    assert fp <= 1 and negatives >= 15, (tp, fp, fn)
    assert tp >= 1 and fn == 0, (tp, fp, fn)


def words(new: FactView, old: FactView) -> bool:
    """The rule by words alone (its meaning gate is measured with the embedder above)."""
    return replaces(new, old, semantic=False)


def test_the_rule_reads_negation_additions_and_other_people() -> None:
    old = FactView("o", "Bob works at Google", ("Bob",))
    assert words(FactView("n", "Bob left his job at Google", ("Bob",)), old)
    assert not words(FactView("n", "Bob won't quit his job", ("Bob",)), old)
    assert change_marker("I never stopped reading") is None
    assert not words(FactView("n", "Bob also works at a startup now", ("Bob",)), old)
    sister = FactView("n", "Alice's sister moved to Berlin", ("Alice",))
    assert not same_subject(sister, FactView("o", "Alice lives in Paris", ("Alice",)))
    # first-person notes without subjects are the user's: names in them are objects
    assert words(FactView("n", "I use VS Code instead of Vim these days"),
                    FactView("o", "I use Vim for all my editing"))
    assert not words(FactView("n", "Alice now drinks tea"), FactView("o", "I drink coffee"))


def test_a_possessive_name_is_the_name_unless_a_relative_follows_it() -> None:
    """Notes without subjects name theirs in the text, often in the possessive: "Mia's phone
    number" is about Mia, so "Mia has a new phone number" replaces it (before, "mia's" and
    "mia" were two names and nothing was replaced). "Alice's sister lives in Rome" is about
    the sister: it keeps its possessive and shares no subject with "Alice moved to Lisbon"."""
    mia = FactView("o", "Mia's phone number is 555-0101")
    assert same_subject(FactView("n", "Mia has a new phone number: 555-0199"), mia)
    assert words(FactView("n", "Mia has a new phone number: 555-0199"), mia)
    assert words(FactView("n", "Tom sold his car last week"),
                 FactView("o", "Tom\u2019s car is a red Golf"))  # a typographic apostrophe too
    moved = FactView("n", "Alice moved to Lisbon")
    for sister in ("Alice's sister lives in Rome", "Alice\u2019s sister lives in Rome"):
        assert not same_subject(moved, FactView("o", sister))
        assert not words(moved, FactView("o", sister))
    # a note that names its subjects is read by them, as before
    assert not same_subject(FactView("n", "Mia has a new phone number", ("Ken",)),
                            FactView("o", "Mia's phone number is 555-0101", ("Mia",)))


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared benchdata absent")
def test_no_false_hide_among_the_dev_turns_noted_in_the_third_person(e5: Embedder) -> None:
    """The LoCoMo pairs give each turn its speaker as subject, so the names path above never
    runs on them; noted in the third person without subjects ("Jon lost Jon's job"), every
    same-speaker pair goes through it. Measured at 0 yes in 187,112 pairs before and after
    possessives were read as names (benchmarks.supersede_judge_bench --voice third)."""
    turns = {k: [third_person(t) for t in conv] for k, conv in load_turns(LOCOMO).items()}
    tally = rule_tally(turns, [], e5)
    assert tally.pairs > 180_000
    assert tally.false == 0, sorted(tally.said)


@pytest.mark.skipif(not LOCOMO.exists(), reason="shared benchdata absent")
def test_precision_over_every_same_speaker_pair_and_recall_of_real_changes(e5: Embedder) -> None:
    """Every turn against every earlier turn of its speaker (187,112 pairs): real changes are
    rare in chat, so nearly every yes is a false hide. Issue 24 asks for at most one false hide
    per 1,000 pairs; the words-only rule of issue 16 said yes to 16 pairs, 15 of them false.
    Recall on ``tests/fixtures/supersede_changes.json`` (real changes of dev-data facts) holds
    at its measured level (``benchmarks.supersede_judge_bench``): a fall is a regression."""
    turns = load_turns(LOCOMO)
    tally = rule_tally(turns, load_changes(turns), e5)
    assert tally.pairs > 180_000
    assert ("conv-41", "D25:1", "D28:1") in tally.said  # the real change among them
    assert tally.false <= 1, sorted(tally.said)
    assert 1000 * tally.false / tally.pairs <= 1.0
    assert tally.labelled >= 20 and tally.found / tally.labelled >= 0.85, tally.to_dict()


def test_a_shared_leading_label_is_no_shared_topic(e5: Embedder) -> None:
    """Issue 24, item 1: two notes of one subject sharing only a label before a colon."""
    old = FactView("o", "Staging database: runs PostgreSQL 16 on db-staging-2", ("infra",))
    new = FactView("n", "Staging database: we switched the team chat to Matrix", ("infra",))
    meaning = EmbedderMeaning(e5)
    measured = FactView("o", old.content, old.subjects,
                        similarity=meaning.similarities(new.content, [old.content])[0])
    assert RuleJudge(meaning).judge(new, [measured]).ids == []
    assert not words(new, old)  # the label is not a topic by words either


def test_an_older_note_with_other_facts_is_changed_in_part_not_hidden(e5: Embedder) -> None:
    """A newer note that changes one of an older note's facts hides none of them: the older
    note stays shown (listed after the newer) for the facts that still hold. Only a clause
    with a value of its own (a number, a name) counts: chat around a change does not."""
    from amem.supersede.rule import changes, partly

    judge = RuleJudge(EmbedderMeaning(e5))
    moved = FactView("n", "The staging database moved to db-2.internal on Monday", ("infra",))
    both = FactView("o", "The staging database runs PostgreSQL 16 on db-staging-2; backups happen "
                    "nightly at 03:00 UTC.", ("infra",))
    alone = FactView("a", "The staging database runs PostgreSQL 16 on db-staging-2.", ("infra",))
    assert changes(moved, both, semantic=False) and not replaces(moved, both, semantic=False)
    assert partly(moved, both) == ["backups happen nightly at 03:00 UTC."]
    said = judge.judge(moved, [both, alone])
    assert said.ids == ["a"] and said.partly == {"o": ["backups happen nightly at 03:00 UTC."]}
    # colour around the change is no other fact ("My team has been super encouraging")
    job = FactView("j", "I'm really enjoying my new job. My team has been super encouraging and "
                   "inspiring.", ("John",))
    lost = FactView("l", "I lost my job at the mechanical engineering company.", ("John",))
    assert partly(lost, job) == [] and replaces(lost, job, semantic=False)
    # a place named beside the change is one ("I've been to Paris yesterday")
    studio = FactView("s", "I'm on the hunt for the ideal spot for my dance studio. Oh, I've been to "
                      "Paris yesterday!", ("Jon",))
    found = FactView("f", "I'm no longer hunting for a spot for my dance studio: it moved into a "
                     "space on Harbor Street.", ("Jon",))
    assert partly(found, studio) == ["Oh, I've been to Paris yesterday!"]
