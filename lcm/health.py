"""Doctor's ranking of the worst conversations: one severity score each, from findings, debt and size.

The score is a plain sum a reader can redo by hand from the reasons listed with it:

* each doctor finding in the conversation: error 20, warning 5, info 1;
* each recorded failure naming it (``lcm.failures``): 3, at most 10 counted;
* compaction debt owed: 5 while pending or running, 15 once an attempt failed;
* size, active conversations only: 1 per 20,000 tokens of context the next call must read.

A conversation scoring 0 is healthy and not listed. Ties go to the lower conversation id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from lcm.conn import Connection
from lcm.models import ConversationHealth

__all__ = ["SEVERITY_POINTS", "score", "worst_conversations", "DEFAULT_TOP"]

SEVERITY_POINTS = {"error": 20, "warning": 5, "info": 1}
FAILURE_POINTS, MAX_FAILURES_COUNTED = 3, 10
DEBT_POINTS = {"pending": 5, "running": 5, "failed": 15}
SIZE_UNIT_TOKENS = 20000
DEFAULT_TOP = 10

#: findings of one conversation: (severity, check) -> count
Findings = Counter[tuple[str, str]]


def score(findings: Findings, failures: int, debt: str | None, context_tokens: int, active: bool) -> tuple[int, list[str]]:
    """The severity score and its reasons, worst part first (pure)."""
    parts: list[tuple[int, str]] = []
    for (severity, check), n in findings.items():
        parts.append((SEVERITY_POINTS.get(severity, 0) * n, f"{n} {severity} finding(s): {check}"))
    if failures:
        counted = min(failures, MAX_FAILURES_COUNTED)
        parts.append((FAILURE_POINTS * counted, f"{failures} recorded failure(s)"))
    if debt is not None:
        parts.append((DEBT_POINTS.get(debt, 0), f"compaction debt {debt}"))
    if active and context_tokens >= SIZE_UNIT_TOKENS:
        parts.append((context_tokens // SIZE_UNIT_TOKENS, f"{context_tokens} context tokens"))
    parts.sort(key=lambda p: (-p[0], p[1]))
    return sum(p for p, _ in parts), [why for p, why in parts if p > 0]


def worst_conversations(
    c: Connection, findings: Mapping[int, Findings], top: int = DEFAULT_TOP
) -> list[ConversationHealth]:
    """The ``top`` conversations with the highest score (only those above 0), worst first."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be an integer >= 0; got {top!r}")
    if top == 0:
        return []
    tokens = dict(c.execute(
        "SELECT ci.conversation_id, coalesce(sum(coalesce(m.token_count, s.token_count)), 0) FROM context_items ci "
        "LEFT JOIN messages m ON m.id = ci.message_id LEFT JOIN summaries s ON s.summary_id = ci.summary_id "
        "GROUP BY ci.conversation_id").fetchall())  # fmt: skip
    messages = dict(c.execute("SELECT conversation_id, count(*) FROM messages GROUP BY conversation_id").fetchall())
    debts = dict(c.execute("SELECT conversation_id, status FROM compaction_debt").fetchall())
    failures = dict(c.execute(
        "SELECT conversation_id, count(*) FROM lcm_failures WHERE conversation_id IS NOT NULL "
        "GROUP BY conversation_id").fetchall())  # fmt: skip
    ranked: list[ConversationHealth] = []
    for conv_id, key, active in c.execute("SELECT id, session_key, active FROM conversations"):
        found = findings.get(conv_id, Counter())
        points, reasons = score(found, failures.get(conv_id, 0), debts.get(conv_id), tokens.get(conv_id, 0),
                                bool(active))  # fmt: skip
        if points <= 0:
            continue
        by = Counter[str]()
        for (severity, _check), n in found.items():
            by[severity] += n
        ranked.append(ConversationHealth(
            conv_id, key, points, by["error"], by["warning"], by["info"], failures.get(conv_id, 0),
            debts.get(conv_id), tokens.get(conv_id, 0), messages.get(conv_id, 0), reasons))  # fmt: skip
    ranked.sort(key=lambda h: (-h.score, h.conversation_id))
    return ranked[:top]
