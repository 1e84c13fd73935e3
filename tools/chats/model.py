"""What a chat app's export gives lcm: one conversation at a time, as lcm messages.

A converter (:mod:`tools.chats.chatgpt`, :mod:`tools.chats.claude`) turns one conversation of
the export into an :class:`ExportedConversation`, or raises :class:`BadConversation` naming what
is wrong with it; the caller decides whether that refuses the file or skips the conversation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BadConversation", "ExportedConversation", "check_nesting", "describe"]


class BadConversation(ValueError):
    """One conversation of an export that cannot be read as a conversation (a broken tree, a
    cycle, a message of an unknown author); the message names the conversation and the node."""


@dataclass
class ExportedConversation:
    """One conversation of an export, ready for ``LcmStore.ingest``.

    Every message carries the export's own id as ``event_id`` (so a second import stores
    nothing twice) and its real time as ``created_at`` when the export has one.
    """

    #: ``chatgpt`` or ``claude``: the app, part of the session key
    source: str
    #: the app's id of the conversation (the session key is made from it)
    export_id: str
    title: str | None
    #: the conversation as the user last saw it, in order
    messages: list[dict[str, Any]]
    #: messages of edited or regenerated branches that are not on that line (ChatGPT keeps
    #: every version of an edited prompt and every regenerated answer), each branch in order
    #: after a fork marker
    branches: list[dict[str, Any]] = field(default_factory=list)
    #: how many branches ``branches`` holds
    branch_count: int = 0
    #: the fork markers among ``branches``: one before each branch, naming the message it
    #: follows (:func:`tools.chats.tree.with_forks`)
    fork_points: int = 0
    #: messages not kept, by reason: "empty", "reasoning", "internal" (a marker with nothing to
    #: show, Claude's ``token_budget``), "unreadable" (a message of a shape that cannot be read)
    left_out: Counter[str] = field(default_factory=Counter)
    #: what was kept though the app does not show it as a message: "hidden" (custom
    #: instructions, memory notes, the model read them), "tool_output" (a tool's result)
    kept: Counter[str] = field(default_factory=Counter)
    #: images, audio, video and files stored as a placeholder (the export holds no bytes of them), by kind
    placeholders: Counter[str] = field(default_factory=Counter)
    #: event ids of messages whose time is borrowed (the export gave them none): they may go
    #: without it when the store's replay guard reads borrowed times as a flood
    borrowed_times: set[str] = field(default_factory=set)
    #: what was read but may surprise (a content type this reader does not know, kept as text)
    warnings: list[str] = field(default_factory=list)


def describe(index: int, obj: object) -> str:
    """How an error names a conversation: its place in the file, title and id, as far as known."""
    said = f"conversation {index}"
    if isinstance(obj, dict):
        title = obj.get("title", obj.get("name"))
        ident = obj.get("conversation_id") or obj.get("id") or obj.get("uuid")
        if isinstance(title, str) and title.strip():
            said += f" ({' '.join(title.split())[:60]!r}"
            said += f", id {str(ident)[:80]})" if ident else ")"
        elif ident:
            said += f" (id {str(ident)[:80]})"
    return said


def conversation_fields(index: int, obj: object, ids: tuple[str, ...], label: str,
                        title_key: str) -> tuple[dict[str, Any], str, str | None, str]:
    """A conversation's object, id and title (None when blank), and how errors name it; the
    checks both apps' readers begin with.

    Raises:
        BadConversation: not an object, or no id (``label`` names the app's field) to tell it
            from the others when the export is imported again.
    """
    who = describe(index, obj)
    if not isinstance(obj, dict):
        raise BadConversation(f"{who}: expected an object, got {type(obj).__name__}")
    value = next((obj[key] for key in ids if obj.get(key)), None)  # the first one given
    if not isinstance(value, str) or not value.strip():
        raise BadConversation(f"{who}: has no {label}, so it could not be told apart from the "
                              "others when the export is imported again")
    title = obj.get(title_key)
    return obj, value, title if isinstance(title, str) and title.strip() else None, who


def check_nesting(index: int, obj: object, limit: int) -> None:
    """Refuse a conversation nested deeper than ``limit`` objects and arrays.

    The rule for untrusted JSON (:mod:`amem.kernel.safejson`, 64 levels): the parser takes up
    to Python's recursion limit, but whatever walks the value later (``json.dumps`` of a tool
    call's input, a reader of the stored text) may not. A real conversation nests under 20.
    Every conversation is walked, so the walk goes a level at a time counting nothing else
    (iterative: it cannot overflow; a third of the parse's time on a real export), and only a
    refused one is walked again for where it fails.

    Raises:
        BadConversation: naming the conversation and where in it the nesting goes too deep.
    """
    level = [obj] if type(obj) is dict or type(obj) is list else []  # noqa: E721 (the parser's own types)
    depth = 0
    while level:
        if depth >= limit:
            raise BadConversation(f"{describe(index, obj)}: it nests deeper than {limit} levels of objects "
                                  f"and arrays (at {_too_deep_at(obj, limit)}), which no app's export does")
        below: list[Any] = []
        add = below.append
        for value in level:
            for member in (value.values() if type(value) is dict else value):  # noqa: E721
                kind = type(member)
                if kind is dict or kind is list:
                    add(member)
        level, depth = below, depth + 1


def _too_deep_at(obj: object, limit: int) -> str:
    """Where ``obj`` first nests ``limit`` deep: its first steps (``mapping.m1.message...``)."""
    stack: list[tuple[object, tuple[str, ...]]] = [(obj, ())]
    while stack:
        value, path = stack.pop()
        if not isinstance(value, (dict, list)):
            continue
        if len(path) >= limit:
            return "".join(path[:4]).lstrip(".") + ("..." if len(path) > 4 else "")
        steps = value.items() if isinstance(value, dict) else enumerate(value)
        stack.extend((v, (*path, f".{k}" if isinstance(value, dict) else f"[{k}]")) for k, v in steps)
    return "?"
