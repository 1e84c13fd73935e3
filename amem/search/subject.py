"""Step 4b3 of a search: past the subject a question names, what it asks decides.

A Chinese question names its subject first and asks about it after ("鑫诺一号通信卫星在轨寿命是
多少年？"). Among the sentences of one source the one that names the subject (often the first:
"鑫诺一号通信卫星（SINOSAT-1）是法国宇航公司制造...") matches the question's rarest words and
wins both rankings, while the sentence that answers ("...在轨寿命为15年。") names only what is
asked. So the subject is taken as the longest start of the question (two characters or more)
that one of the first five candidates holds word for word, and the first ``subject_head``
candidates gain ``subject_lift`` times the z score, over them, of their BM25 score for the
question's other terms (the engine's, over those candidates alone: one sparse query). A
candidate that holds what is asked climbs among those about the same subject; nothing is
brought in.

Only questions holding Han characters take the step: the subject-first shape is what was
measured (CMRC 2018, Chinese Wikipedia). An English question's start held by a candidate is
a "What did " (no subject), and the step is not run there. Only z-score fusion has the scale
this needs: with RRF the step is skipped. Measured in benchmarks/RESULTS.md ("The question's
subject, then what it asks").
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from .. import bm25
from ..backends.base import HasId, Hit, VectorBackend, Where
from ..config import AmemConfig
from ..ranking import logistic, logit
from ..text import tokenize

#: the first candidates whose text is looked in for the question's subject
SUBJECT_SEEDS = 5
#: a subject is a name, not a sentence: a longer start is not looked for (a question copied
#: from the start of a long note would otherwise cost a search of each note per character)
SUBJECT_MAX_CHARS = 64
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def question_subject(question: str, texts: Sequence[str]) -> str:
    """The longest start of ``question`` (two to ``SUBJECT_MAX_CHARS`` characters) that one
    of ``texts`` holds word for word; ``""`` when none holds even two."""
    best = ""
    for end in range(2, min(len(question), SUBJECT_MAX_CHARS) + 1):
        start = question[:end]
        if not any(start in text for text in texts):
            break
        best = start
    return best.strip()


def asked_terms(question: str, subject: str) -> list[str]:
    """The question's terms once the subject is taken out (none of the subject's own)."""
    if not subject:
        return []
    own = set(tokenize(subject))
    return sorted(set(tokenize(question.replace(subject, " "))) - own)


def lift_by(ranked: Sequence[tuple[str, float]], values: dict[str, float], weight: float,
            head: int) -> list[tuple[str, float]]:
    """``ranked`` (best first, scores in (0, 1)) with each of the first ``head`` notes' logit
    raised by ``weight`` times the z score of its value over them (a note without one counts
    0); the rest keep their place after them. A constant value moves nothing."""
    top = list(ranked[:head])
    values_top = [values.get(item, 0.0) for item, _ in top]
    if len(top) < 2:
        return list(ranked)
    mean = sum(values_top) / len(values_top)
    std = math.sqrt(sum((v - mean) ** 2 for v in values_top) / len(values_top))
    if std <= 1e-12:
        return list(ranked)
    moved = [(item, logistic(logit(score) + weight * (value - mean) / std))
             for (item, score), value in zip(top, values_top)]
    moved.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep ranked's order
    return moved + list(ranked[head:])


def lift(config: AmemConfig, backend: VectorBackend, query: str,
         fused: Sequence[tuple[str, float]], seeds: dict[str, Hit]
         ) -> tuple[list[tuple[str, float]], dict[str, Hit]]:
    """``fused`` with the first ``subject_head`` candidates re-weighed by what the question
    asks past its subject (module docstring), and ``seeds`` with the payloads this step read.

    ``seeds``: payloads already read whole (step 4b2's); the first five candidates' texts
    are read only where they are not among them, and handed on, so the search's read of its
    matches skips them as it skips 4b2's. Unchanged when the step is off, the fusion is RRF,
    the question holds no Han character, or no subject or nothing past it is found."""
    weight, head = config.subject_lift, config.subject_head
    if weight <= 0 or config.fusion != "zscore" or len(fused) < 2 or not _HAN.search(query):
        return list(fused), seeds
    first = [pid for pid, _ in fused[:SUBJECT_SEEDS]]
    unread = [pid for pid in first if pid not in seeds]
    if unread:
        seeds = {**seeds, **{h.id: h for h in backend.retrieve(unread)}}
    texts = [str(seeds[pid].payload.get("content", "")) for pid in first if pid in seeds]
    terms = asked_terms(query, question_subject(query, texts))
    if not terms:
        return list(fused), seeds
    ids = tuple(pid for pid, _ in fused[:head])
    scored = backend.sparse_search(bm25.query_vector(terms), Where(must=(HasId(ids),)),
                                   len(ids), fields=("id",))
    return lift_by(fused, {h.id: h.score for h in scored}, weight, head), seeds


__all__ = ["SUBJECT_MAX_CHARS", "asked_terms", "lift", "lift_by", "question_subject"]
