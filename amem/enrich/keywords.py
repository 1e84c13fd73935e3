"""Offline keyword extraction: a statistical scorer for alphabetic text, jieba for Chinese,
simple run extraction for Japanese and Korean.

One pass, :func:`analyse`, reads a note and returns a :class:`TextAnalysis` that the offline
enricher reuses for keywords, category, context and note type.

Alphabetic text (English and other space-separated languages): words are weighted by
:func:`amem.enrich.english.informativeness` (stop words 0, very common words low, rarer words
high), boosted when they look like names or technical terms (capitalised mid-sentence,
acronyms, digits, ``+``/``#``), and scored ``weight * (1 + ln tf)``. A keyword names a thing, a
person or a place, so a common verb (:func:`amem.enrich.english.is_verb`: prefers, joined) is
never one, nor part of one. Phrases are runs of up to three adjacent non-stop words inside one
clause that a verb does not cut, trimmed of very common words at the start (``green tea``,
``LGBTQ support group``); a run of capitalised words is one name (``New York``) even when a word
of it is common on its own. Phrases are scored by the sum of their words. Candidates are then
taken greedily, best first, skipping one whose words are all covered by keywords already taken.
A capitalised word at a sentence start that is no English word we know is written as a name
(``Alice``), not lower-cased.

Chinese (:mod:`amem.enrich.cjk`): jieba's TF-IDF scoring on one cut of the Han text (``amem.segment``). Japanese (text with
kana): runs of kanji and katakana of two or more characters (hiragana is mostly grammar).
Korean: hangul words with common particles stripped. Each script's scores are scaled by its
share of the note's characters before merging, so a mainly English note keeps English keywords.

Speaker names (``Caroline: ...`` at the start of a line) and bracketed timestamps
(``[1:56 pm on 8 May, 2023]``) are never keywords.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..kernel.text import HAN, HANGUL, KANA
from .cjk import HAN_RUN, HANGUL_RUN, chinese_candidates, japanese_candidates, korean_candidates
from .english import LABELS, NOUN_VERB_FORMS, STOPWORDS, SUBJECTS, TIER1, TIER2, informativeness, is_verb

log = logging.getLogger(__name__)


_CJK_ANY = re.compile(f"[{HAN}{KANA}{HANGUL}]")
_KANA_RE = re.compile(f"[{KANA}]")
_WORD = re.compile(r"[^\W_](?:[\w'’.+#-]*[\w+#])?")
_SENTENCE_GAP = re.compile(r"[.!?;:\n]")
_TIMESTAMP = re.compile(r"^\s*\[[^\]\n]{0,80}\]\s*", re.MULTILINE)
_SPEAKER = re.compile(
    rf"^\s*(?P<name>[A-Z][\w.'’-]{{0,30}}(?: [A-Z][\w.'’-]{{0,30}}){{0,2}}|[{HAN}]{{2,3}}|user|assistant|human)"
    rf"\s*[:：]\s*(?P<rest>.*)$"
)

@dataclass(frozen=True, slots=True)
class Token:
    """One alphabetic word occurrence (slots: a cached read holds one per word of its text)."""

    surface: str
    key: str
    weight: float
    clause: int
    sentence_start: bool
    #: a common verb: never a keyword nor part of one
    verb: bool = False
    #: part of a name: capitalised mid-sentence, an acronym, or a run of capitalised words
    name: bool = False


@dataclass
class TextAnalysis:
    """What one read of a note found."""

    text: str
    clean: str
    speakers: frozenset[str]
    tokens: list[Token]
    cjk_terms: Counter[str]
    keywords: list[str]
    scores: dict[str, float] = field(default_factory=dict)

    def terms(self, min_weight: float = 0.5) -> set[str]:
        """Normalised content terms: alphabetic word keys weighing at least ``min_weight`` (the
        default leaves out the most common words), and every CJK term."""
        out = {t.key for t in self.tokens if t.weight >= min_weight}
        out.update(self.cjk_terms)
        return out


@functools.lru_cache(maxsize=1 << 16)
def word_key(word: str) -> str:
    """The matching key of a word: lower-cased, possessive and plural ``s`` dropped.

    Cached: a note's read asks it for every word several times (its weight, its key, its
    display form), ~130 calls a note, and a store's words repeat (an import of 10k LoCoMo
    notes: 3 million calls, 6.6 s of 357 s under the profiler)."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.rstrip("'")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ches", "shes", "sses", "xes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "ous")):
        return w[:-1]
    return w


def strip_timestamps(text: str) -> str:
    """Remove bracketed prefixes such as ``[1:56 pm on 8 May, 2023]`` at line starts."""
    return _TIMESTAMP.sub("", text)


def split_speaker(line: str) -> tuple[str | None, str]:
    """``("Caroline", "I went ...")`` for ``"Caroline: I went ..."``; ``(None, line)`` otherwise."""
    match = _SPEAKER.match(line)
    if not match or not match.group("rest").strip():
        return None, line.strip()
    return match.group("name"), match.group("rest").strip()


def speaker_names(text: str) -> frozenset[str]:
    """Names that open a line as speakers (labels such as ``Note:`` are not people)."""
    names = set()
    for line in strip_timestamps(text).splitlines():
        name, _ = split_speaker(line)
        if name and name.lower() not in LABELS:
            names.add(name)
    return frozenset(names)


def analyse(text: str, limit: int = 8) -> TextAnalysis:
    """Read ``text`` once: speakers, tokens, CJK terms and up to ``limit`` keywords.

    The result is shared with every later read of the same text: read it, never change it.
    A write reads one text up to four times through separate steps (its enrichment, then, as
    a neighbour of later notes, the link rule, offline evolution and the supersession judge,
    each with a cache of what it derives); one cache of the reads themselves makes that one
    read (an import of 10k LoCoMo notes made 22,697 reads, 36 s of 357 s under the profiler).
    The cache keeps 4,096 reads: ~34 MB for texts of two LoCoMo turns (measured with
    tracemalloc), what evolution's own cache of its neighbours' reads held before.
    """
    if not isinstance(text, str):  # not cached: the read's own error for what it cannot read
        return _analyse(text, limit)
    return _cached_analysis(text, limit)


@functools.lru_cache(maxsize=4096)
def _cached_analysis(text: str, limit: int) -> TextAnalysis:
    return _analyse(text, limit)


def _analyse(text: str, limit: int) -> TextAnalysis:
    clean = strip_timestamps(text)
    speakers = speaker_names(clean)
    speaker_keys = {word_key(part) for name in speakers for part in name.split()} | set(speakers)
    tokens = _tokens(clean, speaker_keys)
    total = max(1, sum(len(m) for m in re.findall(r"[^\W\d_]", clean)))
    latin_chars = sum(len(t.surface) for t in tokens)
    routes = [(_select(_latin_candidates(tokens), limit, filler=0.5), latin_chars / total)]
    cjk_terms: Counter[str] = Counter()
    if _CJK_ANY.search(clean):
        if _KANA_RE.search(clean):
            ja = japanese_candidates(clean, speakers)
            routes.append((_select(ja, limit), sum(len(m) for m in re.findall(f"[{HAN}{KANA}]", clean)) / total))
            cjk_terms.update({k: 1 for k in ja})
        elif HAN_RUN.search(clean):
            zh, terms = chinese_candidates(clean, speakers, limit)
            routes.append((_select(zh, limit), sum(len(m) for m in HAN_RUN.findall(clean)) / total))
            cjk_terms.update(terms)
        if HANGUL_RUN.search(clean):
            ko = korean_candidates(clean)
            routes.append((_select(ko, limit), sum(len(m) for m in HANGUL_RUN.findall(clean)) / total))
            cjk_terms.update({k: 1 for k in ko})
    keywords, scores = _merge(routes, limit)
    return TextAnalysis(text, clean, speakers, tokens, cjk_terms, keywords, scores)


def strong_words(text: str, exclude: frozenset[str] = frozenset()) -> int:
    """How many alphabetic words of ``text`` are at least moderately informative (weight >= 0.5)."""
    return sum(1 for m in _WORD.finditer(_CJK_ANY.sub(" , ", text))
               if m.group() not in exclude and informativeness(m.group().lower()) >= 0.5
               and len(m.group()) >= 3 and any(c.isalpha() for c in m.group()))


def cjk_chars(text: str) -> int:
    """How many Han, kana and hangul characters ``text`` has."""
    return len(_CJK_ANY.findall(text))


def extract_keywords(text: str, limit: int = 8) -> list[str]:
    """Up to ``limit`` keywords of ``text``, best first (see the module docstring); a list of
    the caller's own (the read behind it is shared)."""
    return list(analyse(text, limit).keywords)


# ---------------------------------------------------------------- alphabetic text


def _tokens(text: str, speaker_keys: set[str]) -> list[Token]:
    # CJK characters are \w too: blank them out so alphabetic words are cut at them
    latin = _CJK_ANY.sub(" , ", text)
    out: list[Token] = []
    clause = 0
    last_end = 0
    first = True
    for line in latin.splitlines(keepends=True):
        _, rest = split_speaker(line)
        offset = line.find(rest) if rest else len(line)
        body = line[offset:] if offset >= 0 else line
        clause += 1
        first = True
        last_end = 0
        for m in _WORD.finditer(body):
            gap = body[last_end:m.start()]
            if gap.strip():
                clause += 1
            sentence_start = first or bool(_SENTENCE_GAP.search(gap))
            first = False
            last_end = m.end()
            surface = m.group().replace("’", "'")
            out.append(Token(surface, word_key(surface), _weight(surface, sentence_start, speaker_keys),
                             clause, sentence_start, verb=is_verb(surface) and not _capital(surface, sentence_start)))
    return _mark_names(out)


def _capital(surface: str, sentence_start: bool) -> bool:
    """Capitalised where capitals are not grammar: mid-sentence, or an acronym (``LGBTQ``)."""
    return surface[:1].isupper() and (not sentence_start or (surface.isupper() and len(surface) > 1))


def _unknown_capital(t: Token) -> bool:
    """A capitalised sentence-opening word that is no English word we know: likely a name."""
    lower = t.surface.lower()
    lower = lower[:-2] if lower.endswith("'s") else lower  # Dave's: the word is Dave
    # endings of English words, not names: gerunds, past tenses, adverbs, plurals (Pets)
    wordlike = lower.endswith(("ing", "ed", "ly")) or t.key != lower.rstrip("'")
    return (t.sentence_start and t.surface[:1].isupper() and t.weight > 0 and not t.verb
            and not wordlike and lower not in STOPWORDS and lower not in TIER1 and lower not in TIER2)


def _name_follows(tokens: list[Token], i: int) -> bool:
    """Whether what follows a sentence-opening word suits a name: a verb, a grammar word, a
    capital or nothing (Alice *prefers*), not a common noun (*Gather documents*)."""
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and nxt.clause == tokens[i].clause and nxt.surface.lower() in _OBJECT_WORDS:
        return False  # an imperative verb and its object (*Capture the* moment)
    return (nxt is None or nxt.clause != tokens[i].clause or nxt.verb or nxt.weight == 0
            or nxt.surface[:1].isupper() or nxt.surface.lower() in NOUN_VERB_FORMS)


#: words that follow a verb, not a name: articles, determiners, object pronouns
_OBJECT_WORDS = frozenset("the a an this that these those my your his her our their its it them "
                          "me us him some every each".split())


def _mark_names(tokens: list[Token]) -> list[Token]:
    """Mark name tokens; a run of two or more capitalised words in one clause is one name, so
    each of its words weighs as a name (``New`` in ``New York`` is no longer a common word)."""
    from dataclasses import replace

    # an unknown capitalised possessive is a name whatever follows (Dave's laptop)
    capital = [t.weight > 0 and (_capital(t.surface, t.sentence_start)
                                 or (_unknown_capital(t) and (t.surface.endswith("'s")
                                                              or _name_follows(tokens, i))))
               for i, t in enumerate(tokens)]
    # a short capitalised word (Ed, Jo) weighs nothing alone but is a name beside another one
    for i, t in enumerate(tokens):
        if (not capital[i] and t.weight == 0 and len(t.surface) == 2 and t.surface[0].isupper()
                and t.surface[1].islower() and informativeness(t.surface) > 0
                and any(0 <= j < len(tokens) and capital[j] and tokens[j].clause == t.clause
                        for j in (i - 1, i + 1))):
            capital[i] = True
    # a capitalised sentence opener followed by a capitalised word starts a name (New York is ...)
    for i, t in enumerate(tokens[:-1]):
        if (not capital[i] and t.sentence_start and t.surface[:1].isupper() and t.weight > 0
                and capital[i + 1] and tokens[i + 1].clause == t.clause and not t.verb):
            capital[i] = True
    out = []
    for i, t in enumerate(tokens):
        if not capital[i]:
            out.append(t)
            continue
        in_run = any(0 <= j < len(tokens) and capital[j] and tokens[j].clause == t.clause
                     for j in (i - 1, i + 1))
        weight = max(t.weight, 1.4) if in_run else t.weight
        out.append(replace(t, name=True, weight=weight, verb=False))
    # a word that is a noun or a verb (love, plans) is the verb right after its subject: a
    # pronoun or a name opening the sentence (a name inside it modifies: LGBTQ support group)
    for i in range(1, len(out)):
        t, prev = out[i], out[i - 1]
        if (not t.name and t.surface.lower() in NOUN_VERB_FORMS and prev.clause == t.clause
                and ((prev.name and prev.sentence_start) or prev.surface.lower() in SUBJECTS)):
            out[i] = replace(t, verb=True)
    return out


def _weight(surface: str, sentence_start: bool, speaker_keys: set[str]) -> float:
    lower = surface.lower()
    key = word_key(surface)
    if key in speaker_keys or surface in speaker_keys or not any(c.isalpha() for c in surface):
        return 0.0
    base = min(informativeness(lower), informativeness(key))
    if base == 0.0:
        return 0.0
    techy = (surface.isupper() and len(surface) >= 2) or any(c.isdigit() for c in surface) \
        or "+" in surface or "#" in surface or (surface[1:] != surface[1:].lower() and surface[:1].isalpha())
    if len(lower) < 3 and not techy:
        return 0.0
    if techy:
        return base * 1.3
    if surface[:1].isupper() and not sentence_start:
        return base * 1.4  # a name or a title mid-sentence
    if len(lower) > 4 and lower.endswith(("ed", "ly")):
        return base * 0.6  # past tenses and adverbs: rarely what a note is about
    return base


def _display(tokens: list[Token]) -> dict[str, str]:
    """How to write each key: the name-like form if it ever appears so mid-sentence, else lower case."""
    forms: dict[str, Counter[str]] = {}
    for t in tokens:
        named = t.name
        surface = t.surface[:-2] if t.surface.endswith("'s") else t.surface.rstrip("'")
        form = surface if named else surface.lower()
        forms.setdefault(t.key, Counter())[form] += 2 if named else 1
    return {key: max(sorted(c), key=lambda f: c[f]) for key, c in forms.items()}


def _latin_candidates(tokens: list[Token]) -> dict[str, tuple[float, int, str, frozenset[str]]]:
    display = _display(tokens)
    tf: Counter[str] = Counter()
    best: dict[str, float] = {}
    first_pos: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if t.weight <= 0 or t.verb:
            continue
        tf[t.key] += 1
        best[t.key] = max(best.get(t.key, 0.0), t.weight)
        first_pos.setdefault(t.key, i)
    out: dict[str, tuple[float, int, str, frozenset[str]]] = {}
    for key, count in tf.items():
        out[display[key]] = (best[key] * (1 + math.log(count)), first_pos[key], display[key], frozenset([key]))
    # phrases: runs of adjacent weighted tokens in one clause
    phrases: Counter[tuple[str, ...]] = Counter()
    phrase_pos: dict[tuple[str, ...], int] = {}
    run: list[int] = []
    for i in range(len(tokens) + 1):
        nxt = tokens[i] if i < len(tokens) else None
        # a possessive ends a phrase: "Dave's laptop" is Dave and a laptop, not "dave laptop"
        if nxt is not None and nxt.weight > 0 and not nxt.verb and (
                not run or (tokens[run[-1]].clause == nxt.clause
                            and not tokens[run[-1]].surface.endswith("'s"))):
            run.append(i)
            continue
        for span in _phrase_spans(run, tokens):
            pkey = tuple(tokens[j].key for j in span)
            if len(set(pkey)) == len(pkey):
                phrases[pkey] += 1
                phrase_pos.setdefault(pkey, span[0])
        run = [i] if nxt is not None and nxt.weight > 0 and not nxt.verb else []
    for pkey, pcount in phrases.items():
        weight = sum(best[k] for k in pkey)
        text = " ".join(display[k] for k in pkey)
        out[text] = (weight * (1 + math.log(pcount)), phrase_pos[pkey], text, frozenset(pkey))
    return out


def _phrase_spans(run: list[int], tokens: list[Token]) -> list[list[int]]:
    """Phrases in a run: trimmed of very common leading words (*new* painting, *good* idea; the
    last word is the head noun in English, so it stays); runs over three words give bigrams."""
    while run and (tokens[run[0]].weight < 0.5 or _weak_lead(tokens[run[0]])):
        run = run[1:]
    if len(run) < 2:
        return []
    if len(run) <= 3:
        return [run]
    return [run[i:i + 2] for i in range(len(run) - 1)
            if tokens[run[i]].weight >= 0.5 and tokens[run[i + 1]].weight >= 0.5]


def _weak_lead(t: Token) -> bool:
    """A word that does not open a keyword phrase: an adverb (*especially* nature-inspired).
    A gerund does: it names an activity (*helping kids*, *staying positive*)."""
    lower = t.surface.lower()
    return not t.name and len(lower) > 4 and lower.endswith("ly")


# ---------------------------------------------------------------- merging and selection


def _select(candidates: dict[str, tuple[float, int, str, frozenset[str]]], limit: int,
            filler: float | None = None) -> list[tuple[float, str, frozenset[str]]]:
    """Greedy pick, best first, of up to ``limit`` candidates; scores come back scaled to top = 1.

    Stops at a fifth of the top score, and (with ``filler``) after two keywords once only
    candidates below ``filler`` (in the route's own units: very common words) are left.
    """
    ranked = sorted(candidates.values(), key=lambda c: (-c[0], c[1], c[2]))
    if not ranked or ranked[0][0] <= 0:
        return []
    top = ranked[0][0]
    chosen: list[tuple[float, str, frozenset[str]]] = []
    covered: set[str] = set()
    for score, _, display, keys in ranked:
        if len(chosen) >= limit or score < top * 0.2:
            break
        if filler is not None and len(chosen) >= 2 and score < filler:
            break  # only very common words left: two keywords are better than filler
        if keys <= covered:
            continue
        chosen.append((score / top, display, keys))
        covered |= keys
    return chosen


def _merge(routes: list[tuple[list[tuple[float, str, frozenset[str]]], float]], limit: int
           ) -> tuple[list[str], dict[str, float]]:
    """Merge each script's picks, weighting a script by its share of the note's characters."""
    merged = [(score * max(share, 0.05), rank, display)
              for picks, share in routes for rank, (score, display, _) in enumerate(picks)]
    merged.sort(key=lambda m: (-m[0], m[1], m[2]))
    keywords: list[str] = []
    scores: dict[str, float] = {}
    seen: set[str] = set()
    for score, _, display in merged:
        if display.lower() in seen:
            continue
        seen.add(display.lower())
        keywords.append(display)
        scores[display] = round(score, 4)
        if len(keywords) >= limit:
            break
    return keywords, scores
