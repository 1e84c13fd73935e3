"""Backfill: bring a transcript from before lcm into the store, compact it, optionally transplant it.

API (over the store, since it drives ingest and compaction):

- :func:`plan_backfill` ``(store, messages, *, session_id, transplant_to=None) -> BackfillPlan``:
  validates every message (as ``ingest`` does) and reports what would be imported: messages,
  tokens, an estimate of the leaf summaries, whether this ``session_id`` was imported already,
  and the transplant target. Writes nothing.
- :func:`apply_backfill` ``(store, plan, messages, *, max_rounds=20) -> BackfillPlan``: imports
  the messages into the conversation of session key ``backfill:<session_id>`` (batches of
  :data:`BATCH`, one transaction each; skipped when the session was imported before, so a
  second run only compacts again), then compacts it round after round (each round one bounded
  sweep, every summary its own transaction) until a round makes no summary, with ``single_root``
  condenses what is left (the summaries, and the fresh tail's messages too) pass after pass into
  one root summary (:func:`condense_to_root`), then transplants its
  context summaries into ``transplant_to`` (one transaction, :mod:`lcm.operator.transplant`).
  A refused transplant (its summaries are already there) is a warning of the result: the import
  and the compaction stand, and running it again changes nothing.

As the reference's ``backfill``, the write steps are separate transactions (import, each
compaction step, the transplant), each atomic and each safe to repeat.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lcm.compaction import Item, load_items
from lcm.errors import LcmValidationError
from lcm.normalize import normalize_messages
from lcm.models import _Dict
from lcm.operator.browse import positive_int, require_conversation
from lcm.operator.transplant import TransplantPlan, apply_transplant, plan_transplant
from lcm.timeutil import iso
from lcm.tokens import estimate_tokens

if TYPE_CHECKING:
    from lcm.store import LcmStore

__all__ = ["BackfillPlan", "plan_backfill", "apply_backfill", "backfill_key", "condense_to_root", "BATCH"]

#: messages per ingest transaction
BATCH = 500


def backfill_key(session_id: str) -> str:
    """The session key a backfilled transcript is stored under."""
    return f"backfill:{session_id}"


@dataclass(frozen=True)
class BackfillPlan(_Dict):
    session_id: str
    session_key: str
    message_count: int
    token_count: int
    #: leaf summaries the import would need at ``leafChunkTokens`` (an estimate)
    leaf_chunks: int
    already_imported: bool
    conversation_id: int | None
    transplant_to: int | None
    #: condense the whole transcript into one root summary (the fresh tail included)
    single_root: bool = False
    applied: bool = False
    imported: int = 0
    skipped_duplicates: int = 0
    compaction_rounds: int = 0
    summaries_made: int = 0
    transplant: TransplantPlan | None = None
    #: with ``single_root``: the one summary the transcript's context now holds
    root_summary_id: str | None = None
    warnings: list[str] = field(default_factory=list)


def plan_backfill(store: LcmStore, messages: Sequence[Mapping[str, Any]], *, session_id: str,
                  transplant_to: int | None = None, single_root: bool = False) -> BackfillPlan:  # fmt: skip
    """What :func:`apply_backfill` would do (see the module docstring). Writes nothing.

    Raises:
        LcmValidationError: no messages, a malformed one (``field`` names it), an empty
            ``session_id``, or ``transplant_to`` the backfill's own conversation.
        LcmNotFoundError: ``transplant_to`` does not exist.
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise LcmValidationError("session_id must be a non-empty string (the transcript's own id)", field="session_id")
    if not messages:
        raise LcmValidationError("the transcript holds no messages", field="messages")
    if not isinstance(single_root, bool):
        raise LcmValidationError("single_root must be true or false", field="single_root")
    batch = normalize_messages(messages, iso(store.clock.now()), session_id=session_id)
    key = backfill_key(session_id)
    conv = store.conversation(key)
    if transplant_to is not None:
        with store.db.reading() as c:
            require_conversation(c, transplant_to)
        if conv is not None and conv.id == transplant_to:
            raise LcmValidationError("transplant_to is the backfill's own conversation", field="transplant_to")
    tokens = sum(estimate_tokens(m.content) for m in batch)
    return BackfillPlan(session_id, key, len(batch), tokens, math.ceil(tokens / store.config.leaf_chunk_tokens),
                        conv is not None, conv.id if conv is not None else None, transplant_to,
                        single_root)  # fmt: skip


def apply_backfill(store: LcmStore, plan: BackfillPlan, messages: Sequence[Mapping[str, Any]], *,
                   max_rounds: int = 20) -> BackfillPlan:  # fmt: skip
    """Import, compact and (optionally) transplant as planned; see the module docstring."""
    if plan.applied:
        raise LcmValidationError("this plan was applied already; plan again", field="plan")
    positive_int(max_rounds, "max_rounds")
    if len(messages) != plan.message_count:
        raise LcmValidationError(f"the plan was made for {plan.message_count} messages; {len(messages)} given",
                                 field="messages")  # fmt: skip
    warnings: list[str] = []
    imported = skipped = 0
    conv = store.conversation(plan.session_key)
    if conv is None:
        for start in range(0, len(messages), BATCH):
            res = store.ingest(plan.session_key, messages[start:start + BATCH], session_id=plan.session_id)
            if res.ignored or res.stateless:
                raise LcmValidationError(f"session key {plan.session_key!r} is ignored or stateless by the config; "
                                         "nothing imported", field="session_id")  # fmt: skip
            imported += res.stored
            skipped += res.skipped_duplicates
        conv = store.conversation(plan.session_key)
    else:
        warnings.append(f"session {plan.session_id} was imported before (conversation {conv.id}); compacted again only")
    assert conv is not None
    rounds = made = 0
    while rounds < max_rounds:
        run = store.compact(plan.session_key, force=True)
        rounds += 1
        new = len(run.leaf_summaries) + len(run.condensed_summaries)
        made += new
        warnings += run.warnings
        if not new:
            break
    else:
        warnings.append(f"compaction still made summaries after {max_rounds} rounds; run the backfill again to go on")
    root = None
    if plan.single_root:
        root, steps = condense_to_root(store, conv.id)
        made += steps
    transplant = None
    if plan.transplant_to is not None:
        try:
            transplant = plan_transplant(store.db, conv.id, plan.transplant_to)
        except LcmValidationError as exc:  # e.g. a transcript too short to make any summary
            warnings.append(f"transplant skipped: {exc}")
        if transplant is None:
            pass
        elif transplant.duplicates:
            warnings.append(f"transplant refused: conversation {plan.transplant_to} already holds "
                            f"{len(transplant.duplicates)} of these summaries")  # fmt: skip
        else:
            transplant = apply_transplant(store.db, transplant, iso(store.clock.now()), events=store.events)
    store.events.write("backfill", conversation_id=conv.id, session_id=plan.session_id, imported=imported,
                       summaries=made, transplanted_to=plan.transplant_to if transplant and transplant.applied else None)
    return dataclasses.replace(plan, applied=True, conversation_id=conv.id, imported=imported,
                               skipped_duplicates=skipped, compaction_rounds=rounds, summaries_made=made,
                               transplant=transplant, root_summary_id=root, warnings=warnings)  # fmt: skip


def _groups(items: list[Item], cap: int) -> list[list[Item]]:
    """One pass of :func:`condense_to_root` (pure): each run of messages cut into leaf chunks of
    at most ``cap`` tokens (one message at least), each run of summaries into groups of at least
    two that fit ``cap`` (a lone last one joins the group before it)."""
    groups: list[list[Item]] = []
    run: list[Item] = []
    for it in [*items, None]:
        if it is not None and run and it.type == run[0].type:
            run.append(it)
            continue
        if run:
            chunks: list[list[Item]] = [[]]
            used = 0
            floor = 1 if run[0].type == "message" else 2
            for x in run:
                if len(chunks[-1]) >= floor and used + x.tokens > cap:
                    chunks.append([])
                    used = 0
                chunks[-1].append(x)
                used += x.tokens
            if len(chunks) > 1 and len(chunks[-1]) < floor:
                last = chunks.pop()
                chunks[-1] += last
            groups += [c for c in chunks if run[0].type == "message" or len(c) > 1]
        run = [it] if it is not None else []
    return groups


def condense_to_root(store: LcmStore, conversation_id: int) -> tuple[str | None, int]:
    """Condense a conversation's whole context into one summary; returns (its id, summaries made).

    Pass after pass: raw messages (the fresh tail, runs too short for a leaf pass) become leaf
    summaries, then the summaries, in order and whatever their depths, are condensed in groups
    that fit ``leafChunkTokens``, until one item is left. Every summary is its own transaction
    (the compactor's), so a stopped run leaves a valid context and a second run carries on.
    ``None`` when the context is empty.
    """
    made = 0
    cap = store.config.leaf_chunk_tokens
    while True:
        with store.db.reading() as c:
            items = load_items(c, conversation_id)
        if not items:
            return None, made
        if len(items) == 1 and items[0].type == "summary":
            return items[0].summary_id, made
        groups = _groups(items, cap)
        if not groups:  # one summary beside nothing to join: cannot happen with >1 item; guard the loop
            raise LcmValidationError(f"conversation {conversation_id}'s context cannot be condensed further",
                                     field="single_root")  # fmt: skip
        for chunk in groups:
            store.compactor.summarize_chunk(conversation_id, chunk)
            made += 1
