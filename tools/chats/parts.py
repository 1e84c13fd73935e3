"""Which files of an export hold its conversations, and what each of the others is: the same
rule for the zip the app sends and for the folder a user unzipped it into.

Pure functions over the files' paths inside the export (``/``-separated): nothing is opened.
A real export holds, beside its conversations, a web page of them (ChatGPT's ``chat.html``),
the account's other data (ChatGPT's ``user.json``, ``message_feedback.json``,
``model_comparisons.json``, ``shared_conversations.json``, ``group_chats.json``,
``shopping.json``, ``export_manifest.json``; Claude's ``users.json``, ``projects.json``,
``memories.json``) and the files uploaded or generated in its chats (images, audio, ChatGPT's
``file-...`` uploads and ``dalle-generations/``), for which the conversations hold placeholders.
Those are counted, by kind; a file no export holds, and the conversations of another export
found inside this one, are named (never silently skipped).
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

__all__ = ["LEFT_OUT", "MANIFEST", "Parts", "find_parts", "is_sharded", "listed_parts"]

#: why a file of the export is not read -> what it is (the keys of ``LoadReport.files_left_out``)
LEFT_OUT = {
    "web_page": "the same conversations as a web page (chat.html)",
    "export_data": "the export's other data (account, feedback, shared links, projects, memories, its manifest)",
    "media": "files uploaded or generated in the chats (the conversations hold a placeholder for each)",
    "hidden": "hidden files (a file manager's or an archiver's own)",
    "other_export": "the conversations of another export inside this one (named)",
    "unknown": "files no ChatGPT or Claude export holds (named)",
}
_EXPORT_DATA = frozenset({
    "user.json", "message_feedback.json", "model_comparisons.json", "shared_conversations.json",
    "group_chats.json", "shopping.json", "export_manifest.json",  # ChatGPT
    "users.json", "projects.json", "memories.json"})  # Claude
#: the file a sharded ChatGPT export lists its shards in, beside them
MANIFEST = "export_manifest.json"
#: a shard of a large ChatGPT export: exports since 2026 split conversations.json into
#: conversations-000.json, conversations-001.json, ... (listed in export_manifest.json)
_SHARD = re.compile(r"conversations-(\d+)\.json")
#: ChatGPT's names for an uploaded or generated file (``file-<id>-<name>``, ``file_<hex>``)
_UPLOAD = re.compile(r"file[-_][A-Za-z0-9]")


@dataclass
class Parts:
    """An export's files: ``read``, the ones holding its conversations in the order they are
    read; ``left_out``, every other file with its ``LEFT_OUT`` key."""

    read: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)


def find_parts(names: Iterable[str], odd: Collection[str] = ()) -> Parts:
    """The parts of the export whose files are ``names``: in the shallowest folder holding a
    ``conversations.json`` or shards (``conversations-000.json``, ...), its
    ``conversations.json``, else its shards in their numbers' order. Every other file gets what
    it is (:data:`LEFT_OUT`); a conversations file elsewhere is another export's. ``odd`` are
    names that are no regular file (a broken link, a pipe, a link to a folder): never read,
    ``unknown`` whatever their name.
    """
    files = sorted(n for n in names if not n.endswith("/"))
    candidates = [n for n in files if n not in odd and (_base(n) == "conversations.json"
                                                        or _SHARD.fullmatch(_base(n)))]
    candidates = [n for n in candidates if _what(n, is_part=True) != "hidden"]
    parts = Parts()
    if candidates:
        top = min((_folder(n) for n in candidates), key=lambda f: (f.count("/"), f))
        here = [n for n in candidates if _folder(n) == top]
        whole = [n for n in here if _base(n) == "conversations.json"]
        parts.read = whole or sorted(here, key=_shard_number)
    for name in files:
        if name in odd and _what(name, is_part=False) != "hidden":
            parts.left_out.append((name, "unknown"))
        elif name not in parts.read:
            parts.left_out.append((name, _what(name, is_part=name in candidates)))
    return parts


def is_sharded(parts: Parts) -> bool:
    """Whether the parts read are shards (``conversations-000.json``, ...), which a manifest lists."""
    return bool(parts.read) and _base(parts.read[0]) != "conversations.json"


def listed_parts(manifest: object) -> list[str] | None:
    """The shards a manifest (``MANIFEST``, parsed) lists, paths from its folder, or None when
    it holds no such list: ``{"logical_files": {"conversations.json": {"files": [...]}}}``, the
    shape a sharded export was seen with."""
    try:
        files = manifest["logical_files"]["conversations.json"]["files"]  # type: ignore[index]
    except (KeyError, TypeError, IndexError):
        return None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return list(files)


def _what(name: str, *, is_part: bool) -> str:
    base = _base(name)
    if any(step.startswith(".") or step == "__MACOSX" for step in name.split("/")):
        return "hidden"
    if is_part:
        return "other_export"
    if base == "chat.html":
        return "web_page"
    if base in _EXPORT_DATA:
        return "export_data"
    kind = (mimetypes.guess_type(base)[0] or "").split("/")[0]
    if kind in ("image", "audio", "video") or base.endswith(".dat") or _UPLOAD.match(base) \
            or "dalle-generations" in name.split("/"):
        return "media"
    return "unknown"


def _base(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _folder(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def _shard_number(name: str) -> int:
    found = _SHARD.fullmatch(_base(name))
    assert found is not None  # only shards are sorted by it
    return int(found.group(1))
