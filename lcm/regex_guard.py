"""The regex guard: refuse patterns whose backtracking could take exponential or polynomial time.

Python's ``re`` cannot be interrupted, so the guard is static. It parses the pattern and
refuses (1) a repeat inside an unbounded repeat, ``(a+)+``; (2) an unbounded repeat over
alternatives that can start with the same character, ``(a|ab)*``; (3) a backreference under
a repeat; and (4) two unbounded repeats in one sequence that can both consume the same text
with everything between them, ``a.*b.*c`` — each such pair multiplies the work by the
length of the text. The error says how to rewrite the pattern (a short bounded repeat such
as ``.{0,16}``, or full-text mode). What the static rules let through is at worst quadratic,
so the scan also runs the regex over bounded windows of long texts and checks its deadline
between windows (see ``lcm.search``). It also extracts a literal every match must contain so
the scan can be narrowed with the trigram index first.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from typing import Any

from lcm.errors import RegexGuardError

try:  # Python 3.11+; typeshed has no stubs for these private modules, so C and P are Any
    from re import _constants as C  # type: ignore[attr-defined]
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older layout
    import sre_constants as C
    import sre_parse as P

__all__ = ["check_regex", "required_literal", "MAX_PATTERN_LENGTH"]

MAX_PATTERN_LENGTH = 500
_UNBOUNDED = 64  # nested under a repeat allowing more than this many is refused
_POLY = 16  # two repeats allowing more than this many each multiply the work
_PROBE = frozenset(string.printable) | {"é", "中", "ア", "\u00a0"}


def _class_chars(op: Any, av: Any) -> frozenset[str]:
    """Which probe characters a single-character item can match (over-approximated)."""
    if op is C.LITERAL:
        return frozenset({chr(av)}) & _PROBE or frozenset({"é"})
    if op is C.NOT_LITERAL:
        return _PROBE - {chr(av)}
    if op is C.ANY:
        return _PROBE - {"\n"}
    if op is C.IN:
        chars: set[str] = set()
        negate = False
        for sub_op, sub_av in av:
            if sub_op is C.NEGATE:
                negate = True
            elif sub_op is C.LITERAL:
                chars.add(chr(sub_av))
            elif sub_op is C.RANGE:
                lo, hi = sub_av
                chars.update(ch for ch in _PROBE if lo <= ord(ch) <= hi)
            elif sub_op is C.CATEGORY:
                chars.update(_category(sub_av))
            else:
                return _PROBE
        result = frozenset(chars) & _PROBE
        return _PROBE - result if negate else result
    if op is C.CATEGORY:
        return _category(av)
    return _PROBE


def _category(cat: Any) -> frozenset[str]:
    tests: dict[object, Callable[[str], bool]] = {
        C.CATEGORY_DIGIT: str.isdigit,
        C.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdigit(),
        C.CATEGORY_SPACE: str.isspace,
        C.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
        C.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
        C.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == "_"),
    }
    test = tests.get(cat)
    return _PROBE if test is None else frozenset(ch for ch in _PROBE if test(ch))


def _chars(seq: Any) -> frozenset[str]:
    """Every probe character anything in ``seq`` could match (over-approximated)."""
    out: set[str] = set()
    for op, av in seq:
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.CATEGORY):
            out |= _class_chars(op, av)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT if hasattr(C, "POSSESSIVE_REPEAT") else None):
            out |= _chars(av[2])
        elif op is C.SUBPATTERN:
            out |= _chars(av[-1])
        elif op is C.BRANCH:
            for alt in av[1]:
                out |= _chars(alt)
        elif op is C.AT:
            continue
        else:
            return _PROBE
    return frozenset(out)


def _first_chars(seq: Any) -> frozenset[str]:
    for op, av in seq:
        if op is C.AT:
            continue
        if op is C.SUBPATTERN:
            return _first_chars(av[-1])
        if op is C.BRANCH:
            out: set[str] = set()
            for alt in av[1]:
                out |= _first_chars(alt)
            return frozenset(out)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            return _chars(av[2]) if av[0] > 0 else _PROBE
        return _chars([(op, av)])
    return _PROBE  # empty alternative: can match anywhere


def _has(seq: Any, ops: tuple[Any, ...], *, bounded_ok: bool = False) -> bool:
    for op, av in seq:
        if op in ops:
            if not (bounded_ok and op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] <= 1):
                return True
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and _has(av[2], ops, bounded_ok=bounded_ok):
            return True
        if op is C.SUBPATTERN and _has(av[-1], ops, bounded_ok=bounded_ok):
            return True
        if op is C.BRANCH and any(_has(alt, ops, bounded_ok=bounded_ok) for alt in av[1]):
            return True
    return False


def _branches(seq: Any) -> list[Any]:
    out = []
    for op, av in seq:
        if op is C.BRANCH:
            out.append(av[1])
            for alt in av[1]:
                out += _branches(alt)
        elif op is C.SUBPATTERN:
            out += _branches(av[-1])
    return out


def _inline(seq: Any) -> list[Any]:
    """The items of ``seq`` with groups opened up."""
    out = []
    for op, av in seq:
        if op is C.SUBPATTERN:
            out += _inline(av[-1])
        else:
            out.append((op, av))
    return out


def _check_ambiguous(body: Any, first: frozenset[str], pattern: str) -> None:
    """Refuse a repeated body that can split the same text in more than one way."""
    why = (
        "regex refused: alternatives under an unbounded repeat can match the same text "
        "(like (a|aa)*), which can take exponential time"
    )
    for alts in _branches(body):
        seen: set[str] = set()
        for alt in alts:
            firsts = _first_chars(alt) if len(alt) else frozenset()
            if firsts & seen:
                raise RegexGuardError(why, pattern=pattern)
            seen |= firsts
        if any(len(alt) == 0 for alt in alts) and seen & first:
            raise RegexGuardError(why, pattern=pattern)
    for op, av in _inline(body):
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] != av[1] and _chars(av[2]) & first:
            raise RegexGuardError(why, pattern=pattern)


def _walk(seq: Any, pattern: str) -> None:
    unbounded: list[tuple[int, frozenset[str]]] = []
    flat = list(seq)
    for index, (op, av) in enumerate(flat):
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, body = av
            big = hi is C.MAXREPEAT or hi > _UNBOUNDED
            if big and _has(body, (C.MAX_REPEAT, C.MIN_REPEAT), bounded_ok=True):
                raise RegexGuardError(
                    "regex refused: a repeat inside an unbounded repeat (like (a+)+) can take exponential "
                    "time; remove the inner quantifier or bound the outer one",
                    pattern=pattern,
                )
            if big and _has(body, (C.GROUPREF,)):
                raise RegexGuardError("regex refused: a backreference inside a repeat", pattern=pattern)
            if big:
                _check_ambiguous(body, _first_chars(body), pattern)
            if hi is C.MAXREPEAT or hi > _POLY:
                chars = _chars(body)
                for prev_index, prev_chars in unbounded:
                    between = flat[prev_index + 1 : index]
                    if chars & prev_chars and _chars(between) <= prev_chars:
                        raise RegexGuardError(
                            "regex refused: two unbounded repeats can match the same text (like a.*b.*c); "
                            "backtracking could take minutes on a long message. Bound one of them "
                            "(e.g. .{0,16}) or use mode='full_text'",
                            pattern=pattern,
                        )
                unbounded.append((index, chars))
            _walk(body, pattern)
        elif op is C.SUBPATTERN:
            _walk(av[-1], pattern)
        elif op is C.BRANCH:
            for alt in av[1]:
                _walk(alt, pattern)


def check_regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile ``pattern`` if it is safe to run over untrusted text, else raise RegexGuardError."""
    if not isinstance(pattern, str) or not pattern:
        raise RegexGuardError("regex refused: the pattern is empty", pattern=str(pattern))
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexGuardError(f"regex refused: longer than {MAX_PATTERN_LENGTH} characters", pattern=pattern)
    try:
        compiled = re.compile(pattern, flags)
        parsed = P.parse(pattern, flags)
    except re.error as exc:
        raise RegexGuardError(f"invalid regex: {exc}", pattern=pattern) from exc
    _walk(list(parsed), pattern)
    if _has(list(parsed), (C.GROUPREF,)) and _has(list(parsed), (C.MAX_REPEAT, C.MIN_REPEAT), bounded_ok=True):
        raise RegexGuardError(
            "regex refused: a backreference together with an unbounded repeat can take polynomial time",
            pattern=pattern,
        )
    return compiled


def required_literal(pattern: str, flags: int = 0) -> str | None:
    """The longest literal run (3+ chars) every match must contain, for index pre-filtering."""
    try:
        parsed = P.parse(pattern, flags)
    except re.error:
        return None
    if flags & re.IGNORECASE or parsed.state.flags & re.IGNORECASE:
        pass  # the trigram index is case-insensitive anyway
    best = ""
    run = ""
    for op, av in parsed:
        if op is C.LITERAL:
            run += chr(av)
            continue
        if op is C.SUBPATTERN and all(o is C.LITERAL for o, _ in av[-1]):
            run += "".join(chr(a) for _, a in av[-1])
            continue
        best = max(best, run, key=len)
        run = ""
    best = max(best, run, key=len)
    return best if len(best) >= 3 else None
