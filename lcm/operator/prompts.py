"""Depth-aware summary prompts: one system prompt per level (leaf, d1, d2, d3+), exportable and editable.

A leaf summary compresses raw messages; a condensed summary at depth 1 merges leaves, at depth 2
merges those, and from depth 3 on every level is an overview of overviews. Each level has its
own template. The built-in set (:data:`DEFAULT_PROMPTS`) is what the summarizer uses unless
``summaryPromptsDir`` names a directory of edited templates: ``leaf.txt``, ``d1.txt``,
``d2.txt``, ``d3plus.txt``; a level without its file keeps the built-in text.

API (stable since ``kit-repair``):

- :func:`level_for` ``(kind, depth) -> str``: the level a summary is written at.
- :class:`PromptSet`: ``templates`` by level and ``origins`` (``built-in`` or the file);
  ``system_for(kind, depth)``. :meth:`PromptSet.default` is the built-in set.
- :func:`uses_previous` ``(kind, depth) -> bool`` and :func:`previous_context_block` ``(text) -> str``:
  the reference's ``previous_context``, the preceding summary of the same level handed to the
  leaf and d1 prompts so a summary continues the one before it instead of repeating it.
- :func:`load_prompts` ``(directory) -> PromptSet``; :func:`export_prompts` ``(prompts, directory,
  *, overwrite=False) -> list[Path]``; :func:`diff_prompts` ``(old, new) -> dict[level, diff]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lcm.errors import LcmConfigError, LcmValidationError
from lcm.extract import FOOTER_PREFIX

__all__ = ["LEVELS", "FILE_NAMES", "DEFAULT_PROMPTS", "PromptSet", "level_for", "load_prompts",
           "export_prompts", "diff_prompts", "uses_previous", "previous_context_block", "PREVIOUS_LEVELS"]  # fmt: skip

LEVELS = ("leaf", "d1", "d2", "d3+")
#: the file of each level in a prompts directory ("+" is awkward in file names on some systems)
FILE_NAMES = {"leaf": "leaf.txt", "d1": "d1.txt", "d2": "d2.txt", "d3+": "d3plus.txt"}

_FOOTER = (f"End with one line that starts with '{FOOTER_PREFIX}' followed by a comma-separated list "
           "of topics whose details you left out.")  # fmt: skip

DEFAULT_PROMPTS: Mapping[str, str] = {
    # the leaf prompt is the summarizer's original one, word for word: existing stores keep
    # getting the summaries they were getting
    "leaf": (
        "You compress part of a conversation into a summary that a later reader will use to recall "
        "what happened. Keep every name, number, date, file path, command, error message and "
        f"decision. Drop greetings and filler. Write plain text, no preamble. {_FOOTER}"
    ),
    "d1": (
        "You merge consecutive summaries of one conversation into a single summary, in the order "
        "things happened. Keep every name, number, date, file path, command, error message and "
        "decision that still matters; fold repeated attempts into their outcome. Write plain text, "
        f"no preamble. {_FOOTER}"
    ),
    "d2": (
        "You merge summaries that each already cover a stretch of one conversation. Write the arc "
        "of the work: goals, decisions with their reasons, outcomes, open problems. Keep the "
        "identifiers a reader would search for (names, paths, ids, versions, dates). Plain text, "
        f"no preamble. {_FOOTER}"
    ),
    "d3+": (
        "You write a durable overview of a long conversation from summaries of its parts. Keep "
        "what stays true and useful later: who and what it was about, decisions and their "
        "reasons, results, conventions agreed, unresolved questions, and the key identifiers. "
        f"Plain text, no preamble. {_FOOTER}"
    ),
}


def level_for(kind: str, depth: int) -> str:
    """The prompt level of a summary: ``leaf``, ``d1``, ``d2`` or ``d3+``."""
    if kind == "leaf":
        return "leaf"
    if kind != "condensed":
        raise LcmValidationError(f"summary kind must be leaf or condensed; got {kind!r}", field="kind")
    return "d1" if depth <= 1 else "d2" if depth == 2 else "d3+"


#: the levels whose prompt gets the preceding summary (the reference's leaf and d1 prompts): their
#: summaries follow each other in time; from d2 on a summary is an overview, not a continuation
PREVIOUS_LEVELS = ("leaf", "d1")


def uses_previous(kind: str, depth: int) -> bool:
    """Whether a summary of ``kind`` at ``depth`` is written with the previous summary as context."""
    return level_for(kind, depth) in PREVIOUS_LEVELS


def previous_context_block(text: str) -> str:
    """The part of the summarizer's request that carries the previous summary (empty for none)."""
    if not text.strip():
        return ""
    return ("Previous summary (context only: it is already recorded. Do not repeat it; summarize only the "
            f"new material below, and refer to it where the new material continues it):\n{text.strip()}\n\n")


@dataclass(frozen=True)
class PromptSet:
    """One template per level, and where each came from (``built-in`` or a file path)."""

    templates: Mapping[str, str]
    origins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls) -> PromptSet:
        return cls(dict(DEFAULT_PROMPTS), {lv: "built-in" for lv in LEVELS})

    def system_for(self, kind: str, depth: int) -> str:
        return self.templates[level_for(kind, depth)]

    def to_dict(self) -> dict[str, object]:
        return {"templates": dict(self.templates), "origins": dict(self.origins)}


def load_prompts(directory: str | Path) -> PromptSet:
    """The templates of ``directory`` over the built-in ones (a missing level keeps its default).

    Raises:
        LcmConfigError: the directory is missing, holds an unknown ``*.txt`` (a misspelled level
            would be silently ignored otherwise) or an empty template; ``key`` is
            ``summaryPromptsDir``.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise LcmConfigError(f"summaryPromptsDir {str(root)!r} is not a directory", key="summaryPromptsDir")
    known = set(FILE_NAMES.values())
    unknown = sorted(p.name for p in root.glob("*.txt") if p.name not in known)
    if unknown:
        raise LcmConfigError(f"summaryPromptsDir {str(root)!r} holds {', '.join(unknown)}; the prompt files are "
                             f"{', '.join(FILE_NAMES.values())}", key="summaryPromptsDir")  # fmt: skip
    templates, origins = dict(DEFAULT_PROMPTS), {lv: "built-in" for lv in LEVELS}
    for level, name in FILE_NAMES.items():
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8").strip()
        if not text:
            raise LcmConfigError(f"prompt file {str(path)!r} is empty (delete it to keep the built-in {level} prompt)",
                                 key="summaryPromptsDir")  # fmt: skip
        templates[level], origins[level] = text, str(path)
    return PromptSet(templates, origins)


def export_prompts(prompts: PromptSet, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
    """Write every level's template to ``directory`` (created); returns the files written.

    Raises:
        LcmValidationError: a file exists and ``overwrite`` is false (nothing is written then).
    """
    root = Path(directory).expanduser()
    paths = [root / FILE_NAMES[lv] for lv in LEVELS]
    existing = [str(p) for p in paths if p.exists()]
    if existing and not overwrite:
        raise LcmValidationError(f"{', '.join(existing)} already exist; pass overwrite to replace them",
                                 field="directory")  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    for lv, path in zip(LEVELS, paths):
        path.write_text(prompts.templates[lv].rstrip("\n") + "\n", encoding="utf-8")
    return paths


def diff_prompts(old: PromptSet, new: PromptSet) -> dict[str, str]:
    """A unified diff per level that differs (levels that are the same are left out)."""
    out: dict[str, str] = {}
    for lv in LEVELS:
        a, b = old.templates[lv].strip(), new.templates[lv].strip()
        if a != b:
            out[lv] = "".join(difflib.unified_diff(_lines(a), _lines(b), f"{lv} ({old.origins.get(lv, 'old')})",
                                                   f"{lv} ({new.origins.get(lv, 'new')})"))  # fmt: skip
    return out


def _lines(text: str) -> list[str]:
    # one sentence a line: the templates are single paragraphs, and a diff of one long line says little
    parts = [s.strip() for s in text.replace(". ", ".\n").splitlines()]
    return [p + "\n" for p in parts if p]
