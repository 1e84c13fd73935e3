"""Supersede judges: the offline rule, or an LLM (which falls back to the rule, visibly)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from dataclasses import replace as with_field
from typing import Any, Mapping, Protocol, Sequence

from ..enrich.base import OFFLINE_FALLBACK, llm_label
from ..errors import ValidationError
from ..kernel.llm import LLM
from .rule import FactView, change_sentence, changes, partly, sentences, unlabelled

log = logging.getLogger(__name__)

#: the offline label of a verdict
OFFLINE = "offline"

@dataclass
class Verdict:
    """Which candidates the new note replaces, who decided, and what went wrong."""

    ids: list[str]
    decided_by: str
    warnings: list[str] = field(default_factory=list)
    #: older notes the new one changes in part, each with the clauses it leaves standing:
    #: not hidden, but listed after the new note (``amem.supersede.marks.check``)
    partly: dict[str, list[str]] = field(default_factory=dict)


class SupersedeJudge(Protocol):
    """Decides which older notes a new note replaces."""

    @property
    def label(self) -> str: ...

    def judge(self, new: FactView, older: Sequence[FactView]) -> Verdict: ...


class Meaning(Protocol):
    """How alike texts are by meaning: the embedder's note-to-note similarity
    (``amem.similarity``: 0 unrelated, 1 identical)."""

    def similarities(self, text: str, others: Sequence[str]) -> list[float]: ...


class RuleJudge:
    """The offline rule as a judge.

    The rule is read by words first (subject, a change stated, a shared topic); a pair that
    passes is then asked whether the two are about the same thing by meaning, the better of
    the two notes' similarity (``FactView.similarity``) and that of the sentence stating the
    change to the closest sentence of the older note (with ``meaning``; a chat turn is about
    several things). Below ``SAME_THING`` nothing is hidden: a miss costs a stale answer next
    to the current one, a false hide a true fact nobody sees.
    """

    label = OFFLINE

    def __init__(self, meaning: Meaning | None = None) -> None:
        self.meaning = meaning

    def judge(self, new: FactView, older: Sequence[FactView]) -> Verdict:
        whole: list[str] = []
        part: dict[str, list[str]] = {}
        for o in older:
            if not (changes(new, o, semantic=False) and changes(new, self._measured(new, o))):
                continue
            kept = partly(new, o)
            if kept:  # the older note tells more than the change: shown, after the new one
                part[o.id] = kept
            else:
                whole.append(o.id)
        return Verdict(whole, OFFLINE, partly=part)

    def _measured(self, new: FactView, old: FactView) -> FactView:
        """``old`` with its similarity to ``new`` at its best: the two notes without their
        leading labels (a shared "Infra:" says nothing about meaning), or the sentence stating
        the change against the closest sentence of the older note."""
        if self.meaning is None:
            return old
        found = change_sentence(unlabelled(new.content.strip()))
        parts = sentences(old.content)
        if found is None or not parts:
            return old
        best = max(self.meaning.similarities(unlabelled(new.content.strip()),
                                             [unlabelled(old.content.strip())]))
        best = max(best, *self.meaning.similarities(found[1], parts))
        return with_field(old, similarity=best)


SYSTEM = (
    "You maintain a person's long-term memory. A NEW note was just written. For each OLDER "
    "note, decide whether the NEW note replaces the fact the OLDER note states about the same "
    "person or thing, so the OLDER note is no longer true (a change: moved, switched, stopped, "
    "a new job). Answer false when both can be true at once, when the NEW note adds detail, "
    "or when they are about different people or topics. Reply with JSON only.")
SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["verdicts"],
    "properties": {"verdicts": {"type": "array", "items": {
        "type": "object", "required": ["candidate", "replaces"],
        "properties": {"candidate": {"type": "integer"}, "replaces": {"type": "boolean"}}}}}}


def prompt(new: FactView, older: Sequence[FactView]) -> str:
    lines = [f"NEW ({new.timestamp or 'undated'}): {new.content[:2000]}", "", "OLDER notes:"]
    lines += [f"{n}. ({o.timestamp or 'undated'}) {o.content[:1000]}"
              for n, o in enumerate(older, 1)]
    lines += ["", 'Reply as {"verdicts": [{"candidate": 1, "replaces": true}, ...]} with one '
              "entry per OLDER note."]
    return "\n".join(lines)


class LLMJudge:
    """One LLM call per new note; the offline rule on any failure (visible in the verdict)."""

    def __init__(self, llm: LLM, meaning: Meaning | None = None) -> None:
        self.llm = llm
        self.fallback = RuleJudge(meaning)

    @property
    def label(self) -> str:
        return llm_label(str(self.llm.model))

    def judge(self, new: FactView, older: Sequence[FactView]) -> Verdict:
        if not older:
            return Verdict([], self.label)
        try:
            reply = self.llm.complete_json(SYSTEM, prompt(new, older), schema=SCHEMA,
                                           name="supersede_verdicts")
            ids, warnings = self._read(reply, older)
        except ValidationError:
            raise
        except Exception as exc:  # noqa: BLE001 - the optional LLM step falls back, visibly
            reason = (f"LLM supersede check failed ({type(exc).__name__}: "
                      f"{' '.join(str(exc).split())[:300]}); used the offline rule")
            log.warning("%s", reason)
            verdict = self.fallback.judge(new, older)
            return Verdict(verdict.ids, OFFLINE_FALLBACK, [reason], partly=verdict.partly)
        # the rule's guard holds for the model too: an older note that also tells facts the
        # change is not about is not hidden whole (``rule.partly``)
        by_id = {o.id: o for o in older}
        part = {i: kept for i in ids if (kept := partly(new, by_id[i]))}
        return Verdict([i for i in ids if i not in part], self.label, warnings, partly=part)

    @staticmethod
    def _read(reply: Mapping[str, Any], older: Sequence[FactView]) -> tuple[list[str], list[str]]:
        said: dict[int, bool] = {}
        invented: list[int] = []
        for entry in reply["verdicts"]:
            n = int(entry["candidate"])
            if 1 <= n <= len(older):
                said.setdefault(n, bool(entry["replaces"]))
            else:
                invented.append(n)
        warnings = []
        if invented:
            warnings.append(f"the LLM judged candidate(s) {invented[:5]} that do not exist; "
                            "ignored")
        missing = [n for n in range(1, len(older) + 1) if n not in said]
        if missing:
            warnings.append(f"the LLM gave no supersede verdict for candidate(s) {missing}; "
                            "kept as current")
        return [older[n - 1].id for n in range(1, len(older) + 1) if said.get(n)], warnings


def judge_for(llm: LLM | None, meaning: Meaning | None = None) -> SupersedeJudge:
    """The LLM judge when an LLM is configured, else the offline rule (both read ``meaning``:
    the rule itself, the LLM judge in its fallback)."""
    return RuleJudge(meaning) if llm is None else LLMJudge(llm, meaning)


__all__ = ["LLMJudge", "Meaning", "OFFLINE", "RuleJudge", "SCHEMA", "SYSTEM", "SupersedeJudge", "Verdict",
           "judge_for", "prompt"]
