"""User regexes on RE2: matching in linear time, refused constructs named, bounded scans of long texts.

Python's ``re`` backtracks and cannot be interrupted, so one pattern such as ``(.+){20}Q``
could hold a thread for hours. Every pattern a caller sends is compiled by RE2
(``google-re2``), whose automata run in time linear in the text. RE2 has no backreferences,
lookarounds, atomic groups, possessive quantifiers or conditionals: such a pattern is refused
with ``regex_refused`` naming the construct. A compiled program is capped at
``MAX_PROGRAM_SIZE`` instructions (counted repeats such as ``{1,1000}`` expand into copies),
because the fallback automaton's cost per byte grows with the program.

The dialect differs from Python ``re`` in ways callers may notice: ``\\w``, ``\\d``, ``\\s`` and
``\\b`` are ASCII-only (``\\pL``, ``\\p{Han}`` match Unicode letters), ``$`` without ``(?m)`` is
the end of the text only, and ``\\z`` replaces ``\\Z``. Case-insensitive matching, ``(?i)``,
folds Unicode.

A long text is scanned in overlapping windows sized to the program, so one engine call stays
in the milliseconds and the caller's deadline is checked between calls (a match longer than
the overlap that straddles a window boundary can be missed in texts longer than one window).
The module also extracts a literal every match must contain, so a scan can be narrowed with
the trigram index first.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from typing import Any

import re2

from lcm.errors import RegexRefusedError

__all__ = ["UserRegex", "DeadlineExceeded", "compile_user_regex", "required_literal", "MAX_PATTERN_LENGTH",
           "MAX_PROGRAM_SIZE"]  # fmt: skip

MAX_PATTERN_LENGTH = 500
#: RE2 instructions a pattern may compile to; (\w+\s?){1,60}$ is 602, \pL alone is about 1,200
MAX_PROGRAM_SIZE = 5000
#: RE2 memory per pattern (program + DFA cache). The re2 module caches 128 compiled patterns,
#: so this bounds what distinct hostile patterns can pin (128 x 2 MiB).
_MAX_MEM = 2 << 20
#: instruction-bytes one engine call may cover (~1.5-20 ns each at worst): tens of ms per window
_STEP_BUDGET = 8_000_000
_MIN_WINDOW = 2048
_MAX_WINDOW = 65536

# RE2's parse errors name the fragment it stopped at; say what that construct is.
_PERL_OPERATORS = (
    ("(?<=", "a lookbehind (?<=...)"), ("(?<!", "a negative lookbehind (?<!...)"),
    ("(?=", "a lookahead (?=...)"), ("(?!", "a negative lookahead (?!...)"),
    ("(?>", "an atomic group (?>...)"), ("(?(", "a conditional (?(...)"),
    ("(?#", "a comment group (?#...)"), ("(?R", "recursion (?R)"),
)  # fmt: skip
_NAMED_BACKREF = re.compile(r"\(\?P=|\(\?P>|\(\?&")


class DeadlineExceeded(Exception):
    """A scan reached its deadline inside one long text."""


@dataclass(frozen=True)
class UserRegex:
    """A caller's pattern compiled by RE2, with the literal every match must contain."""

    pattern: str
    compiled: Any  # re2._Regexp; the re2 package ships no type information
    literal: str | None
    program_size: int

    @property
    def window(self) -> int:
        """Bytes one engine call may scan, so its worst case stays a few milliseconds."""
        return max(_MIN_WINDOW, min(_MAX_WINDOW, _STEP_BUDGET // max(1, self.program_size)))

    def match_end(self, text: str, at: int) -> int:
        """Where the match that :meth:`positions` found starting at character ``at`` ends (a
        character offset), read within one window as a scan is (a longer match is cut there);
        ``at`` itself when nothing matches there."""
        data = text.encode("utf-8")
        start = len(text[:at].encode("utf-8"))
        m = self.compiled.search(data, start, min(len(data), start + self.window))
        if m is None or m.start() != start:
            return at
        return at + len(data[start:m.end()].decode("utf-8", errors="replace"))

    def positions(self, text: str, deadline: float, want: int) -> list[int]:
        """Character offsets where up to ``want`` matches start, checking ``deadline`` between windows.

        Raises:
            DeadlineExceeded: the deadline passed before the text was scanned.
        """
        data = text.encode("utf-8")
        size, window = len(data), self.window
        found: set[int] = set()  # windows overlap: a match there is seen twice
        pos = 0
        while True:
            end = size if size - pos <= window else _char_start(data, pos + window)
            at = pos
            # search, not finditer: one engine call per match is the cheap path through re2's
            # wrapper, and most rows are a single call. pos/endpos keep the whole text as
            # context, so ^, $ and \b mean the text's edges, not a window's.
            while len(found) < want and at <= end:
                m = self.compiled.search(data, at, end)
                if m is None:
                    break
                found.add(m.start())
                at = m.end() if m.end() > m.start() else _next_char(data, m.start())
            if len(found) >= want or end >= size:
                break
            if time.monotonic() > deadline:
                raise DeadlineExceeded
            pos = _char_start(data, max(pos + 1, end - window // 8))
        if size == len(text):  # ASCII: byte offsets are character offsets
            return sorted(found)
        return [len(data[:o].decode("utf-8")) for o in sorted(found)]


def _char_start(data: bytes, i: int) -> int:
    """``i`` moved back to the first byte of a UTF-8 character."""
    while 0 < i < len(data) and data[i] & 0xC0 == 0x80:
        i -= 1
    return i


def _next_char(data: bytes, i: int) -> int:
    """The first byte of the UTF-8 character after the one at ``i`` (past the end: ``len + 1``)."""
    i += 1
    while i < len(data) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


def _refusal(pattern: str, error: str) -> str:
    """Name the construct behind an RE2 parse error."""
    if error.startswith("invalid perl operator: "):
        fragment = error.split(": ", 1)[1]
        if _NAMED_BACKREF.search(pattern):
            return "a named backreference or subroutine call such as (?P=name) is not supported"
        for prefix, name in _PERL_OPERATORS:
            if fragment.startswith(prefix):
                return f"{name} is not supported"
        if re.match(r"\(\?[+-]?\d", fragment):
            return f"recursion {fragment}) is not supported"
        return f"the group or flag {fragment} is not supported (RE2 flags: i, m, s, U)"
    if error.startswith("invalid escape sequence: "):
        esc = error.split(": ", 1)[1]
        if re.fullmatch(r"\\[1-9]|\\g", esc):
            return f"a backreference {esc} is not supported"
        if esc == "\\Z":
            return "\\Z is not supported; use \\z for the end of the text"
        return f"the escape {esc} is not supported"
    if error.startswith("bad repetition operator: "):
        op = error.split(": ", 1)[1]
        if op.endswith("+"):
            return f"a possessive quantifier {op} is not supported"
        return f"a quantifier on a quantifier ({op}) is not supported"
    if error.startswith("invalid repetition size"):
        return f"{error}: a counted repeat allows at most 1000"
    if "pattern too large" in error:
        return "the pattern is too large once its counted repeats are expanded; use smaller {m,n} counts"
    return f"invalid regex: {error}"


def compile_user_regex(pattern: str) -> UserRegex:
    """Compile a caller's pattern with RE2, or raise RegexRefusedError saying why not."""
    if not isinstance(pattern, str) or not pattern:
        raise RegexRefusedError("regex refused: the pattern is empty", pattern=str(pattern))
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexRefusedError(f"regex refused: longer than {MAX_PATTERN_LENGTH} characters", pattern=pattern)
    options = re2.Options()
    options.never_capture = True  # only match starts are used; no submatch tracking needed
    options.log_errors = False  # RE2 would log every refused pattern to stderr
    options.max_mem = _MAX_MEM
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else ""
        message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise RegexRefusedError(f"regex refused: {_refusal(pattern, message)}", pattern=pattern) from None
    size = int(compiled.programsize)
    if size > MAX_PROGRAM_SIZE:
        raise RegexRefusedError(
            f"regex refused: the pattern compiles to {size} instructions (limit {MAX_PROGRAM_SIZE}); "
            "use smaller {m,n} counts or fewer Unicode classes",
            pattern=pattern,
        )
    return UserRegex(pattern, compiled, required_literal(pattern), size)


# Where RE2 reads a pattern differently from Python's parser, the literal could be wrong
# (RE2 reads [[:alpha:]] as one class, Python as a class and a "]"): no literal then.
_DIALECT_GAPS = re.compile(r"\[:|\\[pPQECz]")


def required_literal(pattern: str) -> str | None:
    """The longest literal run (3+ chars) every match must contain, for index pre-filtering.

    None when unsure: then the scan reads every row in scope, which is slower but never wrong.
    """
    if _DIALECT_GAPS.search(pattern):
        return None
    try:
        from re import _parser  # type: ignore[attr-defined]  # Python 3.11+ private parser

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning on nested-set syntax
            parsed = _parser.parse(pattern, 0)
        const = _parser  # LITERAL / SUBPATTERN live on the parser module's namespace
    except Exception:  # anything Python cannot parse gets no pre-filter
        return None
    folded = bool(parsed.state.flags & re.IGNORECASE)
    best = ""
    run = ""
    for op, av in parsed:
        chars = None
        if op is const.LITERAL:
            chars = chr(av)
        elif op is const.SUBPATTERN and not av[1] and not av[2] and all(o is const.LITERAL for o, _ in av[-1]):
            chars = "".join(chr(a) for _, a in av[-1])
        # control characters end a run: FTS5 cannot take a NUL inside a query string
        if chars is None or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in chars):
            best, run = max(best, run, key=len), ""
            continue
        run += chars
    best = max(best, run, key=len)
    if len(best) < 3 or (folded and not best.isascii()):
        return None  # RE2 and the trigram index may fold non-ASCII case differently
    return best
