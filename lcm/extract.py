"""The deterministic extractive summarizer: keeps the lines recall needs, ends with an expand footer.

It is used when no LLM is configured, as the last fallback when the LLM fails, and for
large-file exploration summaries. It keeps names, numbers, dates, file paths, commands,
errors and decisions; lines are chosen by score and printed in their original order.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from lcm.tokens import estimate_tokens

__all__ = [
    "SourceUnit", "extractive_summary", "truncate_to_tokens", "salient_terms", "score_line",
    "FOOTER_PREFIX", "FALLBACK_MARKER", "TRUNCATED_MARKER",
]  # fmt: skip

FOOTER_PREFIX = "Expand for details about:"
FALLBACK_MARKER = "[LCM fallback summary]"
TRUNCATED_MARKER = "[LCM truncated]"

_ERROR = re.compile(
    r"\b(error|errors|exception|traceback|failed|failure|fatal|panic|errno|denied|timed? ?out|refused|"
    r"not found|segfault|crash(?:ed)?|warning|bug)\b|\b[A-Z]\w*(?:Error|Exception)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(decided|decision|agreed|we will|we'll|i will|i'll|going to|plan|chose|choose|must|should|"
    r"todo|next step|resolved|fixed|conclusion|let's|approved|rejected|deadline|remember)\b|决定|同意|计划",
    re.IGNORECASE,
)
# These run over every message a compaction reads, so each must stay linear on any text: a
# path or file name starts only where a run of name characters starts (the lookbehinds) and
# its runs are possessive, or "aaaa..." is re-scanned from every position (20,000 characters
# took 2.7 s); the command prefix has one whitespace run, not two adjacent ones (20,000
# spaces took 19.6 s).
_PATH = re.compile(
    r"(?:~/?|(?<![\w.-])\.{1,2}/?|/|(?<![\w.-]))(?:[\w.-]++/)+[\w.-]+|"
    r"(?<![\w-])[\w-]++\.(?:py|js|ts|tsx|md|json|toml|ya?ml|txt|sh|go|rs|sql|db|log|csv|html|css|c|h|cpp|java|rb|ini|"
    r"cfg|lock)\b"
)
_COMMAND_START = re.compile(
    r"^\s*(?:(?:\$|>|#\s)\s*)?(?:git|pip|npm|pnpm|yarn|python3?|uv|cd|ls|make|docker|kubectl|curl|wget|sudo|"
    r"apt(?:-get)?|cargo|pytest|go|rustc|node|ssh|scp|rsync|systemctl|brew|sqlite3|openclaw|amem|lcm)\b"
)
_BACKTICK = re.compile(r"`([^`\n]{2,120})`")
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|today)\b|"
    r"\d{1,4}年|\d{1,2}月\d{1,2}日",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"(?<![\w.])[-+]?\$?\d[\d,._:]*%?")
_URL = re.compile(r"https?://\S+")
_NAME = re.compile(r"(?<=[\s(\"'])[A-Z][a-z]+(?:[A-Z][a-z]+)*(?: [A-Z][a-z]+)?")
_FOOTER_LINE = re.compile(r"^\s*" + re.escape(FOOTER_PREFIX), re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+")
_STOP_NAMES = frozenset(
    "The This That These Those There Then When What Which Where Why How And But For Not You Your "
    "We Our They Their It Its If Is Are Was Were Yes No Ok Okay Please Thanks Thank Also So Here "
    "Summary Expand Let Can Could Would Should Will I".split()
)
_MAX_LINE_CHARS = 300


@dataclass(frozen=True)
class SourceUnit:
    """One message or child summary handed to the summarizer."""

    id: str
    role: str
    created_at: str  # already rendered for display
    text: str


def score_line(line: str, role: str = "") -> float:
    """How much a line matters to later recall (pure; higher keeps it)."""
    score = 0.0
    if _ERROR.search(line):
        score += 3
    if _DECISION.search(line):
        score += 3
    if _PATH.search(line):
        score += 2
    if _COMMAND_START.search(line) or _BACKTICK.search(line):
        score += 2
    if _DATE.search(line):
        score += 2
    if _URL.search(line):
        score += 2
    if _NUMBER.search(line):
        score += 1
    names = [n for n in _NAME.findall(" " + line) if n.split()[0] not in _STOP_NAMES]
    score += min(2, len(names))
    if role == "user":
        score += 1  # what the person asked for frames everything else
    if len(line) < 12:
        score -= 1
    return score


def _candidate_lines(text: str) -> list[str]:
    out = []
    in_fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if not line or _FOOTER_LINE.match(line) or line.startswith((FALLBACK_MARKER, TRUNCATED_MARKER)):
            continue
        pieces = [line] if in_fence or len(line) <= _MAX_LINE_CHARS else _SENTENCE_SPLIT.split(line)
        for piece in pieces:
            piece = piece.strip()
            if len(piece) > _MAX_LINE_CHARS:
                piece = piece[: _MAX_LINE_CHARS - 1] + "…"
            if len(piece) >= 3:
                out.append(piece)
    return out


def salient_terms(texts: list[str], limit: int = 12, exclude: str = "") -> list[str]:
    """Paths, errors, commands, names and dated facts worth listing in the expand footer."""
    counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for text in texts:
        for line in text.splitlines():
            if _FOOTER_LINE.match(line):
                terms = [t.strip() for t in line.split(":", 1)[1].split(",")]
                found = [t.rstrip(".") for t in terms if t]
            else:
                found = []
                found += [m.group(0).rstrip(".,;:") for m in _PATH.finditer(line)]
                found += [m.group(0) for m in re.finditer(r"\b[A-Z]\w*(?:Error|Exception)\b", line)]
                found += [m.group(1).strip() for m in _BACKTICK.finditer(line)]
                found += [n for n in _NAME.findall(" " + line) if n.split()[0] not in _STOP_NAMES]
                found += [m.group(0) for m in _DATE.finditer(line) if "-" in m.group(0) or "年" in m.group(0)]
            for term in found:
                term = term.strip()
                if 2 < len(term) <= 80:
                    counts[term] += 1
                    order.setdefault(term, len(order))
    excluded = exclude.lower()
    # Prefer what the summary body left out: the footer is a map of what expanding recovers.
    ranked = sorted(counts, key=lambda t: (t.lower() in excluded, -counts[t], order[t]))
    return ranked[:limit]


def extractive_summary(units: list[SourceUnit], target_tokens: int, *, header: str = "") -> str:
    """Pick the highest-scoring lines of ``units`` within ``target_tokens``; end with a footer."""
    candidates: list[tuple[float, int, str]] = []
    seen: set[str] = set()
    position = 0
    for unit in units:
        for i, line in enumerate(_candidate_lines(unit.text)):
            key = re.sub(r"\W+", " ", line.lower()).strip()
            if key in seen:
                continue
            seen.add(key)
            score = score_line(line, unit.role) + (1.0 if i == 0 else 0.0)
            label = f"- [{unit.role} {unit.created_at}] " if unit.role in ("user", "assistant", "tool", "system") else "- "
            candidates.append((score, position, (label if i == 0 else "  ") + line))
            position += 1
    footer_terms = salient_terms([u.text for u in units])
    footer_budget = estimate_tokens(FOOTER_PREFIX + " " + ", ".join(footer_terms)) + 2
    budget = max(16, target_tokens - estimate_tokens(header) - footer_budget)
    chosen: list[tuple[int, str]] = []
    used = 0
    for score, pos, line in sorted(candidates, key=lambda c: (-c[0], c[1])):
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            continue
        chosen.append((pos, line))
        used += cost
    chosen.sort()
    # Keep continuation lines readable: a line chosen without its unit's label gets "- ".
    body = "\n".join(line if line.startswith("- ") else "- " + line.strip() for _, line in chosen)
    footer_terms = salient_terms([u.text for u in units], exclude=body)
    parts = [p for p in (header, body) if p]
    if footer_terms:
        parts.append(f"{FOOTER_PREFIX} {', '.join(footer_terms)}")
    return "\n".join(parts)


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut ``text`` at a line boundary to fit ``max_tokens``; returns (text, was_truncated)."""
    if estimate_tokens(text) <= max_tokens:
        return text, False
    footer = ""
    lines = text.splitlines()
    if lines and _FOOTER_LINE.match(lines[-1]):
        footer = lines.pop()
    marker = f"{TRUNCATED_MARKER} (cut to ~{max_tokens} tokens)"
    budget = max_tokens - estimate_tokens(marker) - estimate_tokens(footer) - 2
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > budget:
            if not kept:  # one huge line: cut it by characters
                kept.append(line[: max(8, budget * 3)])
            break
        kept.append(line)
        used += cost
    return "\n".join([*kept, marker, *([footer] if footer else [])]), True
