"""Markdown and plain text cut into notes: one a paragraph, under its headings, fences whole.

``split_document`` is what ``amem.importer`` uses: it reads a document line by line and gives
(line number, item) pairs, one item (``{"text", "subjects"}``) per paragraph; ``heading_text``
is a heading's words.
A paragraph that a fenced code block makes longer than a note may be is cut around the block
(and a block too long alone between its lines), said through ``warn``; so is a paragraph of
a page's lines (``block_lines``: each a ``<div>``, ``<li>`` or ``<br>`` line a browser draws
apart), cut between them.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Callable, Iterable, Iterator, TextIO

from .docmeta import LOGSEQ_PROPERTY, DocMeta, inline_tags, read_fields
from .notes import MAX_ITEM_CHARS, MAX_LIST_ITEMS

#: called with (line number, what to say) when a document is read in a way worth saying
Warn = Callable[[int, str], None]

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")
# CommonMark fences: three or more backticks or tildes, indented at most three spaces
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


def heading_text(line: str) -> str:
    """A Markdown heading's words: the opening and closing ``#`` runs taken off, at most
    ``MAX_ITEM_CHARS`` characters (a subject's limit)."""
    words = line.strip().lstrip("#").strip()
    words = re.sub(r"\s+#+$", "", words) if words.strip("#") else ""
    return words[:MAX_ITEM_CHARS].strip()


def _opens_fence(line: str) -> str | None:
    """The backtick or tilde run with which ``line`` opens a fenced code block, or None (a
    backtick fence's info string holds no backtick: "``` a`b" is text)."""
    mark = _FENCE_OPEN.match(line.rstrip("\r\n"))
    if mark is None or (mark.group(1)[0] == "`" and "`" in mark.group(2)):
        return None
    return mark.group(1)


def _closes_fence(line: str, marker: str) -> bool:
    """Whether ``line`` closes the block ``marker`` opened: a run of the same character, at
    least as long, alone on its line."""
    mark = _FENCE_CLOSE.match(line.rstrip("\r\n"))
    return (mark is not None and mark.group(1)[0] == marker[0]
            and len(mark.group(1)) >= len(marker))


def split_document(handle: TextIO, title: str, *, derive: bool, max_chars: int | None = None,
                   warn: Warn | None = None,
                   tagged: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """One note per paragraph (blank-line separated); a Markdown heading starts a new one.

    A heading is no note of its own: it opens the paragraph after it, which it titles, even
    across a blank line. A heading with no paragraph after it is dropped. Every note gets the
    document's subjects: its title, then the headings it sits under (outermost first), so a
    paragraph that does not name what it is about is still found by a question that does
    (docs/retrieval-next.md, "Subjects reach ranking"). With ``derive``, a level-1 heading
    before the first paragraph is the document's title instead of ``title`` (the file name).

    A fenced code block (``` or ~~~) is part of the paragraph it sits in, whole: its blank
    lines end no paragraph and its "# comment" lines are no headings. One never closed runs to
    the end of the file, as in CommonMark. Only where a code block makes its paragraph longer
    than ``max_chars`` is the paragraph cut (``_fitted``).

    Front matter's ``tags`` are every note's tags, and its ``aliases`` subjects after the
    title (``amem.docmeta``); with ``tagged``, a paragraph's own ``#tags`` (not in its code)
    are its note's tags too: a tag names the lines it sits in (a Logseq block), and a note is
    a paragraph here.
    """
    lines, front = _front_matter(handle)
    yield from split_lines(lines, title, derive=derive, front=front, max_chars=max_chars,
                           warn=warn, tagged=tagged)


def split_lines(lines: Iterable[tuple[int, str]], title: str, *, derive: bool,
                front: DocMeta | None = None, max_chars: int | None = None,
                warn: Warn | None = None, tagged: bool = True,
                block_lines: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """``split_document`` of numbered lines whose front matter (``front``) was read apart:
    a page's converted text (``amem.importhtml``), an Evernote note's.

    With ``block_lines`` each line is a block of its own (a page's ``<div>``, ``<li>`` or
    ``<br>`` line, not Markdown's soft-wrapped prose), so a paragraph longer than ``max_chars``
    is cut between its lines instead of refused (``_fitted``)."""
    front = front or DocMeta()
    if derive and front.title:
        title, derive = front.title, False
    block: list[tuple[int, str]] = []  # (line number, line) of the paragraph being read
    heading: str | None = None
    path: list[tuple[int, str]] = []  # (level, words) of the headings above the paragraph
    subjects: list[str] = []
    seen_text = False
    fence: str | None = None  # the marker of the code block being read, if one is
    fence_line = 0

    def items() -> Iterator[tuple[int, dict[str, Any]]]:
        tags = _tags(front.tags, block, warn) if tagged else front.tags
        for number, text in _fitted(block, max_chars, warn, block_lines):
            item: dict[str, Any] = {"text": text}
            if subjects:
                item["subjects"] = list(subjects)
            if tags:
                item["tags"] = list(tags)
            yield number, item

    for number, line in lines:
        if fence is not None:  # code, taken as it is
            block.append((number, line))
            if _closes_fence(line, fence):
                fence = None
            continue
        mark = _HEADING.match(line)
        if not line.strip() or (mark and block):
            if block:
                yield from items()
                block = []
            if not line.strip():
                continue
        if mark:
            heading = line.strip()
            level, words = len(mark.group(1)), heading_text(line)
            if derive and level == 1 and not seen_text and words:
                title, derive = words, False
            path = [(lv, w) for lv, w in path if lv < level] + ([(level, words)] if words else [])
            continue
        if not block:
            seen_text = True
            subjects = _distinct([title, *front.aliases, *(w for _, w in path)])
            subjects = subjects[:MAX_LIST_ITEMS]
            if heading:
                # the paragraph it titles; numbered as that paragraph, the line its note is
                # reported by
                block.append((number, heading + "\n"))
                heading = None
        block.append((number, line))
        fence = _opens_fence(line)
        if fence is not None:
            fence_line = number  # named if the block is never closed
    if fence is not None and warn is not None:
        warn(fence_line, "a fenced code block opened here is never closed: the rest of the "
                         "file was read as its code")
    if block:
        yield from items()


#: lines a YAML front matter block may take before its opening ``---`` is taken for text
FRONT_MATTER_LINES = 200


def _front_matter(handle: TextIO) -> tuple[Iterator[tuple[int, str]], DocMeta]:
    """The document's numbered lines after its YAML front matter (or Logseq page properties),
    and what they say of it (``amem.docmeta``: a title, tags, aliases).

    Obsidian, Jekyll and Hugo open a note with ``---``, ``key: value`` lines, ``---`` (or
    ``...``): metadata, not a paragraph (it was stored as a note of its own, and being a
    paragraph it kept a ``# Title`` under it from naming the document). A block not closed
    within ``FRONT_MATTER_LINES`` lines is text, read as before. Logseq opens a page with
    ``key:: value`` lines instead: read so while they last, before any other line.
    """
    numbered = enumerate(handle, start=1)
    first = next(numbered, None)
    if first is not None and LOGSEQ_PROPERTY.match(first[1].rstrip("\r\n")):
        held = [first]
        for number, line in numbered:
            if not LOGSEQ_PROPERTY.match(line.rstrip("\r\n")):
                return itertools.chain([(number, line)], numbered), read_fields(
                    (text for _, text in held), logseq=True)
            held.append((number, line))
        return numbered, read_fields((text for _, text in held), logseq=True)
    if first is None or first[1].rstrip("\r\n") != "---":
        return itertools.chain([first] if first else [], numbered), DocMeta()
    held = [first]
    for number, line in numbered:
        held.append((number, line))
        if line.rstrip("\r\n") in ("---", "..."):
            return numbered, read_fields(text for _, text in held[1:-1])
        if len(held) > FRONT_MATTER_LINES:
            break
    return itertools.chain(held, numbered), DocMeta()


def _fitted(block: list[tuple[int, str]], max_chars: int | None,
            warn: Warn | None, block_lines: bool = False) -> Iterator[tuple[int, str]]:
    """The paragraph's text as (first line, text) -- or, when it holds a fenced code block and
    is longer than ``max_chars``, in parts that fit: cut before and after its code blocks, and a
    code block too long alone cut between its lines (said through ``warn``). A paragraph of
    prose alone is left whole, to be refused as too long as before, unless its lines are
    blocks (``block_lines``, a page's): then it is cut between them, said through ``warn``."""
    text = "".join(line for _, line in block).strip()
    fenced = any(_opens_fence(line) for _, line in block)
    if max_chars is not None and len(text) > max_chars and block_lines and not fenced and len(block) > 1:
        yield from _cut_lines(block, max_chars, warn, len(text))
        return
    if max_chars is None or len(text) <= max_chars or not fenced:
        yield block[0][0], text
        return
    parts: list[tuple[int, str]] = []
    for code, lines in _runs(block):
        whole = "".join(line for _, line in lines)
        if code and len(whole.strip()) > max_chars:
            cut = _cut_code(lines, max_chars)
            if warn is not None and len(cut) > 1:
                warn(lines[0][0], f"a fenced code block of {len(whole.strip()):,} characters "
                                  f"is longer than a note may be (max_text_chars "
                                  f"{max_chars:,}): it was cut between its lines into "
                                  f"{len(cut)} notes, each fenced again")
            parts.extend(cut)
        else:
            parts.append((lines[0][0], whole))
    # neighbouring parts that fit together stay one note: prose with its code where it can
    start, joined = parts[0]
    for number, part in parts[1:]:
        if len((joined + part).strip()) <= max_chars:
            joined += part
            continue
        if joined.strip():
            yield start, joined.strip()
        start, joined = number, part
    if joined.strip():
        yield start, joined.strip()


def _cut_lines(block: list[tuple[int, str]], max_chars: int, warn: Warn | None,
               size: int) -> Iterator[tuple[int, str]]:
    """A paragraph of block lines in parts of at most ``max_chars``, cut between lines (a line
    too long alone stays whole, and is refused as too long)."""
    parts: list[tuple[int, str]] = []
    start, joined = block[0][0], ""
    for number, line in block:
        if joined.strip() and len((joined + line).strip()) > max_chars:
            parts.append((start, joined.strip()))
            start, joined = number, ""
        joined += line
    if joined.strip():
        parts.append((start, joined.strip()))
    if warn is not None:
        warn(block[0][0], f"a run of {len(block):,} lines (divs, list items or line breaks) of {size:,} "
                          f"characters is longer than a note may be (max_text_chars {max_chars:,}): "
                          f"it was cut between its lines into {len(parts)} notes")
    yield from parts


def _runs(block: list[tuple[int, str]]) -> list[tuple[bool, list[tuple[int, str]]]]:
    """The paragraph as (is code, lines) runs: prose between code blocks, each block whole."""
    runs: list[tuple[bool, list[tuple[int, str]]]] = []
    fence: str | None = None
    for number, line in block:
        if fence is None:
            fence = _opens_fence(line)
            if fence is not None or not runs or runs[-1][0]:
                runs.append((fence is not None, []))
        elif _closes_fence(line, fence):
            fence = None
            runs[-1][1].append((number, line))
            continue
        runs[-1][1].append((number, line))
    return runs


def _cut_code(lines: list[tuple[int, str]], max_chars: int) -> list[tuple[int, str]]:
    """A code block in parts of at most ``max_chars``, cut between lines; each part opens with
    the block's opening line and closes with a closing one, so each note reads as code (the
    last part of a block never closed stays open, as it is in the file). A single line too
    long for a part stays whole, and is refused as too long."""
    opening = lines[0][1] if lines[0][1].endswith("\n") else lines[0][1] + "\n"
    marker = _opens_fence(opening) or "```"
    closed = len(lines) > 1 and _closes_fence(lines[-1][1], marker)
    closing = marker + "\n"
    room = max_chars - len(opening) - len(closing)
    parts: list[tuple[int, str]] = []
    first, chunk = lines[0][0], ""  # the first part is reported by the opening line
    for number, line in lines[1:-1] if closed else lines[1:]:
        if chunk and len(chunk) + len(line) > room:
            parts.append((first, opening + chunk + closing))
            first, chunk = number, ""
        chunk += line if line.endswith("\n") else line + "\n"
    parts.append((first, opening + chunk + (closing if closed else "")))
    return parts


def _tags(front: list[str], block: list[tuple[int, str]], warn: Warn | None) -> list[str]:
    """The front matter's tags and the paragraph's ``#tags``, at most ``MAX_LIST_ITEMS``."""
    fenced: list[bool] = []
    fence: str | None = None
    for _, line in block:
        if fence is None:
            fence = _opens_fence(line)
            fenced.append(fence is not None)
        else:
            fenced.append(True)
            if _closes_fence(line, fence):
                fence = None
    own = inline_tags((line for _, line in block), fenced)
    tags = front + [t for t in own if t not in front]
    if len(tags) > MAX_LIST_ITEMS and warn is not None:
        warn(block[0][0], f"{len(tags)} tags, more than a note may hold: the first "
                          f"{MAX_LIST_ITEMS} were kept")
    return tags[:MAX_LIST_ITEMS]


def _distinct(names: list[str]) -> list[str]:
    """Non-empty names in order, each once whatever its case ("guide" and "Guide" are one)."""
    kept: dict[str, str] = {}
    for name in names:
        if name:
            kept.setdefault(name.casefold(), name)
    return list(kept.values())


__all__ = ["Warn", "heading_text", "split_document", "split_lines"]
