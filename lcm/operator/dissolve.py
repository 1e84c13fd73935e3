"""Dissolve: undo one condensation, putting a condensed summary's sources back into the active context.

API (stable since ``kit-repair``), over a store's handle:

- :func:`plan_dissolve` ``(db, summary_id, *, purge=True) -> DissolvePlan``: the summary (kind,
  depth, tokens, context ordinal), the sources it would restore (with previews), the token
  impact on the stored context and how many later items shift. Writes nothing.
- :func:`apply_dissolve` ``(db, plan) -> DissolvePlan``: one transaction. The summary's context
  item becomes its sources, in their order; later items move up by ``len(sources) - 1``. With
  ``purge`` (the default, as lossless-claw's) the summary and its source edges are deleted;
  without it the summary stays in the DAG, out of the context.

Only a condensed summary that is in the active context can be dissolved: a leaf's sources are
raw messages (lcm keeps them; dissolving a leaf is not what the reference offers), and a
summary already condensed into another must wait until that one is dissolved.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lcm.conn import Connection, Handle
from lcm.errors import ConcurrentChangeError, LcmNotFoundError, LcmValidationError
from lcm.models import _Dict
from lcm.operator.browse import PREVIEW_CHARS

__all__ = ["DissolvePlan", "RestoredSource", "plan_dissolve", "apply_dissolve", "shift_context"]


@dataclass(frozen=True)
class RestoredSource(_Dict):
    summary_id: str
    kind: str
    depth: int
    token_count: int
    preview: str


@dataclass(frozen=True)
class DissolvePlan(_Dict):
    conversation_id: int
    summary_id: str
    depth: int
    token_count: int
    ordinal: int
    restored: list[RestoredSource]
    restored_tokens: int
    #: stored context tokens before and after (what compaction's threshold compares)
    context_tokens_before: int
    context_tokens_after: int
    #: context items after the summary whose ordinal moves
    items_shifted: int
    purge: bool = True
    applied: bool = False

    @property
    def token_delta(self) -> int:
        return self.context_tokens_after - self.context_tokens_before

    def to_dict(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "token_delta": self.token_delta}


def shift_context(c: Connection, conversation_id: int, after: int, by: int) -> int:
    """Move every context item with an ordinal above ``after`` up by ``by``; returns how many.

    Through negative ordinals: both engines check the (conversation, ordinal) key row by row,
    and moving a row onto its neighbour's ordinal would collide mid-statement.
    """
    if by == 0:
        return int(c.execute("SELECT count(*) FROM context_items WHERE conversation_id = ? AND ordinal > ?",
                             (conversation_id, after)).fetchone()[0])  # fmt: skip
    moved = c.execute("UPDATE context_items SET ordinal = -(ordinal + ?) - 1 WHERE conversation_id = ? AND ordinal > ?",
                      (by, conversation_id, after)).rowcount  # fmt: skip
    c.execute("UPDATE context_items SET ordinal = -ordinal - 1 WHERE conversation_id = ? AND ordinal < 0", (conversation_id,))
    return int(moved)


def _read(c: Connection, summary_id: str, purge: bool) -> DissolvePlan:
    if not isinstance(summary_id, str) or not summary_id:
        raise LcmValidationError(f"summary_id must be a summary id (sum_...); got {summary_id!r}", field="summary_id")
    row = c.execute("SELECT conversation_id, kind, depth, token_count FROM summaries WHERE summary_id = ?",
                    (summary_id,)).fetchone()  # fmt: skip
    if row is None:
        raise LcmNotFoundError(f"no summary {summary_id}", id=summary_id)
    conv, kind, depth, tokens = int(row[0]), str(row[1]), int(row[2]), int(row[3])
    if kind != "condensed":
        raise LcmValidationError(f"{summary_id} is a leaf summary: only a condensed summary can be dissolved "
                                 "(a leaf's sources are messages)", field="summary_id")  # fmt: skip
    item = c.execute("SELECT ordinal FROM context_items WHERE conversation_id = ? AND summary_id = ?",
                     (conv, summary_id)).fetchone()  # fmt: skip
    if item is None:
        above = c.execute("SELECT summary_id FROM summary_parents WHERE parent_summary_id = ? LIMIT 1",
                          (summary_id,)).fetchone()  # fmt: skip
        where = f"it was condensed into {above[0]}: dissolve that one first" if above else "it is in no context"
        raise LcmValidationError(f"{summary_id} is not in the active context ({where})", field="summary_id")
    sources = c.execute(
        "SELECT s.summary_id, s.kind, s.depth, s.token_count, s.content, s.conversation_id FROM summary_parents p "
        "JOIN summaries s ON s.summary_id = p.parent_summary_id WHERE p.summary_id = ? ORDER BY p.ordinal",
        (summary_id,)).fetchall()  # fmt: skip
    want = int(c.execute("SELECT count(*) FROM summary_parents WHERE summary_id = ?", (summary_id,)).fetchone()[0])
    if not sources or len(sources) != want or any(int(s[5]) != conv for s in sources):
        raise LcmValidationError(f"{summary_id}'s sources are missing or in another conversation "
                                 f"({len(sources)} of {want} found); see doctor", field="summary_id")  # fmt: skip
    restored = [RestoredSource(str(s[0]), str(s[1]), int(s[2]), int(s[3]), " ".join(str(s[4]).split())[:PREVIEW_CHARS])
                for s in sources]  # fmt: skip
    before = int(c.execute(
        "SELECT coalesce(sum(coalesce(m.token_count, s.token_count, 0)), 0) FROM context_items ci LEFT JOIN messages m "
        "ON m.id = ci.message_id LEFT JOIN summaries s ON s.summary_id = ci.summary_id WHERE ci.conversation_id = ?",
        (conv,)).fetchone()[0])  # fmt: skip
    ordinal = int(item[0])
    shifted = int(c.execute("SELECT count(*) FROM context_items WHERE conversation_id = ? AND ordinal > ?",
                            (conv, ordinal)).fetchone()[0])  # fmt: skip
    restored_tokens = sum(r.token_count for r in restored)
    return DissolvePlan(conv, summary_id, depth, tokens, ordinal, restored, restored_tokens, before,
                        before - tokens + restored_tokens, shifted if len(restored) > 1 else 0, purge)  # fmt: skip


def plan_dissolve(db: Handle, summary_id: str, *, purge: bool = True) -> DissolvePlan:
    """What dissolving ``summary_id`` would restore and cost (see the module docstring).

    Raises:
        LcmNotFoundError: no such summary.
        LcmValidationError: a leaf, a summary not in the active context, or missing sources.
    """
    with db.reading() as c:
        return _read(c, summary_id, purge)


def apply_dissolve(db: Handle, plan: DissolvePlan) -> DissolvePlan:
    """Dissolve as planned, in one transaction.

    Raises:
        ConcurrentChangeError: the context or the summary changed since the plan; nothing written.
    """
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    with db.atomic() as c:
        now = _read(c, plan.summary_id, plan.purge)
        if (now.ordinal, [r.summary_id for r in now.restored]) != (plan.ordinal, [r.summary_id for r in plan.restored]):
            raise ConcurrentChangeError(f"the context of conversation {plan.conversation_id} changed since the plan; plan again")
        conv = plan.conversation_id
        c.execute("DELETE FROM context_items WHERE conversation_id = ? AND ordinal = ?", (conv, plan.ordinal))
        shift_context(c, conv, plan.ordinal, len(plan.restored) - 1)
        c.executemany(
            "INSERT INTO context_items(conversation_id, ordinal, item_type, summary_id) VALUES (?, ?, 'summary', ?)",
            [(conv, plan.ordinal + i, r.summary_id) for i, r in enumerate(plan.restored)])  # fmt: skip
        if plan.purge:
            c.execute("DELETE FROM summary_parents WHERE summary_id = ?", (plan.summary_id,))
            c.execute("DELETE FROM summaries WHERE summary_id = ?", (plan.summary_id,))
    return dataclasses.replace(plan, applied=True)
