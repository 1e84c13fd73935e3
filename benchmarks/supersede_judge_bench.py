"""Precision and recall of the supersede judges on the LoCoMo dev conversations (issue 24).

    python -m benchmarks.supersede_judge_bench                      # e5-small, the tables
    python -m benchmarks.supersede_judge_bench --json out.json
    python -m benchmarks.supersede_judge_bench --voice third        # notes about the speaker

* **Precision set**: every pair (earlier turn, later turn) by the same speaker of the three dev
  conversations (``../shared/benchdata/locomo_dev.json``): 187,112 pairs, the speaker the
  pair's subject. Chat states a change rarely, so nearly every yes is a false hide; the known
  real change (conv-41 D25:1 -> D28:1, in the recall set) is not counted as false.
* **Recall set**: ``tests/fixtures/supersede_changes.json``, real changes of facts the dev
  turns state (moves, job changes, preference switches), each named by its dialog ids.
* ``--voice third``: both sets with every turn noted as an agent would note it about its
  speaker ("Jon lost Jon's job"), without a subject, so the rule finds the subject by the
  names in the text (``same_subject``'s names path, which the speaker-as-subject pairs never
  reach).

Each judge sees what the store would give it: the two texts, the speaker as subject, and the
older note's note-to-note similarity to the newer one (``amem.similarity``, the embedder's
calibrated scale, as ``amem.supersede.candidates`` fills it from the engine's cosine). The LLM
judge runs its real prompt and reply parsing against two fakes: ``careful`` answers as a
careful model would (yes only for a labelled change: an oracle, so its figures measure what
reaches the model: the subject and similarity gates and the nearest-candidate cut), and
``credulous`` says yes to every candidate of a note that states a change (a careless model:
its false hides are those the gates let through). The LLM judge sees only the nearest
``CANDIDATES`` earlier same-speaker notes above ``CANDIDATE_FLOOR``, as in the store.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from amem.similarity import cosine_baseline, note_similarity
from amem.supersede import (CANDIDATE_FLOOR, CANDIDATES, FactView, LLMJudge, RuleJudge,
                            change_marker, replaces)
from amem.supersede.rule import changes as states_change

from .datasets import DEFAULT_LOCOMO

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = DEFAULT_LOCOMO
CHANGES = ROOT / "tests" / "fixtures" / "supersede_changes.json"
#: the real change among the natural pairs (also in the recall set): not a false hide
KNOWN_CHANGES = frozenset({("conv-41", "D25:1", "D28:1")})


@dataclass
class Turn:
    sample: str
    dia_id: str
    speaker: str
    text: str
    #: the store knows the speaker as the note's subject (False: ``--voice third``'s notes,
    #: whose subject only the names in the text tell)
    named: bool = True


#: a speaker's first person and what it becomes in a note about them, longest forms first
_FIRST_PERSON = tuple((re.compile(pattern), form) for pattern, form in (
    (r"\bI(?:'|’)m\b|\bI am\b", "{name} is"), (r"\bI was\b", "{name} was"),
    (r"\bI(?:'|’)ve\b|\bI have\b", "{name} has"), (r"\bI(?:'|’)ll\b", "{name} will"),
    (r"\bI(?:'|’)d\b", "{name} would"), (r"\bI\b", "{name}"),
    (r"\b(?:[Mm]y|[Mm]ine)\b", "{name}'s"), (r"\b(?:[Mm]e|[Mm]yself)\b", "{name}")))


def third_person(turn: Turn) -> Turn:
    """``turn`` as an agent would note it about its speaker: the first person replaced by the
    speaker's name ("I lost my job" -> "Jon lost Jon's job"), no subject given. Verbs keep
    their form ("Jon go"); the rule reads words, and the names path of ``same_subject`` is
    what this exercises: the LoCoMo notes, each with its speaker as subject, never reach it."""
    text = turn.text
    for pattern, form in _FIRST_PERSON:
        text = pattern.sub(form.format(name=turn.speaker), text)
    return Turn(turn.sample, turn.dia_id, turn.speaker, text, named=False)


def load_turns(path: Path = LOCOMO) -> dict[str, list[Turn]]:
    """Each conversation's turns in session order."""
    out: dict[str, list[Turn]] = {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sessions = sorted((k for k, v in conv.items() if k.startswith("session_")
                           and isinstance(v, list)), key=lambda k: int(k.split("_")[1]))
        out[sample["sample_id"]] = [Turn(sample["sample_id"], t["dia_id"], t["speaker"],
                                         t["text"]) for k in sessions for t in conv[k]]
    return out


def load_changes(turns: dict[str, list[Turn]], path: Path = CHANGES
                 ) -> list[tuple[Turn, Turn, str]]:
    """The recall set as (older turn, newer turn, kind); a written newer note is a Turn with
    ``dia_id`` ``"<old>+written"``."""
    rows = []
    for p in json.loads(path.read_text(encoding="utf-8"))["pairs"]:
        by_id = {t.dia_id: t for t in turns[p["sample"]]}
        old = by_id[p["old"]]
        new = (by_id[p["new"]] if "new" in p
               else Turn(p["sample"], f"{p['old']}+written", old.speaker, p["new_text"]))
        if new.speaker != old.speaker:
            raise ValueError(f"pair {p}: the two turns have different speakers")
        rows.append((old, new, str(p["kind"])))
    return rows


Similarity = Callable[[Sequence[str]], np.ndarray]


@dataclass
class Tally:
    """One judge's yes counts."""

    pairs: int = 0
    said: set[tuple[str, str, str]] = field(default_factory=set)
    #: pairs judged a change in part: the older note stays shown, listed after the newer
    partly: set[tuple[str, str, str]] = field(default_factory=set)
    false: int = 0
    found: int = 0
    labelled: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)

    def change(self, kind: str, found: bool) -> None:
        """Count one labelled change of ``kind``, and whether the judge found it."""
        self.labelled += 1
        self.found += found
        counts = self.by_kind.setdefault(kind, [0, 0])
        counts[0] += found
        counts[1] += 1

    def to_dict(self) -> dict[str, Any]:
        per_1000 = 1000.0 * self.false / self.pairs if self.pairs else None
        return {"pairs": self.pairs, "yes_on_natural_pairs": len(self.said),
                "partly_on_natural_pairs": len(self.partly),
                "partly_examples": sorted(self.partly)[:10],
                "false_hides": self.false,
                "false_hides_per_1000": None if per_1000 is None else round(per_1000, 4),
                "recall": round(self.found / self.labelled, 3) if self.labelled else None,
                "found": self.found, "labelled": self.labelled,
                "recall_by_kind": {k: f"{v[0]}/{v[1]}" for k, v in sorted(self.by_kind.items())},
                "false_examples": sorted(self.said - KNOWN_CHANGES)[:20]}


def vectors_for(embedder: Any, texts: Sequence[str]) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(texts))
    vecs = np.asarray(embedder.embed(unique, kind="passage"), dtype=np.float32) if unique else []
    return {t: v for t, v in zip(unique, vecs)}


def _view(turn: Turn, ident: str, similarity: float | None = None) -> FactView:
    return FactView(ident, turn.text, (turn.speaker,) if turn.named else (),
                    similarity=similarity)


class EmbedderMeaning:
    """``amem.supersede.Meaning`` over a (cached) embedder, as ``IndexMeaning`` in a store."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.baseline = cosine_baseline(embedder)

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        vecs = np.asarray(self.embedder.embed([text, *others], kind="passage"))
        return [note_similarity(float(np.dot(vecs[0], v)), self.baseline) for v in vecs[1:]]


def rule_tally(turns: dict[str, list[Turn]], changes: list[tuple[Turn, Turn, str]],
               embedder: Any, *, semantic: bool = True) -> Tally:
    """The offline rule (``RuleJudge``, as a store builds it) over every same-speaker pair and
    the recall set; ``semantic=False`` is the words-only rule. The rule reads words first, so
    only the pairs it would say yes to by words need vectors."""
    meaning = EmbedderMeaning(embedder)
    judge = RuleJudge(meaning)
    tally = Tally()

    def verdict(old: Turn, new: Turn) -> str:
        """"whole", "partly" or "no"."""
        nv, ov = _view(new, "n"), _view(old, "o")
        if not semantic:
            return "whole" if replaces(nv, ov, semantic=False) else "no"
        if not states_change(nv, ov, semantic=False):
            return "no"
        sim = meaning.similarities(new.text, [old.text])[0]
        said = judge.judge(nv, [_view(old, "o", sim)])
        return "whole" if said.ids else "partly" if said.partly else "no"

    def says(old: Turn, new: Turn) -> bool:
        return verdict(old, new) == "whole"

    for conv in turns.values():
        for i, new in enumerate(conv):
            earlier = [t for t in conv[:i] if t.speaker == new.speaker]
            tally.pairs += len(earlier)
            if change_marker(new.text) is None:
                continue  # no pair of this turn can pass
            for old in earlier:
                said = verdict(old, new)
                key = (new.sample, old.dia_id, new.dia_id)
                if said == "whole":
                    tally.said.add(key)
                    tally.false += key not in KNOWN_CHANGES
                elif said == "partly":
                    tally.partly.add(key)
    for old, new, kind in changes:
        hit = says(old, new)
        tally.change(kind, hit)
    return tally


class FakeJudgeLLM:
    """An LLM for the supersede prompt: ``careful`` says yes only to labelled changes (by the
    two texts), ``credulous`` to every candidate of a new note that states a change."""

    def __init__(self, positives: set[tuple[str, str]], *, careful: bool) -> None:
        self.positives = {(o[:1000], n[:2000]) for o, n in positives}
        self.careful = careful
        self.model = "fake-careful" if careful else "fake-credulous"
        self.calls = 0

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        raise AssertionError("the supersede judge asks for JSON only")

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        self.calls += 1
        head, _, rest = user.partition("\n\nOLDER notes:\n")
        new = re.sub(r"^NEW \([^)]*\): ", "", head, count=1)
        older = [re.sub(r"^\d+\. \([^)]*\) ", "", line)
                 for line in rest.split("\n\nReply as")[0].splitlines() if line.strip()]
        verdicts = []
        for n, old in enumerate(older, 1):
            yes = ((old, new) in self.positives if self.careful
                   else change_marker(new) is not None)
            verdicts.append({"candidate": n, "replaces": yes})
        return {"verdicts": verdicts}


def llm_tally(turns: dict[str, list[Turn]], changes: list[tuple[Turn, Turn, str]],
              embedder: Any, llm: FakeJudgeLLM) -> Tally:
    """The LLM judge over every same-speaker pair, seeing the candidates the store would give
    it (the nearest earlier same-speaker notes above the floor), and over the recall set."""
    baseline = cosine_baseline(embedder)
    judge = LLMJudge(llm)
    tally = Tally()
    for conv in turns.values():
        vec = vectors_for(embedder, [t.text for t in conv])
        for i, new in enumerate(conv):
            earlier = [t for t in conv[:i] if t.speaker == new.speaker]
            tally.pairs += len(earlier)
            pool = _nearest(new, earlier, vec, baseline)
            if not pool:
                continue
            verdict = judge.judge(_view(new, "new"), [_view(o, o.dia_id, s) for o, s in pool])
            for dia in verdict.ids:
                key = (new.sample, dia, new.dia_id)
                tally.said.add(key)
                tally.false += key not in KNOWN_CHANGES
    for old, new, kind in changes:
        conv = turns[old.sample]
        upto = [t for t in conv if t.speaker == old.speaker]
        if not new.dia_id.endswith("+written"):
            upto = upto[:[t.dia_id for t in upto].index(new.dia_id)]
        vec = vectors_for(embedder, [t.text for t in upto] + [new.text])
        pool = _nearest(new, upto, vec, baseline)
        verdict = judge.judge(_view(new, "new"), [_view(o, o.dia_id, s) for o, s in pool])
        hit = old.dia_id in verdict.ids
        tally.change(kind, hit)
    return tally


def _nearest(new: Turn, earlier: Sequence[Turn], vec: dict[str, np.ndarray],
             baseline: float) -> list[tuple[Turn, float]]:
    """The ``CANDIDATES`` nearest earlier notes at or above ``CANDIDATE_FLOOR`` (as
    ``amem.supersede.candidates``), with their note similarity."""
    if not earlier:
        return []
    sims = [(t, note_similarity(float(np.dot(vec[t.text], vec[new.text])), baseline))
            for t in earlier if t.text != new.text]
    sims.sort(key=lambda ts: -ts[1])
    return [(t, s) for t, s in sims[:CANDIDATES] if s >= CANDIDATE_FLOOR]


def run(embedder: Any, path: Path = LOCOMO, voice: str = "first") -> dict[str, Any]:
    """Every judge's tally; ``voice`` "third": every note in the third person, without subject
    (:func:`third_person`)."""
    turns = load_turns(path)
    changes = load_changes(turns)
    if voice == "third":
        turns = {k: [third_person(t) for t in conv] for k, conv in turns.items()}
        changes = [(third_person(o), third_person(n), kind) for o, n, kind in changes]
    positives = {(o.text, n.text) for o, n, _ in changes}
    out: dict[str, Any] = {"embedder": embedder.model_id, "voice": voice}
    started = time.perf_counter()
    out["rule_words_only"] = rule_tally(turns, changes, embedder, semantic=False).to_dict()
    out["rule"] = rule_tally(turns, changes, embedder).to_dict()
    for careful in (True, False):
        llm = FakeJudgeLLM(positives, careful=careful)
        tally = llm_tally(turns, changes, embedder, llm)
        out[f"llm_{llm.model}"] = {**tally.to_dict(), "llm_calls": llm.calls}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--data", type=Path, default=LOCOMO)
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "out" / "embcache")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--voice", choices=("first", "third"), default="first",
                        help="third: each turn noted in the third person without a subject "
                             "(the names path of the rule's subject test)")
    args = parser.parse_args(argv)
    from amem.embed import make_embedder

    from .embcache import CachedEmbedder

    embedder = CachedEmbedder(make_embedder(args.embedder), args.cache)
    out = run(embedder, args.data, args.voice)
    embedder.save()
    print("| judge | yes on natural pairs | false hides (per 1,000 pairs) | recall | by kind "
          "| changed in part (shown, listed after) |")
    print("|---|---|---|---|---|---|")
    for name in ("rule_words_only", "rule", "llm_fake-careful", "llm_fake-credulous"):
        t = out[name]
        print(f"| {name} | {t['yes_on_natural_pairs']} of {t['pairs']} | {t['false_hides']} "
              f"({t['false_hides_per_1000']}) | {t['found']}/{t['labelled']} = {t['recall']} | "
              f"{t['recall_by_kind']} | {t.get('partly_on_natural_pairs', 0)} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
