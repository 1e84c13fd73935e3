"""A near-duplicate fold: the target keeps its text and gains only what is new.

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

from typing import Any, Iterator

from ..enrich.context import line_sentences
from ..enrich.english import LABELS
from ..enrich.keywords import split_speaker
from ..notes import Note, content_hash, unique, unique_subjects, unique_tags

#: the fields a fold changes (written as a field update of the target, never a whole note)
FOLD_FIELDS = ("content", "hash", "folded_hashes", "keywords", "tags", "subjects",
               "evolution_history")
#: the lists a fold unions (``topics`` too, recorded though a fold leaves them as they are)
_LISTS = ("keywords", "tags", "subjects", "topics")


def fold_into(target: Note, new: Note, similarity: float, at: str) -> dict[str, Any]:
    """Fold ``new`` into ``target`` (changed in place); returns the changed fields.

    The text gains the sentences it lacks, the hash list both texts' hashes (exact dedup then
    knows the folded text), keywords, tags and subjects their union; the history records the
    whole folded text.
    """
    old_hash, old_tags, old_content = target.hash, list(target.tags), target.content
    before = {name: list(getattr(target, name)) for name in _LISTS}
    target.content = fold_content(target.content, new.content)
    target.hash = content_hash(target.content)
    target.folded_hashes = unique([*target.folded_hashes, old_hash, new.hash])
    target.keywords = unique([*target.keywords, *new.keywords])
    target.tags = unique_tags([*target.tags, *new.tags])
    target.subjects = unique_subjects([*target.subjects, *new.subjects])
    # What ``amem separate`` needs to undo the fold exactly: the paragraph appended, the lists
    # the text came with and those it added, and the text's own times and labels (the note
    # keeps its own; the new note was never stored, so this entry is all that is left of it).
    entry: dict[str, Any] = {
        "triggered_by": new.id, "at": at, "action": "fold", "similarity": similarity,
        "folded_text": new.content, "old_context": target.context,
        "new_context": target.context, "old_tags": old_tags, "new_tags": list(target.tags),
        "appended": target.content[len(old_content) + 2:] if target.content != old_content else "",
        "brought": {name: list(getattr(new, name)) for name in _LISTS},
        "added": {name: [v for v in getattr(target, name) if v not in before[name]]
                  for name in _LISTS},
        "timestamp": new.timestamp, "event_time": new.event_time}
    if new.metadata:
        entry["metadata"] = dict(new.metadata)
    target.evolution_history = [*target.evolution_history, entry]
    return {name: getattr(target, name) for name in FOLD_FIELDS}


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


__all__ = ["FOLD_FIELDS", "fold_content", "fold_into"]
