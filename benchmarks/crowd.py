"""The crowded store: one dev conversation among real distractor conversations.

An agent's store grows for months; a question about one conversation must still find its
turns among thousands of notes that are about something else. ``crowd(target, others, size)``
returns the target's corpus with distractor turns added until it holds ``size`` notes.

The distractors are the OTHER conversations' turns, never the target's: copies of the
evidence turns would measure near-duplicates, not distractors. Each pass over the other
conversations is one *renaming*: both speakers get fresh names (consistently, in the
speaker prefix and wherever the text names them) and the sessions move by a fixed number of
days, so every renaming reads as a different pair of people on other dates. With few dev
conversations a large crowd repeats a distractor turn under several names; such repeats
crowd the top of a ranking harder than unrelated chat would, so the figure is a hard case,
not a flattering one. Distractor ids (``x<k>:<conversation>:<turn>``) are never relevant.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from .datasets import Corpus, Doc

#: first names used by no LoCoMo conversation; pairs are taken in order, one pair a renaming
NAMES = (
    "Aiden", "Beatrix", "Cedric", "Delphine", "Emeric", "Fiona", "Gustav", "Harriet",
    "Ignatius", "Juniper", "Kasimir", "Leonora", "Magnus", "Nerissa", "Octavian", "Philippa",
    "Quentin", "Rosalind", "Sebastian", "Tamsin", "Ulrich", "Valentina", "Wilfred", "Xanthe",
    "Yorick", "Zinnia", "Ambrose", "Bernadette", "Casimir", "Dorothea", "Evander", "Felicity",
    "Godfrey", "Henrietta", "Isidore", "Josephine", "Leopold", "Marguerite", "Neville",
    "Ottoline", "Percival", "Rowena", "Silas", "Theodora", "Umberto", "Violetta", "Wendell",
    "Yolanda", "Alaric", "Brunhilde", "Crispin", "Drusilla", "Ephraim", "Genevieve",
)

#: how far each renaming moves its sessions (days), so dates differ between renamings too
SHIFT_DAYS = 41

_SPEAKER = re.compile(r"^([^:]{1,40}):\s")


def speakers(corpus: Corpus) -> list[str]:
    """The speakers of a LoCoMo conversation, in order of first turn."""
    seen: dict[str, None] = {}
    for doc in corpus.docs:
        m = _SPEAKER.match(doc.text)
        if m:
            seen.setdefault(m.group(1), None)
    return list(seen)


def _shift(doc: Doc, days: int) -> tuple[str | None, str | None]:
    if not doc.timestamp:
        return None, doc.date_label
    when = datetime.fromisoformat(doc.timestamp) + timedelta(days=days)
    return when.isoformat(), when.strftime("%-d %B %Y")


def renamed(source: Corpus, k: int, avoid: set[str]) -> list[Doc]:
    """Renaming ``k`` of ``source``: its turns under two fresh names, moved ``k`` steps in time.

    Raises:
        ValueError: ``source`` has more than two speakers, or ``NAMES`` no pair left for ``k``.
    """
    names = [n for n in NAMES if n not in avoid]
    people = speakers(source)
    n = len(names)
    if len(people) > 2 or n < 4 or k >= n // 2 + n * (n - 2):
        raise ValueError(f"crowd: renaming {k} of {source.name} ({len(people)} speakers) needs "
                         f"more fresh names than benchmarks.crowd.NAMES has ({n} usable)")
    if k < n // 2:  # first pairs that share no name, then every other ordered pair once
        i, j = 2 * k, 2 * k + 1
    else:
        i = (k - n // 2) % n
        j = (i + 2 + (k - n // 2) // n) % n
    fresh = [names[i], names[j]][:len(people)]
    mapping = dict(zip(people, fresh))
    pattern = re.compile(r"\b(" + "|".join(re.escape(p) for p in people) + r")\b") \
        if people else None
    days = SHIFT_DAYS * (k + 1)
    out = []
    for doc in source.docs:
        text = pattern.sub(lambda m: mapping[m.group(1)], doc.text) if pattern else doc.text
        timestamp, label = _shift(doc, days)
        out.append(Doc(id=f"x{k}:{source.name}:{doc.id}", text=text, timestamp=timestamp,
                       date_label=label))
    return out


def crowd(target: Corpus, others: list[Corpus], size: int) -> Corpus:
    """``target`` with distractor turns from ``others`` added until it holds ``size`` notes.

    Renamings are taken in order (renaming 0 of every other conversation, then 1, ...) and the
    last one is cut, so a size is the same crowd whichever run asks for it, and the renamed
    texts (so their embeddings) are shared between targets and sizes.

    Raises:
        ValueError: ``size`` below the target's own notes, or no other conversation to draw from.
    """
    if size < len(target.docs):
        raise ValueError(f"crowd: size {size} is below {target.name}'s own "
                         f"{len(target.docs)} notes")
    pool = [c for c in others if c.name != target.name and c.docs]
    if size > len(target.docs) and not pool:
        raise ValueError(f"crowd: no other conversation to draw distractors from for "
                         f"{target.name} (load more than one)")
    avoid = {n for c in [target, *pool] for n in speakers(c)}
    docs = list(target.docs)
    k = 0
    while len(docs) < size:
        for source in pool:
            docs.extend(renamed(source, k, avoid)[:size - len(docs)])
            if len(docs) >= size:
                break
        k += 1
    return Corpus(name=target.name, docs=docs, queries=target.queries)


__all__ = ["NAMES", "crowd", "renamed", "speakers"]
