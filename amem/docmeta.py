"""What a Markdown note says about itself besides its paragraphs: its front matter (a title,
tags, aliases) and the ``#tags`` written in its text.

Obsidian keeps a note's tags in YAML front matter (``tags: [a, b]``, ``tags: a, b``,
``tags: a b`` or a ``- a`` list; ``tag:`` in older vaults) and in its text (``#idea``,
``#project/amem``); aliases (``aliases:``, ``alias:``) are other names of what the note is
about. Logseq writes the same as page properties on the first lines (``tags:: a, [[b c]]``,
``alias:: x``) and tags in the text as ``#tag`` or ``#[[two words]]``. Dropped, a vault lost
the labels its user filed it by; here they become the notes' tags (normalised as the store's
are: ``amem.enrich.offline.normalise_tag``) and the aliases their subjects.

Not a tag: a ``#`` not at a word's start (a URL's ``page#part``, ``C#``, ``&#39;``), one
followed by a space (a ``# Heading``), digits alone (``#1``, an issue's number), and any ``#``
inside a fenced code block or an inline code span.

Only a small YAML subset is read (top-level ``key: value`` and ``- item`` lists): front
matter is the user's metadata, never code; anything else in it is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from .enrich.offline import normalise_tag
from .notes import MAX_ITEM_CHARS, MAX_LIST_ITEMS

_KEY = re.compile(r"^([A-Za-z_][\w-]*):[ \t]*(.*?)[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*-[ \t]+(.*?)[ \t]*$")
#: a Logseq page property line: ``key:: value``
LOGSEQ_PROPERTY = re.compile(r"^([A-Za-z_][\w-]*)::[ \t]*(.*?)[ \t]*$")
# a tag starts a word (after a space, a bracket or the line's start) and holds letters,
# digits, _, -, /; Logseq's #[[two words]] too
_INLINE = re.compile(r"(?:^|(?<=[\s(\[,;]))#(?:\[\[([^\]\n]+)\]\]|([^\W][\w/-]*))")
_CODE_SPAN = re.compile(r"(`+).+?\1")
_WIKI = re.compile(r"\[\[([^\]]+)\]\]")


@dataclass
class DocMeta:
    """What a document's front matter (or Logseq page properties) says about it."""

    title: str = ""
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1].strip()
    return value


def _scalar_list(value: str, *, spaces: bool) -> list[str]:
    """``[a, b]``, ``a, b`` (and for tags ``a b``) as its items; ``[[x y]]`` is one item."""
    value = value.strip()
    if value.startswith("[") and value.endswith("]") and not value.startswith("[["):
        value = value[1:-1]
    # a [[wiki link]] holds spaces and commas that split nothing
    held: list[str] = []

    def hold(link: re.Match[str]) -> str:
        held.append(link.group(1))
        return f"\x00{len(held) - 1}\x00"

    value = _WIKI.sub(hold, value)
    parts = [p for p in re.split(r"[,;]" if not spaces else r"[,;\s]+", value) if p.strip()]
    return [re.sub(r"\x00(\d+)\x00", lambda m: held[int(m.group(1))], _unquoted(p))
            for p in parts]


def tags_of(values: Iterable[str]) -> list[str]:
    """Tags as the store keeps them: without a leading ``#``, normalised, each once."""
    out: list[str] = []
    for value in values:
        tag = normalise_tag(value.strip().lstrip("#"))
        if tag and not tag.isdigit() and tag not in out:
            out.append(tag)
    return out


def _names(values: Iterable[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        name = _unquoted(value)[:MAX_ITEM_CHARS].strip()
        if name and name.casefold() not in {n.casefold() for n in out}:
            out.append(name)
    return out


def read_fields(lines: Iterable[str], *, logseq: bool = False) -> DocMeta:
    """The title, tags and aliases of front matter's lines (between its ``---`` fences), or
    with ``logseq`` of Logseq ``key:: value`` page properties."""
    fields: dict[str, list[str]] = {}
    scalar: dict[str, str] = {}
    current: str | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        item = _LIST_ITEM.match(line) if not logseq else None
        if item and current is not None:
            fields.setdefault(current, []).append(item.group(1))
            continue
        key = (LOGSEQ_PROPERTY if logseq else _KEY).match(line)
        if key is None:
            current = None
            continue
        current = key.group(1).lower()
        if key.group(2):
            scalar[current] = key.group(2)
    meta = DocMeta(title=_unquoted(scalar.get("title", ""))[:MAX_ITEM_CHARS].strip())
    for name in ("tags", "tag"):
        meta.tags += fields.get(name, []) + _scalar_list(scalar.get(name, ""), spaces=True)
    for name in ("aliases", "alias"):
        meta.aliases += fields.get(name, []) + _scalar_list(scalar.get(name, ""), spaces=False)
    meta.tags = tags_of(meta.tags)[:MAX_LIST_ITEMS]
    meta.aliases = _names(meta.aliases)
    return meta


def inline_tags(lines: Iterable[str], fenced: Iterable[bool]) -> list[str]:
    """The ``#tags`` written in a paragraph's lines (those of a code block, ``fenced``, left
    out), normalised, each once."""
    found: list[str] = []
    for line, code in zip(lines, fenced):
        if code:
            continue
        for match in _INLINE.finditer(_CODE_SPAN.sub(" ", line)):
            found.append(match.group(1) or match.group(2))
    return tags_of(found)


__all__ = ["DocMeta", "LOGSEQ_PROPERTY", "inline_tags", "read_fields", "tags_of"]
