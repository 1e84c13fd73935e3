"""Transplant: deep-copy a summary DAG (summaries, their messages, the edges) into another conversation.

For a session that rolled over to a new conversation, or a backfilled transcript: the target
gets its own copy of the summaries, so they belong to it like its own (recall, retention,
doctor see them there) and the source conversation can be archived or deleted independently.

API (stable since ``kit-repair``):

- :func:`plan_transplant` ``(db, source_conversation_id, target_conversation_id, *,
  summary_ids=None) -> TransplantPlan``: by default the source's context summaries (in context
  order) are the roots; with ``summary_ids`` those summaries of the source. The plan lists every
  summary to copy (roots and everything they were built from), the messages the leaves cover,
  the tokens the roots add to the target's context, and ``duplicates``: summaries whose text
  (SHA-256) is already in the target.
- :func:`apply_transplant` ``(db, plan, now_iso) -> TransplantPlan``: one transaction; refused
  with :class:`lcm.errors.LcmValidationError` when duplicates exist (as the reference: a second
  transplant of the same DAG is aborted, never merged). Copies get new ids; messages get
  sequence numbers below the target's first (they are older history), no stable event key (the
  target's own keys stay unique) and keep their large-file reference. The roots are prepended
  to the target's context in their order; the target's items shift by the number of roots.
  ``id_map`` of the applied plan maps each source summary id to its copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from lcm.conn import Connection, Handle
from lcm.errors import ConcurrentChangeError, LcmValidationError
from lcm.models import _Dict
from lcm.operator.browse import require_conversation
from lcm.operator.dissolve import shift_context

__all__ = ["TransplantPlan", "Duplicate", "plan_transplant", "apply_transplant"]

_SUMMARY_COLS = ("summary_id, kind, depth, content, token_count, earliest_at, latest_at, descendant_count, "
                 "descendant_token_count, source_message_token_count, model, status")  # fmt: skip


@dataclass(frozen=True)
class Duplicate(_Dict):
    source_summary_id: str
    target_summary_id: str


@dataclass(frozen=True)
class TransplantPlan(_Dict):
    source_conversation_id: int
    target_conversation_id: int
    root_ids: list[str]
    #: every summary copied, sources before what was built from them
    summary_ids: list[str]
    message_count: int
    #: tokens the roots add to the target's context
    context_tokens_added: int
    duplicates: list[Duplicate]
    applied: bool = False
    id_map: dict[str, str] = field(default_factory=dict)


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _closure(c: Connection, conv: int, roots: Sequence[str]) -> list[str]:
    """``roots`` and every summary they were built from, bottom-up (depth, then time)."""
    ids = set(roots)
    frontier = list(roots)
    while frontier:
        q = ",".join("?" * len(frontier))
        found = {str(r[0]) for r in c.execute(f"SELECT parent_summary_id FROM summary_parents WHERE summary_id IN ({q})", frontier)}
        frontier = sorted(found - ids)
        ids |= found
    q = ",".join("?" * len(ids))
    rows = c.execute(f"SELECT summary_id, conversation_id FROM summaries WHERE summary_id IN ({q}) "
                     "ORDER BY depth, earliest_at, pk", sorted(ids)).fetchall()  # fmt: skip
    strays = [str(r[0]) for r in rows if int(r[1]) != conv]
    if len(rows) != len(ids) or strays:
        raise LcmValidationError(f"the DAG under {', '.join(roots)} is broken or reaches another conversation "
                                 f"({', '.join(strays) or 'missing summaries'}); see doctor", field="summary_ids")  # fmt: skip
    return [str(r[0]) for r in rows]


def _read(c: Connection, source: int, target: int, summary_ids: Sequence[str] | None) -> TransplantPlan:
    require_conversation(c, source)
    require_conversation(c, target)
    if source == target:
        raise LcmValidationError("source and target are the same conversation", field="target_conversation_id")
    if summary_ids is None:
        roots = [str(r[0]) for r in c.execute("SELECT summary_id FROM context_items WHERE conversation_id = ? "
                                              "AND summary_id IS NOT NULL ORDER BY ordinal", (source,))]  # fmt: skip
        if not roots:
            raise LcmValidationError(f"conversation {source} has no summaries in its context to transplant",
                                     field="source_conversation_id")  # fmt: skip
    else:
        roots = list(dict.fromkeys(summary_ids))
        if not roots or not all(isinstance(s, str) and s for s in roots):
            raise LcmValidationError("summary_ids must be a non-empty list of summary ids", field="summary_ids")
        q = ",".join("?" * len(roots))
        mine = {str(r[0]) for r in c.execute(f"SELECT summary_id FROM summaries WHERE conversation_id = ? "
                                             f"AND summary_id IN ({q})", (source, *roots))}  # fmt: skip
        if missing := [s for s in roots if s not in mine]:
            raise LcmValidationError(f"not summaries of conversation {source}: {', '.join(missing)}", field="summary_ids")
        # prepended in time order, as the source's context holds them
        roots = [str(r[0]) for r in c.execute(f"SELECT summary_id FROM summaries WHERE summary_id IN ({q}) "
                                              "ORDER BY earliest_at, pk", roots)]  # fmt: skip
    ids = _closure(c, source, roots)
    q = ",".join("?" * len(ids))
    inner = {str(r[0]) for r in c.execute(f"SELECT parent_summary_id FROM summary_parents WHERE summary_id IN ({q})", ids)}
    if nested := [s for s in roots if s in inner]:
        raise LcmValidationError(f"{', '.join(nested)} is a source of another summary given; give only the upper one",
                                 field="summary_ids")  # fmt: skip
    texts = {str(r[0]): str(r[1]) for r in c.execute(f"SELECT summary_id, content FROM summaries WHERE summary_id IN ({q})", ids)}
    theirs = {_hash(str(r[1])): str(r[0]) for r in c.execute(
        "SELECT summary_id, content FROM summaries WHERE conversation_id = ?", (target,))}  # fmt: skip
    dups = [Duplicate(s, theirs[_hash(texts[s])]) for s in ids if _hash(texts[s]) in theirs]
    n_msgs = int(c.execute(f"SELECT count(DISTINCT message_id) FROM summary_messages WHERE summary_id IN ({q})", ids).fetchone()[0])
    rq = ",".join("?" * len(roots))
    added = int(c.execute(f"SELECT coalesce(sum(token_count), 0) FROM summaries WHERE summary_id IN ({rq})", roots).fetchone()[0])
    return TransplantPlan(source, target, roots, ids, n_msgs, added, dups)


def plan_transplant(db: Handle, source_conversation_id: int, target_conversation_id: int, *,
                    summary_ids: Sequence[str] | None = None) -> TransplantPlan:  # fmt: skip
    """What a transplant would copy (see the module docstring). Writes nothing.

    Raises:
        LcmNotFoundError: either conversation does not exist.
        LcmValidationError: the same conversation twice, no summaries to copy, ids of another
            conversation, or a broken DAG.
    """
    with db.reading() as c:
        return _read(c, source_conversation_id, target_conversation_id, summary_ids)


def apply_transplant(db: Handle, plan: TransplantPlan, now_iso: str) -> TransplantPlan:
    """Copy as planned, in one transaction (see the module docstring).

    Raises:
        LcmValidationError: the target already holds some of the summaries (``duplicates``).
        ConcurrentChangeError: the source's DAG changed since the plan; nothing is written.
    """
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    with db.atomic() as c:
        now = _read(c, plan.source_conversation_id, plan.target_conversation_id, plan.root_ids)
        if now.duplicates:
            pairs = ", ".join(f"{d.source_summary_id} = {d.target_summary_id}" for d in now.duplicates[:5])
            raise LcmValidationError(f"conversation {plan.target_conversation_id} already holds {len(now.duplicates)} of "
                                     f"these summaries ({pairs}); transplant aborted", field="target_conversation_id")  # fmt: skip
        if now.summary_ids != plan.summary_ids:
            raise ConcurrentChangeError(f"the summaries of conversation {plan.source_conversation_id} changed since the plan")
        id_map = _copy(c, plan, now_iso)
    return dataclasses.replace(plan, applied=True, id_map=id_map)


def _copy(c: Connection, plan: TransplantPlan, now_iso: str) -> dict[str, str]:
    target, ids = plan.target_conversation_id, plan.summary_ids
    q = ",".join("?" * len(ids))
    # the leaves' messages, oldest first, numbered just below the target's first message
    msgs = c.execute(
        "SELECT DISTINCT m.id, m.seq, m.role, m.content, m.token_count, m.identity_hash, m.file_id, m.created_at "
        f"FROM summary_messages sm JOIN messages m ON m.id = sm.message_id WHERE sm.summary_id IN ({q}) ORDER BY m.seq",
        ids).fetchall()  # fmt: skip
    low = c.execute("SELECT min(seq) FROM messages WHERE conversation_id = ?", (target,)).fetchone()[0]
    first = (int(low) if low is not None else 0) - len(msgs)
    msg_map: dict[int, int] = {}
    for n, m in enumerate(msgs):
        cur = c.execute(
            "INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, stable_event_key, "
            "file_id, created_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)",
            (target, first + n, m[2], m[3], m[4], m[5], m[6], m[7]))  # fmt: skip
        assert cur.lastrowid is not None
        msg_map[int(m[0])] = int(cur.lastrowid)
    id_map: dict[str, str] = {}
    rows = {str(r[0]): r for r in c.execute(f"SELECT {_SUMMARY_COLS} FROM summaries WHERE summary_id IN ({q})", ids)}
    for sid in ids:  # bottom-up: a summary's sources are copied before it
        r = rows[sid]
        new = "sum_" + secrets.token_hex(8)
        id_map[sid] = new
        c.execute(
            "INSERT INTO summaries(summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at, "
            "descendant_count, descendant_token_count, source_message_token_count, model, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (new, target, *[r[i] for i in range(1, 12)], now_iso))  # fmt: skip
        if r[1] == "leaf":
            c.executemany("INSERT INTO summary_messages(summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                          [(new, msg_map[int(e[0])], int(e[1])) for e in c.execute(
                              "SELECT message_id, ordinal FROM summary_messages WHERE summary_id = ?", (sid,)).fetchall()])  # fmt: skip
        else:
            c.executemany("INSERT INTO summary_parents(summary_id, parent_summary_id, ordinal) VALUES (?, ?, ?)",
                          [(new, id_map[str(e[0])], int(e[1])) for e in c.execute(
                              "SELECT parent_summary_id, ordinal FROM summary_parents WHERE summary_id = ?", (sid,)).fetchall()])  # fmt: skip
    # prepend the roots: the target's items move up by their number, the roots take 0..k-1
    k = len(plan.root_ids)
    shift_context(c, target, -1, k)
    c.executemany("INSERT INTO context_items(conversation_id, ordinal, item_type, summary_id) VALUES (?, ?, 'summary', ?)",
                  [(target, i, id_map[s]) for i, s in enumerate(plan.root_ids)])  # fmt: skip
    return id_map
