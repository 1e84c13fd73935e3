"""An HTML page read as a document (``amem.docsplit``): its text as Markdown-like lines, each
numbered by the line of the page it comes from.

What a saved page, an Apple Notes or a Notion HTML export holds is read as the Markdown
reader reads a note: a paragraph (``<p>``, a list, a quote, a table) is a note, ``<h1>`` to
``<h6>`` are its headings (the heading path its subjects), ``<pre>`` is a fenced code block
kept whole, the ``<title>`` is the document's title. A ``<div>`` of text is a line, as the
note apps write one (Evernote, Apple Notes), and an empty one (``<div><br></div>``, their blank
line) ends the paragraph, as two ``<br>`` in a row do. A ``<div>`` that holds other ``<div>``
is a page's layout (a post, a comment, a menu): where its first inner one opens and where it
closes end the paragraph, so a page built of nested divs is read as the blocks a browser
draws, not as one paragraph too long to store. A run of lines still too long for one note is
cut between its lines by the splitter (``amem.docsplit``, ``block_lines``): each line is a
block the browser shows apart. Scripts, styles and other things a
browser does not show as text are dropped. The stdlib ``html.parser`` reads it, fed a chunk
at a time: only the page's unfinished tag and one paragraph are held. It never fetches
anything and knows only HTML's own character references: an entity a page declares is
text, not expanded.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Iterable, Iterator, TextIO

#: characters fed to the parser at a time
CHUNK = 1 << 16
#: elements whose content is no text a reader sees
_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe",
                     "object", "canvas", "head", "en-media", "button", "select"})
#: elements that end the paragraph before and after them
_BLOCKS = frozenset({"p", "section", "article", "main", "header", "footer", "aside",
                     "nav", "ul", "ol", "dl", "table", "blockquote", "figure", "form",
                     "fieldset", "details", "hr", "address", "body", "html", "en-note"})
#: elements that start a new line inside the paragraph
_LINES = frozenset({"li", "tr", "dt", "dd", "figcaption", "summary", "caption"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col",
                   "embed", "source", "track", "wbr"})
# a text line that would read as a Markdown heading or fence: indented past what makes one
_MARKDOWNISH = re.compile(r"^(#{1,6}(\s|$)|`{3,}|~{3,})")


class _Reader(HTMLParser):
    """The page's text as numbered lines, a blank one between paragraphs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[tuple[int, str]] = []
        self.title = ""
        self._hidden: list[str] = []  # the hidden elements open, innermost last
        self._in_title = False
        self._pre = 0
        self._heading = 0
        self._line: list[str] = []  # the words of the line being read
        self._line_at = 0  # its first word's line in the page
        self._cells = 0
        self._divs: list[list[int]] = []  # for each open <div>: [the lines said before it, its inner divs]
        self._breaks = 0  # <br> in a row with no text between: two are a blank line

    # -- lines --------------------------------------------------------------------------
    def _end_line(self) -> None:
        text = " ".join("".join(self._line).split())
        self._line = []
        self._cells = 0
        if not text:
            return
        if self._heading:
            text = "#" * self._heading + " " + text
        elif _MARKDOWNISH.match(text):
            text = "    " + text  # its words, not a heading or a fence of the document's
        self.out.append((self._line_at, text + "\n"))

    def _end_paragraph(self) -> None:
        self._end_line()
        if self.out and self.out[-1][1] != "\n":
            self.out.append((self.getpos()[0], "\n"))

    # -- the parser's callbacks ---------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._hidden:
            if tag == self._hidden[-1] or (tag in _HIDDEN and tag not in _VOID):
                self._hidden.append(tag)
            return
        if tag == "title":
            self._in_title = True
        elif tag in _HIDDEN:
            if tag != "head" and tag not in _VOID:
                self._hidden.append(tag)
        elif tag in _HEADINGS:
            self._end_paragraph()
            self._heading = _HEADINGS[tag]
        elif tag == "pre":
            self._end_paragraph()
            self.out.append((self.getpos()[0], "```\n"))
            self._pre += 1
        elif tag in _BLOCKS:
            self._end_paragraph()
        elif tag == "div":
            if self._divs and not self._divs[-1][1]:
                self._end_paragraph()  # its parent holds divs: a layout block, what it said before is apart
            else:
                self._end_line()
            if self._divs:
                self._divs[-1][1] += 1
            self._divs.append([len(self.out), 0])
        elif tag in _LINES or tag == "br":
            if self._pre:
                self._line.append("\n")
            elif tag == "br" and self._breaks and not "".join(self._line).strip():
                self._end_paragraph()  # <br><br>: a blank line, as a browser draws it
            else:
                self._end_line()
            self._breaks = self._breaks + 1 if tag == "br" else 0
            if tag == "li":
                self._words("- ")
        elif tag in ("td", "th"):
            if self._cells:
                self._words(" | ")
            self._cells += 1
        elif tag == "en-todo":  # Evernote's check box
            self._words("[x] " if dict(attrs).get("checked") == "true" else "[ ] ")

    def handle_endtag(self, tag: str) -> None:
        if self._hidden:
            if tag == self._hidden[-1]:
                self._hidden.pop()
            return
        if tag == "title":
            self._in_title = False
        elif tag in _HEADINGS and self._heading:
            self._end_line()
            self._heading = 0
        elif tag == "pre" and self._pre:
            self._pre -= 1
            code = "".join(self._line).strip("\n")
            self._line = []
            for number, line in enumerate(code.split("\n")):
                self.out.append((self._line_at + number, line + "\n"))
            self.out.append((self.getpos()[0], "```\n"))
            self._end_paragraph()
        elif tag in _BLOCKS:
            self._end_paragraph()
        elif tag == "div" and self._divs:
            self._end_line()
            before, inner = self._divs.pop()
            if inner or len(self.out) == before:  # a layout block closes, or an empty line (<div><br></div>)
                self._end_paragraph()
        elif tag in _LINES and not self._pre:
            self._end_line()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title = " ".join((self.title + " " + data).split())
        elif not self._hidden:
            if data.strip():
                self._breaks = 0
            self._words(data)

    def _words(self, data: str) -> None:
        if not self._line:
            self._line_at = self.getpos()[0]
        self._line.append(data)

    def close(self) -> None:
        super().close()
        if self._pre:  # a <pre> never closed: its code, fenced
            self.handle_endtag("pre")
        self._end_paragraph()


class HtmlLines:
    """The numbered lines of a page, read from ``chunks``; ``title`` is its ``<title>``, known
    once its first line has been read (the head comes before the body)."""

    def __init__(self, chunks: Iterable[str], first_line: int = 1) -> None:
        self._chunks = chunks
        self._reader = _Reader()
        self._offset = first_line - 1

    @property
    def title(self) -> str:
        return self._reader.title

    def __iter__(self) -> Iterator[tuple[int, str]]:
        reader = self._reader
        for chunk in self._chunks:
            reader.feed(chunk)
            yield from self._drain()
        reader.close()
        yield from self._drain()

    def _drain(self) -> Iterator[tuple[int, str]]:
        out, self._reader.out = self._reader.out, []
        for number, line in out:
            yield number + self._offset, line


def chunks_of(handle: TextIO) -> Iterator[str]:
    """A text stream a ``CHUNK`` at a time."""
    while chunk := handle.read(CHUNK):
        yield chunk


__all__ = ["HtmlLines", "chunks_of"]
