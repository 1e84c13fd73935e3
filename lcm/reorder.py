"""A conversation's stored messages put in another order: the one way lcm moves a message.

A message's position is its sequence number (``seq``, what browsing and paging read) and,
while it is raw in the context, its context item's ordinal (what the model is given).
:func:`renumber` hands the conversation's own numbers out again in a new order; nothing else
points at a number (summaries, context items and large files name a message by its id), and a
summary's context item keeps its slot. Two orders use it: a merged backup's messages by time
among a home's (``lcm.operator.merge``), and messages a re-sent batch placed before ones
already stored (:func:`place_before`, a chat export's fork markers new to a store that held
their branches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lcm.conn import Connection

__all__ = ["Placed", "place_before", "renumber"]


@dataclass(frozen=True)
class Placed:
    """What :func:`place_before` did: how many messages it ``moved``, and the event keys of
    those of them that stand after a summary in the context (``after_summary``): the message
    they were placed before is folded into a summary, which is one item of the context, so a
    message raw in the context cannot stand before it there (browsing order has it in place)."""

    moved: int
    after_summary: tuple[str, ...] = ()


def renumber(c: Connection, conversation_id: int, order: Sequence[int]) -> bool:
    """Give the conversation's messages (every id, in ``order``) its numbers in that order,
    and its context's raw message slots their messages in that order; False if none moved.

    Raises:
        ValueError: ``order`` is not the conversation's messages, each once.
    """
    rows = c.execute("SELECT id, seq FROM messages WHERE conversation_id = ? ORDER BY seq",
                     (conversation_id,)).fetchall()
    if sorted(order) != sorted(r[0] for r in rows):
        raise ValueError(f"an order of conversation {conversation_id} must name each of its messages once")
    if list(order) == [r[0] for r in rows]:
        return False
    # the same numbers handed out in the new order; only the messages whose number changes are
    # written, and the numbers they take are the ones they give up
    seqs = [r[1] for r in rows]
    was = {r[0]: r[1] for r in rows}
    moved = [(seq, mid) for seq, mid in zip(seqs, order) if was[mid] != seq]
    # two steps past the (conversation, seq) uniqueness: out of the way above the highest, then home
    c.executemany("UPDATE messages SET seq = seq + ? WHERE id = ?",
                  [(max(seqs) - min(seqs) + 1, mid) for _, mid in moved])
    c.executemany("UPDATE messages SET seq = ? WHERE id = ?", moved)
    position = {mid: n for n, mid in enumerate(order)}
    slots = c.execute("SELECT ordinal, message_id FROM context_items WHERE conversation_id = ? AND "
                      "item_type = 'message' ORDER BY ordinal", (conversation_id,)).fetchall()
    # a summary's item keeps its slot; the raw messages' slots take their messages in the new order
    placed = sorted((r[1] for r in slots), key=position.__getitem__)
    c.executemany("UPDATE context_items SET message_id = ? WHERE conversation_id = ? AND ordinal = ?",
                  [(mid, conversation_id, r[0]) for mid, r in zip(placed, slots) if mid != r[1]])
    return True


def place_before(c: Connection, conversation_id: int, placements: Mapping[str, str]) -> Placed:
    """Move each message whose event key is a key of ``placements`` to just before the message
    whose event key is its value (both in the conversation; a pair with either missing is left
    alone), the others keeping their order; how many moved, and which of them follow a
    summary in the context (:class:`Placed`)."""
    rows = c.execute("SELECT id, stable_event_key FROM messages WHERE conversation_id = ? ORDER BY seq",
                     (conversation_id,)).fetchall()
    by_key = {r[1]: r[0] for r in rows if r[1] is not None}
    before = {by_key[k]: by_key[v] for k, v in placements.items() if k in by_key and v in by_key and k != v}
    order = [r[0] for r in rows]
    moved: list[int] = []
    for mid, target in before.items():
        at = order.index(target)
        if at > 0 and order[at - 1] == mid:
            continue  # in place already (a first import stores it so)
        order.remove(mid)
        order.insert(order.index(target), mid)
        moved.append(mid)
    if not moved:
        return Placed(0)
    renumber(c, conversation_id, order)
    raw = {r[0] for r in c.execute("SELECT message_id FROM context_items WHERE conversation_id = ? AND "
                                   "item_type = 'message'", (conversation_id,))}
    # raw in the context while what it was placed before is not (a summary holds it, or it
    # was evicted): its slot is among the raw messages after that summary
    key_of = {mid: key for key, mid in by_key.items()}
    return Placed(len(moved), tuple(key_of[mid] for mid in moved if mid in raw and before[mid] not in raw))
