"""The text of a near-duplicate fold: the target keeps its text and gains only what is new.

A near-duplicate (cosine >= ``fold_threshold``) mostly repeats its target: in chat logs it is
often the same turn quoted again with one more line. Appending it whole would store those
sentences twice, make every later read longer, and make the note's vector (which embeds the
whole text, and is re-embedded after every fold) costlier each time. So only the sentences
the target does not already hold are appended. Nothing is lost: the full folded text is kept in
the note's ``evolution_history`` (``folded_text``) and its hash in ``folded_hashes``.

Sentences are compared with their speaker: ``Caroline: Yes.`` and ``Mel: Yes.`` differ. A
speaker is the ``Name:`` that opens a line or a sentence, and holds until another one opens; a
kept sentence whose speaker differs from the sentence kept before it gets its ``Name:`` back.
"""

from __future__ import annotations

from typing import Iterator

from .enrich.context import line_sentences
from .enrich.english import LABELS
from .enrich.keywords import split_speaker


def fold_content(target: str, new: str) -> str:
    """``target`` plus a paragraph of the sentences of ``new`` it lacks (``target`` if none)."""
    if new.strip() in target:
        return target
    held = {_key(speaker, sentence) for speaker, sentence, _ in _sentences(target)}
    lines: list[str] = []
    last_line, last_speaker, out = -1, None, ""
    for speaker, sentence, line in _sentences(new):
        if _key(speaker, sentence) in held:
            continue
        named = speaker is not None and speaker != last_speaker
        piece = f"{speaker}: {sentence}" if named else sentence
        if line != last_line and out:
            lines.append(out)
            out = ""
        out = f"{out} {piece}" if out else piece
        last_line, last_speaker = line, speaker
    if out:
        lines.append(out)
    return f"{target}\n\n" + "\n".join(lines) if lines else target


def _sentences(text: str) -> Iterator[tuple[str | None, str, int]]:
    """``(speaker, sentence without its Name:, line number)`` for each sentence of ``text``."""
    speaker: str | None = None
    for number, line in enumerate(text.splitlines()):
        for part in line_sentences(line):
            name, rest = split_speaker(part)
            if name is not None and name.lower() not in LABELS:
                speaker, part = name, rest
            yield speaker, part, number


def _key(speaker: str | None, sentence: str) -> tuple[str, str]:
    return (speaker or "").casefold(), sentence.casefold()


__all__ = ["fold_content"]
