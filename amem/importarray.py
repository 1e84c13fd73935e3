"""A JSON array of notes (``[{"text": ...}, ...]``, what most tools and LLMs write) read
item by item for ``amem.importer``, each item as a JSON line is read; or such an array an
object wraps under a key that says so (``{"notes": [...]}``, ``LIST_KEYS``), the key said in
the report. An object without one is refused naming its keys, and how to import a list it holds.

The array is streamed (``amem.kernel.jsonstream``): one item in memory at a time, however big
the file. An item is numbered by its place in the array (1-based), where a JSON line is by its
line: a compact one-line array (what a tool or an LLM writes) still says which item is bad.
A file that stops being JSON part way is one bad place, named by its line too: the items
before it are read, nothing after it can be.

A chat app's data export (ChatGPT's or Claude's ``conversations.json``) is also one JSON
array, of conversations: it is refused at its first item, saying that ``amem lcm ingest``
is the command that reads it (its messages belong in conversation memory, not in notes).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, TextIO

from .errors import ValidationError
from .kernel import safejson
from .kernel.errors import InvalidArgumentError
from .kernel.jsonstream import NoListKey, NotAnArray, StreamError, list_items

#: the keys under which apps and LLMs wrap a list of notes in an object (``{"notes": [...]}``),
#: read as that list; the first of them in the object holding a list is the one read
LIST_KEYS = ("notes", "memories", "items", "data", "entries", "records", "results")
#: a key only a chat app's exported conversations have -> what the file is
CHAT_EXPORTS = {"mapping": "a ChatGPT data export", "chat_messages": "a Claude data export"}


def array_notes(handle: TextIO, name: str, *, piped: bool = False,
                found: Callable[[str], None] | None = None
                ) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(place, item) pairs of the array ``handle`` holds, or of the list a top-level object
    holds under one of ``LIST_KEYS`` (``found`` is told which); a bad item comes as why, a
    string. ``piped``: ``name`` is a stream's (stdin), no file a command could be given.

    Raises:
        ValidationError: the text is no JSON array nor an object holding one under a key of
            ``LIST_KEYS`` (its keys named, and how to read the list another key holds), or
            it is a chat app's export (said to be ``amem lcm ingest``'s), before anything is
            yielded.
    """
    index = 0
    try:
        key, items = list_items(handle, LIST_KEYS, name=name)
        if key is not None and found is not None:
            found(key)
        for item in items:
            index = item.index
            if index == 1:
                _refuse_chat_export(item.value, name, piped)
            yield index, _note(item.value)
    except NoListKey as exc:
        if ("conversations", "a list") in ((k, kind[:6]) for k, kind in exc.members):
            _refuse_wrapped_chat_export(handle, name, piped)
        raise ValidationError(_no_list(name, exc.members, piped), field="format") from None
    except NotAnArray:
        raise ValidationError(f"{name} is JSON but not an array of notes: an import reads "
                              '[{"text": ...}, ...] (or JSON lines: .jsonl)',
                              field="format") from None
    except StreamError as exc:
        # the items before the break were read; what is after it cannot be, so it is one bad
        # place (``--skip-invalid`` keeps the items before it)
        why = str(exc).removeprefix(f"{name}:{exc.line}: ").replace(f"item {index + 1} ", "it ")
        yield index + 1, f"{why} (at line {exc.line}); nothing after it can be read"


def _no_list(name: str, members: list[tuple[str, str]], piped: bool) -> str:
    """Why an object is no notes, with its members, and how to import a list it holds."""
    said = ", ".join(f"{key!r} ({kind})" for key, kind in members[:12]) or "none"
    lists = [key for key, kind in members if kind.startswith("a list")]
    if any(key == "text" for key, _ in members):
        hint = "it looks like one note: wrap it in [ ] to import it"
    elif lists:
        source = "-" if piped else name
        hint = (f"to import the list under {lists[0]!r}: `jq '.{lists[0]}' {source} | "
                f"amem import -`")
    else:
        hint = "it holds no list"
    return (f"{name} is a JSON object, not an array of notes, and holds none under "
            f"{', '.join(repr(k) for k in LIST_KEYS)}; its keys: {said}; {hint}")


def _refuse_chat_export(first: Any, name: str, piped: bool) -> None:
    for key, what in CHAT_EXPORTS.items():
        if isinstance(first, dict) and key in first:
            raise _chat_export(what, name, piped)


def _chat_export(what: str, name: str, piped: bool) -> ValidationError:
    # `amem lcm ingest` reads an export from a file only (it streams it twice): a piped one
    # is told to be saved first, or the command given would be refused in turn
    command = ("`amem lcm ingest FILE` once it is saved to a file (an export is read from a "
               "file, not stdin)" if piped else f"`amem lcm ingest {name}`")
    return ValidationError(f"{name} is {what} (conversations.json): its conversations go into conversation "
                           f"memory with {command}, each kept whole and searchable; amem import reads notes",
                           field="format")


def chat_export_of(handle: TextIO) -> str | None:
    """What chat app's export ``handle`` is (``CHAT_EXPORTS``' words, by its first
    conversation; its array bare or under ``"conversations"``), or None: another JSON, or none."""
    try:
        # bounded as ``amem lcm ingest`` bounds one conversation (tools.chats.source.ExportLimits)
        _key, items = list_items(handle, ("conversations",), max_item=128 << 20)
        first = next(items, None)
    except (StreamError, UnicodeDecodeError):
        return None
    if first is not None and isinstance(first.value, dict):
        return next((what for key, what in CHAT_EXPORTS.items() if key in first.value), None)
    return None


def _refuse_wrapped_chat_export(handle: TextIO, name: str, piped: bool) -> None:
    """Refuse an export wrapped as ``{"conversations": [...]}`` as a bare one is: the ``jq``
    hint for a list under another key led to that refusal one command later."""
    try:
        handle.seek(0)
    except (OSError, ValueError):  # a stream that cannot go back: the general hint stands
        return
    what = chat_export_of(handle)
    if what is not None:
        raise _chat_export(what, name, piped) from None


def _note(value: Any) -> dict[str, Any] | str:
    """The item as a note's fields, or why it is none."""
    if not isinstance(value, dict):
        return "each item must be a JSON object with a 'text' field"
    try:  # a lone surrogate is valid JSON but no text (``amem.kernel.safejson``)
        safejson.check_text(value, root="the item")
    except InvalidArgumentError as exc:
        return str(exc)
    return value


__all__ = ["CHAT_EXPORTS", "LIST_KEYS", "array_notes", "chat_export_of"]
