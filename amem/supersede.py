"""Supersession: a newer note that replaces an older note's fact marks it ``superseded_by``.

"Alice drinks coffee" and, weeks later, "Alice stopped coffee, she drinks tea now" are both
true notes, but only the second is the current fact; without a mark a search returns both
with similar scores. When a note is written (or edited), its nearest active notes that share
a subject with it and are not newer are put to a judge (``SupersedeJudge``):

* with an LLM configured, one call answers yes or no per candidate ("does the new note
  replace this one?"); any failure falls back to the rule below and says so (a warning,
  ``decided_by = "offline-fallback"``);
* offline, the rule (``replaces``) says yes only when all of these hold, precision first:
  the two notes are about the same subject (a shared subject or name; or both name nobody,
  the user's own notes); the new note states a change ("no longer", "stopped", "switched
  to", "moved to", "instead", "now works", "lost my job", ...), not negated ("I won't
  quit") and not additive ("also", "still", "as well"); and the sentence holding the change
  shares a topic with the older note (an informative word besides names, greetings and the
  change words; for a change with a slot, "lost my job", "new home", the older note must
  state that slot). ``tests/amem/store/test_supersede_rule.py`` measures it on a labelled
  set of real LoCoMo turns and written pairs, and over every pair of same-speaker turns of
  the LoCoMo conversations (187,112 pairs: 16 yes, most of them false alarms).

A yes marks the older note ``superseded_by = <new id>`` and the new one ``supersedes``, each
with an ``evolution_history`` entry; search leaves superseded notes out unless asked for
history. The older notes are marked first: a kill in between leaves the older note marked
and the new one without its ``supersedes`` list, which changes no search result.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

import numpy as np

from .backends.base import IsEmpty, Where
from .enrich.base import OFFLINE_FALLBACK, llm_label
from .enrich.keywords import analyse
from .errors import ValidationError
from .notes import Note, now_iso, unique
from .text import tokenize

if TYPE_CHECKING:
    from .store import MemoryStore

log = logging.getLogger(__name__)

#: nearest notes put to the judge per written note
CANDIDATES = 8
#: the offline label of a verdict
OFFLINE = "offline"

# ---------------------------------------------------------------- the offline rule

_STATE_VERB = (r"(?:lives?|living|works?|working|drinks?|drinking|eats?|eating|uses?|using|"
               r"prefers?|owns?|has|have|is|are|am|based|goes|runs?|plays?|studies|studying|"
               r"drives?|driving|teach(?:es)?|teaching|stays?|staying|rents?|takes?|wears?)")
_MARKERS = re.compile("|".join([
    r"\bno longer\b", r"\bany ?more\b", r"\bany longer\b", r"\bnot anymore\b",
    r"\bstopped\b", r"\bquit(?:ting)?\b", r"\bgave up\b", r"\bgiven up\b",
    r"\bswitched\b", r"\bswitching (?:to|from)\b", r"\bmoved (?:to|into|out|away|back|house)\b",
    r"\bmoving (?:to|into|out)\b", r"\brelocated\b", r"\binstead\b", r"\breplaced\b",
    # "used to" alone is a memory ("I used to ride horses as a kid"), not a change
    r"\bused to\b(?=[^.!?\n]*\b(?:now|but|instead|anymore|no longer)\b)", r"\bfrom now on\b",
    r"(?:^|[.!?]\s+)(?:these days|nowadays)\b",
    r"\bchang(?:ed|ing) (?:my |his |her |their |our |the )?(?:\w+ ){0,2}?(?:jobs?|careers?|"
    r"teams?|roles?|to)\b",
    r"\b(?:lost|losing|left|leaving|quit) (?:my|his|her|their|our|the) (?:job|position|role)\b",
    r"\bnew (?:job|role|position|home|apartment|flat|house|address|number|phone|email|car|"
    r"employer|team|city|partner|boyfriend|girlfriend)\b",
    r"\bbroke up\b", r"\bdivorced\b", r"\bretired\b", r"\bsold (?:my|his|her|their|our)\b",
    rf"\bnow (?:(?:I|he|she|they|we|you) )?{_STATE_VERB}\b",
    rf"\b(?:is|are|am|'m|'s) now (?=\w)",
    rf"\b{_STATE_VERB} now\b",
]), re.IGNORECASE)
#: a marker right after these words is negated ("I won't quit", "never moved")
_NEGATION = re.compile(r"(?:\bnot|n't|\bnever|\bnothing)\s+(?:\w+\s+)?$", re.IGNORECASE)
#: the new fact adds to the old one, or says it holds on: no replacement
_ADDITIVE = re.compile(r"\b(?:also|as well|too|in addition|additionally|still|another)\b",
                       re.IGNORECASE)
#: stems that say a change happened (or are too common to name a topic)
_GENERIC = frozenset(tokenize(
    "now no longer anymore stop stopped quit switch switched move moved moving instead replace "
    "replaced used use new change changed lost left gave give given up these days nowadays "
    "start started begin began go going get got make made take took want really just like "
    "thing things time times day days week weeks month months year years today yesterday "
    "last first still also again good great lot love loved feel feeling think know sure "
    "happy excited tough hard way life back said say tell told one two since ago ever"))
#: slots a change is about: two notes hitting the same family share a topic
_FAMILIES: tuple[frozenset[str], ...] = tuple(frozenset(tokenize(words)) for words in (
    # "lives in" is read as a phrase (``_LIVES_IN``): the stem "live" is also "liven up"'s
    "home house apartment flat city town address relocated neighborhood neighbourhood rent "
    "moved move",
    # not "work" ("hard work") nor "office" ("run for office"): too many other meanings
    # nor "position" or "promoted": their stems are "positive"'s and "promotion"'s
    "job jobs employer company career role salary banker engineer retired",
    "drink drinks drinking coffee tea espresso beer wine alcohol soda juice caffeine",
    "eat eats eating diet vegan vegetarian meat food meal",
    "married marriage husband wife girlfriend boyfriend partner dating divorced engaged single",
    "car drive drives driving commute bike bus train",
    "phone number email address",
    "monday tuesday wednesday thursday friday saturday sunday weekday weekend",
))


@dataclass(frozen=True)
class FactView:
    """What a judge reads of one note."""

    id: str
    content: str
    subjects: tuple[str, ...] = ()
    timestamp: str = ""


def view(note: Note | Mapping[str, Any]) -> FactView:
    """The judge's view of a note or of its payload; its time is when what it tells happened
    (``event_time``, where the store records one), else when it was written."""
    if isinstance(note, Note):
        when = str(getattr(note, "event_time", "") or note.timestamp)
        return FactView(note.id, note.content, tuple(note.subjects), when)
    return FactView(str(note["id"]), str(note.get("content", "")),
                    tuple(note.get("subjects", ()) or ()),
                    str(note.get("event_time") or note.get("timestamp", "")))


#: a subject's relative or belonging: "Alice's sister moved" is not about Alice
_RELATION = re.compile(
    r"(?:^|\W)([\w ]{1,40}?)'s (?:sister|brother|mother|mom|mum|father|dad|parents?|son|"
    r"daughter|kids?|children|wife|husband|partner|friend|boyfriend|girlfriend|cousin|aunt|"
    r"uncle|grandma|grandpa|manager|boss|colleague|roommate|neighbou?r|team|dog|cat)\b",
    re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _subject_names(content: str, subjects: tuple[str, ...]) -> frozenset[str]:
    """Who a note is by or about: its subjects and speakers; failing those, the names in a
    note not written in the first person (in "I use Vim", Vim is an object, not a subject)."""
    found = {w.casefold() for s in subjects for w in s.split()}
    a = analyse(content)
    found.update(w.casefold() for name in a.speakers for w in name.split())
    if not found and not _FIRST_PERSON.search(content):
        found.update(t.surface.casefold() for t in a.tokens
                     if t.surface[:1].isupper() and t.weight >= 0.5)
    return frozenset(found)


def same_subject(new: FactView, old: FactView) -> bool:
    """A shared subject or name (not a relative of it); or neither names anyone (the user's
    own notes)."""
    if new.subjects and old.subjects:
        shared = {s.casefold() for s in new.subjects} & {s.casefold() for s in old.subjects}
    else:
        mine = _subject_names(new.content, new.subjects)
        theirs = _subject_names(old.content, old.subjects)
        if not mine and not theirs:
            return True
        shared = set(mine & theirs)
    if not shared:
        return False
    owners = {m.group(1).split()[-1].casefold() for m in _RELATION.finditer(new.content)}
    return not ({w for s in shared for w in s.split()} & owners)


def change_sentence(text: str) -> tuple[str, str] | None:
    """The first change phrase of ``text`` that is not negated, and the sentence holding it.

    The topic must be shared by that sentence, not anywhere in the note: a chat turn often
    greets ("Hey Maria!") and moves on, and a name or a word of another sentence is no
    evidence that this change is about the older fact.
    """
    for match in _MARKERS.finditer(text):
        if _NEGATION.search(text[max(0, match.start() - 24):match.start()]):
            continue
        start = max(text.rfind(c, 0, match.start()) for c in ".!?\n") + 1
        ends = [i for i in (text.find(c, match.end()) for c in ".!?\n") if i >= 0]
        end = min(ends) + 1 if ends else len(text)
        return match.group(0), text[start:end].strip()
    return None


def change_marker(text: str) -> str | None:
    """The first change phrase of ``text`` that is not negated, or None."""
    found = change_sentence(text)
    return found[0] if found else None


@lru_cache(maxsize=4096)
def _terms(content: str) -> tuple[frozenset[str], frozenset[str]]:
    """(informative stems, every stem) of a text: informative as ``amem.enrich`` weighs words
    (common English words weigh less), stemmed as BM25 stems them."""
    strong = {stem for t in analyse(content).tokens if t.weight >= 0.5
              for stem in tokenize(t.surface)}
    called = set(tokenize(" ".join(_VOCATIVE.findall(content))))  # "Hey John," is no topic
    every = set(tokenize(_IDIOM.sub(" ", content)))
    if _WORKS_AT.search(content):  # "works at Google": the job slot, not "hard work"
        every.add(_JOB)
    if _LIVES_IN.search(content):
        every.add(_HOME)
    return frozenset(strong - _GENERIC - called), frozenset(every)


#: a name called, not talked about: "Hey John,", "Thanks, Mel!", "Wow, Caroline!"
_VOCATIVE = re.compile(r"(?:\b(?:[Hh]ey|[Hh]i|[Hh]ello|[Tt]hanks|[Ww]ow|[Yy]eah|[Bb]ye|[Ss]orry|"
                       r"[Cc]ongrats|[Oo]h|[Yy]ep)[,!]?\s+|,\s*)([A-Z][a-z]+)\s*[,!?.]")
_WORKS_AT = re.compile(r"\bwork(?:s|ed|ing)? (?:at|for|as)\b", re.IGNORECASE)
_JOB = tokenize("job")[0]
_LIVES_IN = re.compile(r"\bliv(?:e|es|ed|ing) (?:in|at|near|with)\b", re.IGNORECASE)
_HOME = tokenize("home")[0]
#: praise, not employment: "nice job", "tough job"
_IDIOM = re.compile(r"\b(?:nice|good|great|tough|amazing|awesome|hard|fantastic|excellent|"
                    r"wonderful|terrific|fine) job\b", re.IGNORECASE)
#: copulas ("I'm now friends with...") claim a state, not which one it replaced: they need
#: two shared topic words, or one name ("PostgreSQL")
_WEAK = re.compile(r"^(?:is|are|am|'m|'s) now", re.IGNORECASE)


def shared_topic(new: FactView, old: FactView, sentence: str | None = None) -> set[str]:
    """The topic words the new note (or its ``sentence``) shares with the older one besides
    their subjects' names (a slot family counts as its first shared member)."""
    names = set(tokenize(" ".join(_subject_names(new.content, new.subjects)
                                  | _subject_names(old.content, old.subjects))))
    mine, mine_all = _terms(new.content if sentence is None else sentence)
    theirs, theirs_all = _terms(old.content)
    shared = {t for t in mine & theirs if t not in names and len(t) > 2}
    for family in _FAMILIES:
        hits = mine_all & family, theirs_all & family
        if hits[0] and hits[1]:
            shared.add(min(hits[0] | hits[1]))
    return shared


def _slot(marker: str) -> frozenset[str] | None:
    """The family a slot-bearing change phrase is about ("lost my job": work), else None."""
    # "moved to" is a change of place or of time ("the sync moved to Tuesdays"): no slot
    stems = set(tokenize(marker)) - set(tokenize("moved moving relocated"))
    if _WORK_VERB in stems:  # "now works at": then "works" in the older note is the same slot
        return _FAMILIES[1] | {_WORK_VERB, _JOB}
    for family in _FAMILIES:
        if stems & family:
            return family
    return None


_WORK_VERB = tokenize("works")[0]


def replaces(new: FactView, old: FactView) -> bool:
    """The offline rule (see the module docstring): does ``new`` replace ``old``'s fact?"""
    if new.id == old.id or not same_subject(new, old):
        return False
    text = new.content.strip()
    found = change_sentence(text)
    if found is None or _ADDITIVE.search(text):
        return False
    marker, sentence = found
    if sentence.endswith("?") or _retold(marker, old.content):
        return False  # a question; or the older note tells the same change: a retelling
    slot = _slot(marker)
    if slot is not None:  # "lost my job" replaces a fact about work, and only such a fact
        return bool(_terms(old.content)[1] & slot)
    shared = shared_topic(new, old, sentence)
    if _WEAK.match(marker):
        names = {w.casefold() for w in re.findall(r"\b[A-Z][\w+#.-]*[A-Za-z0-9]", sentence)}
        return len(shared) >= 2 or bool(set(tokenize(" ".join(names))) & shared)
    return bool(shared)


_SAME_CHANGE = {"lost": "lose", "losing": "lose", "left": "leav", "leaving": "leav"}


def _retold(marker: str, old: str) -> bool:
    """Does the older note tell the same change ("lost my job" / "after losing my job")?"""
    norm = {_SAME_CHANGE.get(w.casefold(), w.casefold()) for w in marker.split()}
    theirs = {_SAME_CHANGE.get(w.casefold(), w.casefold()) for w in re.findall(r"[\w']+", old)}
    return norm <= theirs


# ---------------------------------------------------------------- judges


@dataclass
class Verdict:
    """Which candidates the new note replaces, who decided, and what went wrong."""

    ids: list[str]
    decided_by: str
    warnings: list[str] = field(default_factory=list)


class SupersedeJudge(Protocol):
    """Decides which older notes a new note replaces."""

    @property
    def label(self) -> str: ...

    def judge(self, new: FactView, older: Sequence[FactView]) -> Verdict: ...


class RuleJudge:
    """The offline rule as a judge."""

    label = OFFLINE

    def judge(self, new: FactView, older: Sequence[FactView]) -> Verdict:
        return Verdict([o.id for o in older if replaces(new, o)], OFFLINE)


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

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.fallback = RuleJudge()

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
            return Verdict(verdict.ids, OFFLINE_FALLBACK, [reason])
        return Verdict(ids, self.label, warnings)

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


def judge_for(llm: Any) -> SupersedeJudge:
    """The LLM judge when an LLM is configured, else the offline rule."""
    return RuleJudge() if llm is None else LLMJudge(llm)


def history_order(items: Sequence[tuple[str, str | None]]) -> list[int]:
    """Positions of ``(note id, superseded_by)`` items, best first, reordered so that a
    superseded note follows the note that replaced it (and its chain) when both are there;
    one whose successor is absent keeps its place. Pure: search applies it to its ranking."""
    present = {nid: i for i, (nid, _) in enumerate(items)}
    followers: dict[str, list[int]] = {}
    for i, (_, by) in enumerate(items):
        if by is not None and by in present and by != items[i][0]:
            followers.setdefault(by, []).append(i)
    out: list[int] = []
    placed: set[int] = set()

    def place(i: int) -> None:
        if i in placed:
            return
        placed.add(i)
        out.append(i)
        for j in followers.get(items[i][0], []):
            place(j)

    for i, (_, by) in enumerate(items):
        if by is None or by not in present or by == items[i][0]:
            place(i)
    for i in range(len(items)):  # a cycle of marks (cannot be written, but never lose a hit)
        place(i)
    return out


# ---------------------------------------------------------------- store side


@dataclass
class Outcome:
    """What one check did: the notes newly marked, and warnings."""

    superseded: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    decided_by: str = OFFLINE
    warnings: list[str] = field(default_factory=list)


def _not_newer(old: str, new: str) -> bool:
    """``old`` is not after ``new`` (undated or unreadable times do not block)."""
    try:
        a, b = datetime.fromisoformat(old), datetime.fromisoformat(new)
    except ValueError:
        return True
    a = a if a.tzinfo else a.replace(tzinfo=timezone.utc)
    b = b if b.tzinfo else b.replace(tzinfo=timezone.utc)
    return a <= b


def candidates(store: "MemoryStore", note: Note, vector: np.ndarray) -> list[FactView]:
    """The nearest current notes of the agent that share a subject and are not newer."""
    where = Where(must=(*store.tenant_filter(note.agent_id), IsEmpty("superseded_by")))
    hits = store.backend.dense_search(np.asarray(vector, dtype=np.float32), where, CANDIDATES + 1)
    mine = view(note)
    out = []
    for hit in hits:
        other = view(hit.payload)
        if other.id == note.id or other.id in note.supersedes:
            continue
        if same_subject(mine, other) and _not_newer(other.timestamp, note.timestamp):
            out.append(other)
    return out[:CANDIDATES]


def check(store: "MemoryStore", note: Note, vector: np.ndarray, judge: SupersedeJudge,
          *, recheck: bool = False) -> Outcome:
    """Judge ``note`` against its candidates and mark what it replaces (write lock held).

    ``recheck`` (an edited note) also puts the notes it already supersedes back to the judge
    and releases those it no longer replaces.
    """
    pool = candidates(store, note, vector)
    previous: list[FactView] = []
    if recheck and note.supersedes:
        for nid in note.supersedes:
            try:
                prev, _ = store.load(nid, note.agent_id)
            except Exception:  # noqa: BLE001 - a note gone since: nothing to release
                continue
            if prev.superseded_by == note.id:
                previous.append(view(prev))
    if not pool and not previous:
        return Outcome(decided_by=judge.label)
    verdict = judge.judge(view(note), [*previous, *pool])
    chosen = set(verdict.ids)
    outcome = Outcome(decided_by=verdict.decided_by, warnings=list(verdict.warnings))
    at = now_iso(store.clock.now())
    for old in pool:
        if old.id in chosen and _mark(store, note, old.id, at, verdict.decided_by):
            outcome.superseded.append(old.id)
    for old in previous:
        if old.id not in chosen:
            store.update_payload(old.id, note.agent_id, {"superseded_by": None})
            outcome.released.append(old.id)
    if outcome.superseded or outcome.released:
        kept = [n for n in note.supersedes if n not in outcome.released]
        note.supersedes = unique([*kept, *outcome.superseded])
        if outcome.superseded:
            note.evolution_history = [*note.evolution_history, {
                "action": "supersedes", "at": at, "ids": list(outcome.superseded),
                "decided_by": verdict.decided_by}]
        store.update_payload(note.id, note.agent_id, {
            "supersedes": note.supersedes, "evolution_history": note.evolution_history})
    return outcome


def _mark(store: "MemoryStore", new: Note, old_id: str, at: str, decided_by: str) -> bool:
    try:
        old, _ = store.load(old_id, new.agent_id)
    except Exception:  # noqa: BLE001 - deleted since the search: nothing to mark
        return False
    history = [*old.evolution_history, {"action": "superseded", "at": at, "by": new.id,
                                        "decided_by": decided_by}]
    return store.update_note_fields(old_id, new.agent_id, {
        "superseded_by": new.id, "evolution_history": history})


def release(store: "MemoryStore", note: Note) -> list[str]:
    """A deleted note's older facts become current again (their ``superseded_by`` cleared)."""
    freed = []
    for nid in note.supersedes:
        try:
            old, _ = store.load(nid, note.agent_id)
        except Exception:  # noqa: BLE001 - gone as well
            continue
        if old.superseded_by == note.id:
            store.update_payload(nid, note.agent_id, {"superseded_by": None})
            freed.append(nid)
    return freed


def sweep(store: "MemoryStore", agent_id: str, judge: SupersedeJudge) -> Outcome:
    """The nightly pass: every current note that states a change is checked again.

    Only notes with a change phrase are judged (the rule needs one; for an LLM it bounds the
    calls a night costs), oldest first, so a chain A -> B -> C ends with C current.
    """
    total = Outcome(decided_by=judge.label)
    where = Where(must=(*store.tenant_filter(agent_id), IsEmpty("superseded_by")))
    todo = [(Note.from_payload(h.payload), h.dense)
            for h in store.backend.iterate(where, with_vectors=True)
            if change_marker(str(h.payload.get("content", "")))]
    todo.sort(key=lambda nv: (nv[0].timestamp, nv[0].id))
    for note, vector in todo:
        if vector is None:
            continue
        done = check(store, note, vector, judge)
        total.superseded.extend(done.superseded)
        total.warnings.extend(done.warnings)
    return total


__all__ = ["FactView", "LLMJudge", "history_order", "Outcome", "RuleJudge", "SupersedeJudge", "Verdict",
           "change_marker", "check", "judge_for", "replaces", "release", "same_subject", "sweep"]
