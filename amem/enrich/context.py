"""The offline context: the note's first informative sentence, trimmed to a length limit.

A sentence is *informative* when it has at least two moderately informative words (see
:func:`amem.enrich.keywords.strong_words`), or at least eight CJK characters, or at least four
words one of which is among the note's top three keywords (a bare name such as *John* does not
count: in chat it is usually just the person addressed). Greetings and small talk ("Hey Mel! Good to see you!")
are not. When no sentence qualifies, the one with the most content wins (the first on ties).
A sentence spoken by someone (``Caroline: ...``) keeps the speaker, since *who* said it is
usually what a later question asks.
"""

from __future__ import annotations

import re
from typing import Iterator, Sequence

from .english import LABELS
from .keywords import cjk_chars, split_speaker, strong_words

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])")
ELLIPSIS = "…"


def line_sentences(line: str) -> Iterator[str]:
    """The sentences of one line, whitespace collapsed, empty ones skipped."""
    for sentence in _SENTENCE_END.split(line.strip()):
        sentence = " ".join(sentence.split())
        if sentence:
            yield sentence


#: a Markdown heading line (``# Title`` ... ``###### Title``): it titles the text after it
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")


def sentences(clean: str) -> Iterator[tuple[str | None, str]]:
    """``(speaker or None, sentence)`` for each sentence of ``clean``, in order; Markdown
    headings last, without their ``#`` marks: a heading titles the paragraph after it (an
    imported ``# Deploy notes`` section), so the paragraph says more than its title."""
    lines = clean.splitlines()
    headings = [HEADING.sub("", line) for line in lines if HEADING.match(line)]
    for line in [*(line for line in lines if not HEADING.match(line)), *headings]:
        if not line.strip():
            continue
        speaker, rest = split_speaker(line)
        if speaker is not None and speaker.lower() in LABELS:
            speaker, rest = None, line.strip()
        for sentence in line_sentences(rest):
            yield speaker, sentence


def first_informative_sentence(clean: str, keywords: Sequence[str], *, speakers: frozenset[str] = frozenset(),
                               limit: int = 200) -> str:
    """The context line of a note (see the module docstring); ``""`` for a note without text."""
    top = [k.lower() for k in keywords[:3] if not _bare_name(k)]
    best: tuple[float, str] | None = None
    for speaker, sentence in sentences(clean):
        strong = strong_words(sentence, exclude=speakers)
        cjk = cjk_chars(sentence)
        lower = sentence.lower()
        line = f"{speaker}: {sentence}" if speaker else sentence
        if strong >= 2 or cjk >= 8 or (len(sentence.split()) >= 4 and any(k in lower for k in top)):
            return trim(line, limit)
        content = strong + cjk / 4
        if best is None or content > best[0]:
            best = (content, line)
    return trim(best[1], limit) if best else ""


def _bare_name(keyword: str) -> bool:
    return " " not in keyword and keyword[:1].isupper() and keyword[1:].islower()


def trim(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a word boundary when there is one nearby."""
    if limit < 2:
        raise ValueError(f"limit must be >= 2, got {limit}")
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + ELLIPSIS
