"""The offline enricher: deterministic rules for note construction, link verification and
memory evolution, used when no LLM is configured and whenever the LLM fails.

Rules (each method's docstring says the same, in more detail):

* **Keywords**: :func:`amem.enrich.keywords.analyse` (statistical scorer; jieba TF-IDF for
  Chinese). **Topics**: the lexicon topics the note hits (:mod:`amem.enrich.lexicon`), else its
  first two keywords, names (capitalised keywords) after the other words. **Tags**: the first five keywords as tags, then the topics. **Context**:
  the first informative sentence (:mod:`amem.enrich.context`). **Category**: the lexicon
  category with most distinct term hits (ties by a fixed order), General when none.
  **Note type**: ``memory`` when the note is dialogue, in the first person, or dated;
  otherwise ``knowledge``.
* **Links**: a candidate is linked when its cosine is at least ``link_strong``, or at least
  ``link_min`` and it shares a content term (an informative word or a CJK term) with the note.
* **Evolution**: a linked note gains as tags the new note's keywords that it also mentions (at
  most three new, at most twelve tags in all); its context is filled in only when it is empty.
  Notes left as they were get no update.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from ..errors import ValidationError
from .base import OFFLINE, Candidate, Enrichment, EvolutionDecision, EvolutionUpdate, LinkDecision, NoteType, NoteView
from .context import first_informative_sentence
from .english import LABELS
from .keywords import TextAnalysis, analyse, word_key
from .lexicon import CATEGORY_ORDER, LEXICON

_FIRST_PERSON = frozenset("i me my mine we us our ours i'm i've i'd i'll we're we've myself ourselves".split())
_FIRST_PERSON_CJK = ("我", "私", "僕", "俺", "저는", "제가", "나는", "내가", "우리")
_TIME_WORDS = frozenset("yesterday today tonight tomorrow ago weekend".split())
_TIME_CJK = ("昨天", "今天", "明天", "上周", "昨晚", "周末", "昨日", "今日", "先週", "어제", "오늘", "주말")
_DATE = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\d{1,2}月\d{1,2}[日号]")
_TAG_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


@dataclass(frozen=True)
class OfflineRules:
    """The knobs of the offline rules.

    Attributes:
        max_keywords: keywords per note.
        max_tags: tags per new note.
        max_topics: topics per note.
        context_chars: the context line is cut to this many characters.
        link_strong: a candidate at or above this cosine is linked on similarity alone.
        link_min: a candidate at or above this cosine is linked when it shares a content term.
        evolve_max: linked notes considered for evolution.
        evolve_new_tags: tags one evolution may add to a note.
        evolve_max_tags: evolution adds no tags to a note that already has this many.
    """

    max_keywords: int = 8
    max_tags: int = 10
    max_topics: int = 3
    context_chars: int = 200
    link_strong: float = 0.75
    link_min: float = 0.45
    evolve_max: int = 3
    evolve_new_tags: int = 3
    evolve_max_tags: int = 12

    def __post_init__(self) -> None:
        for name in ("max_keywords", "max_tags", "max_topics", "evolve_new_tags", "evolve_max_tags"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.evolve_max < 0:
            raise ValueError(f"evolve_max must be >= 0, got {self.evolve_max}")
        if self.context_chars < 20:
            raise ValueError(f"context_chars must be >= 20, got {self.context_chars}")
        if not -1.0 <= self.link_min <= self.link_strong <= 1.0:
            raise ValueError("need -1 <= link_min <= link_strong <= 1")


def normalise_tag(text: str) -> str:
    """A tag form: NFKC, lower case, inner spaces as ``-``, no punctuation at the ends."""
    tag = unicodedata.normalize("NFKC", text).strip().lower()
    tag = "-".join(tag.split())
    return _TAG_EDGE.sub("", tag)[:60]


def check_text(text: object, field: str = "text") -> str:
    """``text`` if it is a non-blank string, else a :class:`ValidationError` naming ``field``."""
    if not isinstance(text, str):
        raise ValidationError(f"{field} must be a string, got {type(text).__name__}", field=field)
    if not text.strip():
        raise ValidationError(f"{field} is empty", field=field)
    return text


def check_candidates(candidates: object) -> list[Candidate]:
    """Candidates as ``(id, text, cosine)`` tuples, or a :class:`ValidationError` naming the bad one."""
    if not isinstance(candidates, (list, tuple)):
        raise ValidationError("candidates must be a list of (id, text, cosine)", field="candidates")
    out: list[Candidate] = []
    for i, item in enumerate(candidates):
        ok = (isinstance(item, (list, tuple)) and len(item) == 3 and isinstance(item[0], str) and item[0]
              and isinstance(item[1], str) and isinstance(item[2], (int, float)) and not isinstance(item[2], bool)
              and math.isfinite(item[2]))
        if not ok:
            raise ValidationError(f"candidates[{i}] must be (non-empty id, text, finite cosine), got {item!r}",
                                  field=f"candidates[{i}]")
        out.append((item[0], item[1], float(item[2])))
    return out


def check_views(note: object, neighbours: object) -> None:
    """A :class:`ValidationError` unless ``note`` is a NoteView and ``neighbours`` a list of them."""
    if not isinstance(note, NoteView):
        raise ValidationError("note must be a NoteView", field="note")
    if not isinstance(neighbours, (list, tuple)):
        raise ValidationError("neighbours must be a list of NoteView", field="neighbours")
    for i, nb in enumerate(neighbours):
        if not isinstance(nb, NoteView):
            raise ValidationError(f"neighbours[{i}] must be a NoteView", field=f"neighbours[{i}]")


class OfflineEnricher:
    """The rules in the module docstring, as an :class:`amem.enrich.Enricher`."""

    def __init__(self, rules: OfflineRules | None = None) -> None:
        self.rules = rules or OfflineRules()
        self._lexicon = _compile_lexicon()

    # ------------------------------------------------------------------ step 3

    def enrich(self, text: str, *, enriched_by: str = OFFLINE, warnings: Iterable[str] = ()) -> Enrichment:
        """Keywords, tags, context, category, note type and topics by the offline rules.

        ``enriched_by`` and ``warnings`` let the fallback combinator label the result.

        Raises:
            ValidationError: ``text`` is not a string or is blank.
        """
        check_text(text)
        r = self.rules
        a = analyse(text, limit=r.max_keywords)
        category, topic_hits = self._categorise(a)
        topics = [t for t, _ in sorted(topic_hits.items(), key=lambda kv: (-kv[1], kv[0]))][: r.max_topics]
        if not topics:  # what the note is about: its common-word keywords before its names
            topics = [normalise_tag(k) for k in sorted(a.keywords, key=lambda k: k[:1].isupper())[:2]]
        tags = _unique([normalise_tag(k) for k in a.keywords[:5]] + topics)[: r.max_tags]
        context = first_informative_sentence(a.clean, a.keywords, speakers=a.speakers, limit=r.context_chars)
        return Enrichment(
            keywords=tuple(a.keywords),
            tags=tuple(t for t in tags if t),
            context=context,
            category=category,
            note_type=_note_type(a),
            topics=tuple(t for t in topics if t),
            enriched_by=enriched_by,
            warnings=tuple(warnings),
        )

    def _categorise(self, a: TextAnalysis) -> tuple[str, Counter[str]]:
        """(category, hits per topic): distinct lexicon terms found, per category and topic."""
        speaker_keys = {word_key(part) for name in a.speakers for part in name.split()}
        keys = [t.key for t in a.tokens if t.key not in speaker_keys]
        unigrams = set(keys)
        ngrams = {" ".join(keys[i:i + n]) for n in (2, 3) for i in range(len(keys) - n + 1)}
        per_category: Counter[str] = Counter()
        per_topic: Counter[str] = Counter()
        for category, topic, term, is_cjk in self._lexicon:
            if is_cjk:
                hit = term in a.clean
            elif " " in term:
                hit = term in ngrams
            else:
                hit = term in unigrams
            if hit:
                per_category[category] += 1
                per_topic[topic] += 1
        if not per_category:
            return "General", per_topic
        best = max(per_category.values())
        return next(c for c in CATEGORY_ORDER if per_category[c] == best), per_topic

    # ------------------------------------------------------------------ step 4

    def verify_links(self, note_text: str, candidates: list[Candidate], *, decided_by: str = OFFLINE,
                     warnings: Iterable[str] = ()) -> LinkDecision:
        """Link a candidate when ``cosine >= link_strong`` (0.75), or when ``cosine >= link_min``
        (0.45) and the candidate shares at least one content term with the note: an informative
        word (not a stop word or one of the most common English words; plural and possessive
        forms folded) or a CJK term (jieba word, kanji/katakana run, hangul word). Candidates
        keep their given order.

        Raises:
            ValidationError: ``note_text`` is blank, or a candidate is not ``(id, text, cosine)``.
        """
        check_text(note_text, "note_text")
        cands = check_candidates(candidates)
        r = self.rules
        note_terms: set[str] | None = None
        ids: list[str] = []
        for cid, ctext, cosine in cands:
            if cosine >= r.link_strong:
                ids.append(cid)
            elif cosine >= r.link_min and ctext.strip():
                if note_terms is None:
                    note_terms = analyse(note_text).terms()
                if note_terms & analyse(ctext).terms():
                    ids.append(cid)
        return LinkDecision(_unique(ids), decided_by=decided_by, warnings=tuple(warnings))

    # ------------------------------------------------------------------ step 5

    def evolve(self, note: NoteView, neighbours: list[NoteView], *, decided_by: str = OFFLINE,
               warnings: Iterable[str] = ()) -> EvolutionDecision:
        """For each of the first ``evolve_max`` (3) neighbours: add as tags the new note's
        keywords the neighbour also mentions (in its content, keywords or tags; at most three new
        tags, none once it has twelve), and fill in its context from its own content only if the
        context is empty (rewriting a context needs understanding the offline rules lack). A
        neighbour that would not change gets no update.

        Raises:
            ValidationError: ``note`` or a neighbour is not a :class:`NoteView`.
        """
        check_views(note, neighbours)
        r = self.rules
        new_keywords = list(note.keywords) or analyse(note.content, limit=r.max_keywords).keywords
        updates: list[EvolutionUpdate] = []
        for nb in [nb for nb in neighbours if nb.id != note.id][: r.evolve_max]:
            nb_analysis = analyse(nb.content, r.max_keywords) if nb.content.strip() else None
            nb_terms = nb_analysis.terms(min_weight=0.0) if nb_analysis else set()
            nb_terms |= {word_key(w) for text in (*nb.keywords, *nb.tags) for w in re.split(r"[\s\-]+", text)}
            nb_terms |= {normalise_tag(t) for t in (*nb.keywords, *nb.tags)}
            tags = list(nb.tags)
            have = {normalise_tag(t) for t in tags}
            added: list[str] = []
            for kw in new_keywords:
                tag = normalise_tag(kw)
                if not tag or tag in have or len(added) >= r.evolve_new_tags or len(tags) >= r.evolve_max_tags:
                    continue
                parts = {word_key(w) for w in re.split(r"[\s\-]+", kw) if w}
                if tag in nb_terms or (parts and parts <= nb_terms):
                    tags.append(tag)
                    have.add(tag)
                    added.append(tag)
            context = nb.context
            reasons = [f"added tags shared with the new note: {', '.join(added)}"] if added else []
            if not context.strip() and nb_analysis is not None:
                context = first_informative_sentence(nb_analysis.clean, nb_analysis.keywords,
                                                     speakers=nb_analysis.speakers, limit=r.context_chars)
                if context:
                    reasons.append("filled in the empty context")
            if tags != list(nb.tags) or context != nb.context:
                updates.append(EvolutionUpdate(nb.id, context, tuple(tags), decided_by, "; ".join(reasons)))
        return EvolutionDecision(updates, decided_by=decided_by, warnings=tuple(warnings))


def _note_type(a: TextAnalysis) -> NoteType:
    """``memory`` for dialogue (a speaker that is not a label), first person, or a time anchor
    (yesterday, last week, a year, a date); ``knowledge`` otherwise."""
    if any(s.lower() not in LABELS for s in a.speakers):
        return "memory"
    lowers = {t.surface.lower() for t in a.tokens}
    if lowers & _FIRST_PERSON or lowers & _TIME_WORDS:
        return "memory"
    if any(m in a.clean for m in _FIRST_PERSON_CJK + _TIME_CJK) or _DATE.search(a.clean):
        return "memory"
    return "knowledge"


def _compile_lexicon() -> list[tuple[str, str, str, bool]]:
    """(category, topic, matching form, is CJK) per distinct lexicon term."""
    out: dict[tuple[str, str, str], bool] = {}
    for category, topics in LEXICON.items():
        for topic, terms in topics.items():
            for term in terms:
                is_cjk = not term.isascii()
                form = term if is_cjk else " ".join(word_key(w) for w in term.split())
                out[(category, topic, form)] = is_cjk
    return [(c, t, f, cjk) for (c, t, f), cjk in out.items()]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
