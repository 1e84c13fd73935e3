"""The offline supersede rule: does a new note replace an older note's fact? (precision first)

See ``amem.supersede`` for when it is asked; ``replaces`` says yes only when the two notes are
about the same subject, the new note states a change that is not negated or additive, and the
sentence holding the change shares a topic with the older note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ..enrich.keywords import analyse
from ..notes import Note
from ..text import tokenize

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

#: note similarity (``amem.similarity``) from which two notes are about the same thing: the
#: rule hides an older note only at or above it (see ``benchmarks.supersede_judge_bench``)
SAME_THING = 0.03
#: a leading label, a word or two before a colon ("Staging database: ...", "Note: ...",
#: "Caroline: ..."): it names a heading or a speaker, not what the sentence says, so two
#: notes sharing it share no topic by that alone
_LABEL = re.compile(r"^\s*[^\W\d][\w'-]*(?:\s+[\w'-]+)?\s*:\s+(?=\S)")


def unlabelled(text: str) -> str:
    """``text`` without its leading label, if it has one."""
    return _LABEL.sub("", text, count=1)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentences(text: str) -> list[str]:
    """The sentences of a note (its label off), longest 1,000 characters, at most 12."""
    parts = [p.strip()[:1000] for p in _SENTENCE_END.split(unlabelled(text.strip()))]
    return [p for p in parts if len(p) > 3][:12]


@dataclass(frozen=True)
class FactView:
    """What a judge reads of one note."""

    id: str
    content: str
    subjects: tuple[str, ...] = ()
    timestamp: str = ""
    #: an older note's note-to-note similarity to the note being judged (``amem.similarity``,
    #: the embedder's calibrated scale), as ``amem.supersede.candidates`` reads it from the
    #: engine; None when nobody measured it (then the rule does not hide)
    similarity: float | None = None


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
    r"\b(\w+)['\u2019]s (?:sister|brother|mother|mom|mum|father|dad|parents?|son|"
    r"daughter|kids?|children|wife|husband|partner|friend|boyfriend|girlfriend|cousin|aunt|"
    r"uncle|grandma|grandpa|manager|boss|colleague|roommate|neighbou?r|team|dog|cat)\b",
    re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself)\b", re.IGNORECASE)


#: a name's possessive ending: "Mia's phone number" is about Mia
_POSSESSIVE = re.compile(r"['\u2019]s?$")


@lru_cache(maxsize=4096)
def _subject_names(content: str, subjects: tuple[str, ...]) -> frozenset[str]:
    """Who a note is by or about: its subjects and speakers; failing those, the names in a
    note not written in the first person (in "I use Vim", Vim is an object, not a subject),
    a possessive read as its name ("Mia's phone number" is about Mia) unless a relative
    follows it ("Alice's sister lives in Rome" is not about Alice: it keeps its "'s")."""
    found = {w.casefold() for s in subjects for w in s.split()}
    a = analyse(content)
    found.update(w.casefold() for name in a.speakers for w in name.split())
    if not found and not _FIRST_PERSON.search(content):
        names = [t.surface.casefold() for t in a.tokens
                 if t.surface[:1].isupper() and t.weight >= 0.5]
        owners = {name: _POSSESSIVE.sub("", name) for name in names}
        relatives = ({m.group(1).casefold() for m in _RELATION.finditer(content)}
                     if any(owner != name for name, owner in owners.items()) else set())
        found.update(name if owner in relatives else owner for name, owner in owners.items())
    return frozenset(found)


def same_subject(new: FactView, old: FactView) -> bool:
    """A shared subject or name (not a relative of it); or neither names anyone (the user's
    own notes); or, when the two do not both name their subjects, the same thing opening both
    ("The staging database ...")."""
    if new.subjects and old.subjects:
        shared = {s.casefold() for s in new.subjects} & {s.casefold() for s in old.subjects}
    else:
        mine = _subject_names(new.content, new.subjects)
        theirs = _subject_names(old.content, old.subjects)
        if not mine and not theirs:
            return True
        shared = set(mine & theirs)
        if not shared and _same_lead(new.content, old.content):
            return True
    if not shared:
        return False
    owners = {m.group(1).casefold() for m in _RELATION.finditer(new.content)}
    return not ({w for s in shared for w in s.split()} & owners)


#: a sentence opening on a determined noun phrase and its verb: "The staging database runs..."
_LEAD = re.compile(rf"^(?:the|our|my|his|her|their)\s+((?:[a-z][\w-]*\s+){{0,3}}?[a-z][\w-]*)\s+"
                   rf"(?:{_STATE_VERB}|moved|moves|switched|changed|stopped|relocated|was|were)\b",
                   re.IGNORECASE)


def _same_lead(new: str, old: str) -> bool:
    """Both notes open on the same noun phrase ("The staging database runs ..." and "The
    staging database moved ..."): the thing they state a fact about is one subject."""
    a, b = _LEAD.match(unlabelled(new).strip()), _LEAD.match(unlabelled(old).strip())
    return bool(a and b and a.group(1).casefold() == b.group(1).casefold())


def change_sentence(text: str) -> tuple[str, str] | None:
    """The first change phrase of ``text`` that is not negated, and the sentence holding it.

    The topic must be shared by that sentence, not anywhere in the note: a chat turn often
    greets ("Hey Maria!") and moves on, and a name or a word of another sentence is no
    evidence that this change is about the older fact.
    """
    for match in _MARKERS.finditer(text):
        before = text[max(0, match.start() - 40):match.start()]
        if _NEGATION.search(before[-24:]) or _BACKGROUND.search(before) \
                or _OTHERS_NEW.search(before + match.group(0)):
            continue
        start = max(text.rfind(c, 0, match.start()) for c in ".!?\n") + 1
        if not text[start:match.start()].strip() and _GERUND.match(match.group(0)):
            continue  # "Losing my job was hard": the change is the subject, told as background
        ends = [i for i in (text.find(c, match.end()) for c in ".!?\n") if i >= 0]
        end = min(ends) + 1 if ends else len(text)
        return match.group(0), text[start:end].strip()
    return None


#: a change told as the reason or the time of something else ("since I lost my job", "'cause
#: I lost my job"): it happened before, the sentence is about what followed
_BACKGROUND = re.compile(r"(?:\b(?:since|after|because|cause|once|ever since)|'cause)\s+"
                         r"(?:\w+\s+){0,2}$", re.IGNORECASE)
_GERUND = re.compile(r"\w+ing\b", re.IGNORECASE)
#: someone else's new thing ("their new home", "your new job"): not the subject's change
_OTHERS_NEW = re.compile(r"\b(?:their|his|her|your|its)\s+new \w+$", re.IGNORECASE)


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
    mine, mine_all = _terms(unlabelled(new.content) if sentence is None else sentence)
    theirs, theirs_all = _terms(unlabelled(old.content))
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
    if _WORK_VERB in stems or stems & _FAMILIES[1]:
        return _JOB_SLOT
    for family in _FAMILIES:
        if stems & family:
            return family
    return None


_WORK_VERB = tokenize("works")[0]
_JOB_SLOT = _FAMILIES[1] | {_WORK_VERB, _JOB}
#: an older note states the subject's own job: "my new job", "Bob works at Google", "a banker"
_OWN_JOB = re.compile(
    r"\b(?:my|our|his|her)\s+(?:\w+\s+){0,2}?(?:job|jobs|career|role|position|employer|"
    r"company|boss|salary)\b"
    r"|(?<!\byour )(?<!\btheir )(?<!\bhis )(?<!\bher )(?<!\bmy )(?<!\bour )"
    r"\bwork(?:s|ed|ing)? (?:at|for|as)\b"
    r"|\b(?:banker|engineer|retired|employed|hired)\b", re.IGNORECASE)


def replaces(new: FactView, old: FactView, *, semantic: bool = True) -> bool:
    """The offline rule (see the module docstring): does ``new`` replace ``old``'s fact?

    ``semantic`` (always, in the store) also asks that the two be about the same thing by
    meaning: ``old.similarity`` at least ``SAME_THING``; an unmeasured pair is not hidden.
    ``semantic=False`` is the words-only rule, kept to measure what the meaning gate adds.
    An older note that also tells facts the change is not about is not replaced whole
    (:func:`partly`): it stays shown.
    """
    return changes(new, old, semantic=semantic) and not partly(new, old)


def partly(new: FactView, old: FactView) -> list[str]:
    """The clauses of ``old`` that ``new``'s change leaves standing (:func:`other_facts`);
    [] when ``new`` states no change. Asked of a pair the rule would otherwise hide."""
    found = change_sentence(unlabelled(new.content.strip()))
    if found is None:
        return []
    marker, sentence = found
    return other_facts(new, old, sentence, _slot(marker))


def changes(new: FactView, old: FactView, *, semantic: bool = True) -> bool:
    """Whether ``new`` states a change of ``old``'s fact, whole or in part."""
    if new.id == old.id or not same_subject(new, old):
        return False
    if semantic and (old.similarity is None or old.similarity < SAME_THING):
        return False
    text = unlabelled(new.content.strip())
    found = change_sentence(text)
    if found is None or _ADDITIVE.search(text):
        return False
    marker, sentence = found
    before = unlabelled(old.content)
    if sentence.endswith("?") or _retold(marker, before):
        return False  # a question; or the older note tells the same change: a retelling
    if re.search(r"\bnow\b", marker, re.IGNORECASE) and _terms(sentence)[0] <= _terms(before)[1]:
        return False  # "I'm now part of the brigade" after "I joined the brigade": no new value
    slot = _slot(marker)
    if slot is not None:  # "lost my job" replaces a fact about work, and only such a fact
        if slot is _JOB_SLOT:  # the subject's own job: not "job training", "their jobs"
            return bool(_OWN_JOB.search(before))
        return bool(_terms(before)[1] & slot)
    shared = shared_topic(new, old, sentence)
    if _WEAK.match(marker):
        names = {w.casefold() for w in re.findall(r"\b[A-Z][\w+#.-]*[A-Za-z0-9]", sentence)}
        return len(shared) >= 2 or bool(set(tokenize(" ".join(names))) & shared)
    return bool(shared)


#: where an older note's facts part: sentence ends and semicolons
_CLAUSE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


def other_facts(new: FactView, old: FactView, sentence: str,
                slot: frozenset[str] | None = None) -> list[str]:
    """The clauses of ``old`` that tell something the change ``sentence`` is not about.

    Hiding a note hides all of it: "The staging database runs PostgreSQL 16 on db-staging-2;
    backups happen nightly at 03:00 UTC" replaced by "The staging database moved to
    db-2.internal" would take the backup time out of search too (the README's own second
    step did). A clause with informative words of its own (``_terms``), a value of its own
    (:func:`_values`: a number, a name) and no topic shared with the change (nor a word of
    the change's ``slot``: "my job" for "lost my job") is such a fact, and the older note
    then stays shown. A clause without informative words ("Wow, thanks!") is no fact.
    """
    clauses = [c.strip() for c in _CLAUSE_END.split(unlabelled(old.content)) if c.strip()]
    if len(clauses) < 2:
        return []
    named = _subject_names(new.content, new.subjects) | _subject_names(old.content, old.subjects)
    own = {w.casefold() for w in re.findall(r"[\w'-]+", new.content)}
    return [c for c in clauses if _terms(c)[0] and _values(c, tuple(named), own)
            and not shared_topic(new, FactView(old.id, c, old.subjects), sentence)
            and not (slot is not None and _terms(c)[1] & slot)]


#: a value a clause states: a word with a digit ("03:00", "PostgreSQL 16", "db-2"), or a
#: capitalised word after the clause's first ("UTC", "Lisbon")
_VALUE = re.compile(r"\S*\d\S*|(?<=\s)(?!I\b|I'[a-z]+\b)[A-Z][\w.-]*")


def _values(clause: str, subjects: tuple[str, ...], shared: set[str]) -> bool:
    """Whether ``clause`` states a value of its own: a fact to keep, not chat about the
    change ("My team has been super encouraging" beside "my new job" is the job's own
    colour). Names called ("Hi Maria!"), the notes' subjects and the words the newer note
    says too (``shared``: "Caroline" in two notes about her) are no value."""
    called = ({m.casefold() for m in _VOCATIVE.findall(clause)} | shared
              | {w.casefold() for s in subjects for w in s.split()})
    return any(v.strip(".,;:!?'\"()").casefold() not in called for v in _VALUE.findall(clause)
               if v.strip(".,;:!?'\"()"))


_SAME_CHANGE = {"lost": "lose", "losing": "lose", "left": "leav", "leaving": "leav"}


def _retold(marker: str, old: str) -> bool:
    """Does the older note tell the same change ("lost my job" / "after losing my job")?"""
    norm = {_SAME_CHANGE.get(w.casefold(), w.casefold()) for w in marker.split()}
    theirs = {_SAME_CHANGE.get(w.casefold(), w.casefold()) for w in re.findall(r"[\w']+", old)}
    return norm <= theirs


__all__ = ["FactView", "SAME_THING", "change_marker", "change_sentence", "changes", "other_facts",
           "partly", "replaces", "same_subject", "sentences", "shared_topic", "unlabelled", "view"]
