"""A conversation as a tree of messages, as ChatGPT and Claude keep one: each message names its
parent, an edited prompt or a regenerated answer is a sibling branch.

Checked when built (every parent in the tree, no cycle), then read as the line the user last
saw (root to a leaf) and the branches off it. Every walk is iterative: a conversation of
10,000 turns is a chain 10,000 deep.

The branches are stored as one conversation of their own, so each opens with a fork marker
(:func:`with_forks`): without it a reader of the branches cannot tell where one left the line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import BadConversation

__all__ = ["EXCERPT", "Tree", "with_forks"]

#: characters of the message a branch follows quoted in its fork marker
EXCERPT = 120


class Tree:
    """The tree of ``parents`` (node -> its parent, None for a root), siblings in the order
    the dict lists them (``children`` may be re-sorted by the caller before reading).

    Raises:
        BadConversation: a parent that is not in the tree, a node its own parent, or a cycle
            (nodes that never lead back to a root); ``who`` names the conversation.
    """

    def __init__(self, who: str, parents: dict[str, str | None]) -> None:
        self.parents = parents
        self.children: dict[str, list[str]] = {}
        for node, parent in parents.items():
            if parent is None:
                continue
            if parent == node:
                raise BadConversation(f"{who}: node {node!r} is its own parent (a cycle)")
            if parent not in parents:
                raise BadConversation(f"{who}: node {node!r} names the parent {parent!r}, which is not in the "
                                      "conversation (a broken tree)")
            self.children.setdefault(parent, []).append(node)
        self.roots = [n for n, p in parents.items() if p is None]
        reached = {n for root in self.roots for n in self.preorder(root)}
        if len(reached) < len(parents):
            lost = next(n for n in parents if n not in reached)
            raise BadConversation(f"{who}: a cycle in parent ({self._cycle(lost)}): "
                                  f"{len(parents) - len(reached)} nodes never lead back to the root")

    def preorder(self, root: str) -> list[str]:
        """``root``'s subtree, each branch in order and the branches one after another."""
        out: list[str] = []
        stack = [root]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(self.children.get(node, [])))
        return out

    def leaves(self) -> list[str]:
        return [n for n in self.parents if not self.children.get(n)]

    def line_to(self, leaf: str) -> list[str]:
        """Root to ``leaf`` (acyclic: the constructor checked every node reaches a root)."""
        line: list[str] = []
        node: str | None = leaf
        while node is not None:
            line.append(node)
            node = self.parents[node]
        line.reverse()
        return line

    def off(self, line: list[str]) -> tuple[int, list[str]]:
        """The branches off ``line`` (and trees under other roots): how many, and their nodes,
        each branch in order, in the order of their forks along the line."""
        on = set(line)
        starts = [child for fork in line for child in self.children.get(fork, []) if child not in on]
        starts += [root for root in self.roots if root not in on]
        return len(starts), [n for start in starts for n in self.preorder(start)]

    def _cycle(self, start: str) -> str:
        """The cycle that ``start`` (a node no root reaches) leads into: ``'a' -> 'b' -> 'a'``."""
        order: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in order:
            order[node] = len(order)
            node = self.parents[node]
        if node is None:  # cannot happen for a node no root reaches; said plainly all the same
            return f"node {start!r} leads nowhere"
        loop = [repr(n) for n in list(order)[order[node]:]] + [repr(node)]
        return " -> ".join(loop if len(loop) <= 6 else loop[:3] + ["..."] + loop[-2:])


def with_forks(tree: Tree, rest: list[str], kept: Mapping[str, list[dict[str, Any]]],
               line: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The messages of the branches (``rest``, as :meth:`Tree.off` orders them; ``kept[node]``
    the messages each node gave, none when left out), each branch opened by a fork marker, and
    how many markers.

    A marker stands before every message that does not follow the one stored just before it: a
    branch off the line, and a fork inside a branch (its two regenerated answers follow one
    prompt). It is a ``system`` message naming the message the branch follows (the nearest one
    kept: reasoning between is left out), its role, where it is (the main line, or this branch
    conversation), the start of its text and the branch's first id, with that message's time; its event id is
    ``fork:<the branch's first event id>``, so a second import stores it once.
    """
    on_line = set(line)
    out: list[dict[str, Any]] = []
    count = 0
    last: str | None = None
    for node in rest:
        messages = kept.get(node)
        if not messages:
            continue
        anchor = _kept_parent(tree, node, kept)
        if anchor is None or anchor != last:
            out.append(_marker(messages[0], None if anchor is None else kept[anchor][-1], anchor in on_line))
            count += 1
        out.extend(messages)
        last = node
    return out, count


def _kept_parent(tree: Tree, node: str, kept: Mapping[str, list[dict[str, Any]]]) -> str | None:
    parent = tree.parents[node]
    while parent is not None and not kept.get(parent):
        parent = tree.parents[parent]
    return parent


def _marker(first: dict[str, Any], before: dict[str, Any] | None, on_line: bool) -> dict[str, Any]:
    if before is None:
        text = f"[branch with no message before it (the start of the conversation); it opens with {first['event_id']}]"
    else:
        said = " ".join(str(before["content"]).split())
        said = said if len(said) <= EXCERPT else said[:EXCERPT - 3].rstrip() + "..."
        where = "on the main line" if on_line else "in this branch conversation"
        # the branch's own first id too: a reader sees which message the branch opens with
        # wherever it stands (the loader places it there: tools.chats.load._place_forks)
        text = (f'[branch after {before["event_id"]} ({before["role"]}, {where}): "{said}"; '
                f'it opens with {first["event_id"]}]')
    marker: dict[str, Any] = {"role": "system", "content": text, "event_id": f"fork:{first['event_id']}"}
    at = (before or {}).get("created_at", first.get("created_at"))
    if at is not None:
        marker["created_at"] = at
    return marker
