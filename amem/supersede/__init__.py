"""Supersession: a newer note that replaces an older note's fact marks it ``superseded_by``.

"Alice drinks coffee" and, weeks later, "Alice stopped coffee, she drinks tea now" are both
true notes, but only the second is the current fact; without a mark a search returns both
with similar scores. When a note is written (or edited), its nearest active notes that share
a subject with it and are not newer are put to a judge (``SupersedeJudge``):

* with an LLM configured, one call answers yes or no per candidate ("does the new note
  replace this one?"); any failure falls back to the rule below and says so (a warning,
  ``decided_by = "offline-fallback"``);
* offline, the rule (``rule.replaces``) says yes only when all of these hold, precision first:
  the two notes are about the same subject (a shared subject or name; or both name nobody,
  the user's own notes); the new note states a change ("no longer", "stopped", "switched
  to", "moved to", "instead", "now works", "lost my job", ...), not negated ("I won't
  quit") and not additive ("also", "still", "as well"); and the sentence holding the change
  shares a topic with the older note (an informative word besides names, greetings and the
  change words; for a change with a slot, "lost my job", "new home", the older note must
  state that slot, as the subject's own: "my job", not "their jobs"); a change told as
  background ("since I lost my job") or someone else's ("their new home") is no change;
  a leading label ("Infra: ...") is no shared topic. Then, by meaning: the two notes (labels
  off), or the change sentence and the closest sentence of the older note, must be more
  alike than ``SAME_THING`` on the embedder's note-to-note scale (``amem.similarity``;
  ``RuleJudge`` with a ``Meaning``). ``benchmarks.supersede_judge_bench`` measures both
  judges over every pair of same-speaker turns of the LoCoMo dev conversations (187,112
  pairs: the words-only rule of issue 16 said yes to 16, 15 of them false; this rule to 1,
  the real one) and their recall on ``tests/fixtures/supersede_changes.json``.

Candidates are the ``CANDIDATES`` nearest notes at or above ``CANDIDATE_FLOOR`` on that scale,
for either judge: a note about something else is not put to the LLM either.

An older note that also tells facts the change is not about (``rule.partly``: a clause with a
value of its own and no topic shared with the change) is never hidden whole: it is marked
``partly_superseded_by`` and stays shown, read right after the newer note (``marks``).

A yes marks the older note ``superseded_by = <new id>`` and the new one ``supersedes``, each
with an ``evolution_history`` entry (``marks``); search leaves superseded notes out unless
asked for history. Modules: ``rule`` (the offline rule), ``judges`` (rule or LLM), ``marks``
(the store side: candidates, marks, release, the nightly sweep).
"""

from __future__ import annotations

from .heal import KINDS, MarkProblem, audit, heal
from .history import chain
from .judges import (OFFLINE, SCHEMA, SYSTEM, LLMJudge, Meaning, RuleJudge, SupersedeJudge,
                     Verdict, judge_for, prompt)
from .marks import (CANDIDATE_FLOOR, CANDIDATES, IndexMeaning, Outcome, candidates,
                    changed_in_part_order, check, history_order, keep, mark, release, unmark)
from .rule import (SAME_THING, FactView, change_marker, change_sentence, replaces, same_subject,
                   view)
from .superseder import Superseder, sweep

__all__ = ["CANDIDATES", "CANDIDATE_FLOOR", "FactView", "IndexMeaning", "KINDS", "LLMJudge",
           "MarkProblem", "Meaning", "OFFLINE", "Outcome", "RuleJudge", "SAME_THING", "SCHEMA",
           "SYSTEM", "SupersedeJudge", "Superseder", "Verdict", "audit", "candidates", "chain",
           "changed_in_part_order", "check",
           "change_marker", "change_sentence", "heal", "history_order", "judge_for", "keep",
           "mark", "prompt", "release", "replaces", "same_subject", "sweep", "unmark", "view"]
