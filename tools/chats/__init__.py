"""Chat apps' data exports (ChatGPT's and Claude's ``conversations.json``) read as lcm
conversations, one conversation at a time from a streamed file.

``array_items`` reads the file's array item by item (:mod:`amem.kernel.jsonstream`, shared with `amem import`); ``detect``
says which app wrote it from its first item; ``CONVERTERS[app](index, item)`` gives an
:class:`ExportedConversation` or raises :class:`BadConversation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import chatgpt, claude
from .model import BadConversation, ExportedConversation
from amem.kernel.jsonstream import ArrayItem, NotAnArray, StreamError, array_items

__all__ = ["APPS", "CONVERTERS", "ArrayItem", "BadConversation", "ExportedConversation", "NotAnArray",
           "StreamError", "array_items", "detect"]

#: the app, by a key only its export's conversations have
APPS = {"chatgpt": "mapping", "claude": "chat_messages"}
CONVERTERS: dict[str, Callable[[int, Any], ExportedConversation]] = {
    "chatgpt": chatgpt.convert, "claude": claude.convert}


def detect(first: Any) -> str | None:
    """The app whose export opens with the conversation ``first``, or None."""
    if isinstance(first, dict):
        for app, key in APPS.items():
            if key in first:
                return app
    return None
