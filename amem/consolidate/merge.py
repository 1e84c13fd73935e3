"""How two duplicate notes become one: survivor choice, the offline merge and the LLM merge.

The survivor is the more informative note (more distinct words, then longer, then more links,
then more retrievals, then the older, then the smaller id), so the choice is the same on every
run and every machine. Both merges keep the survivor's id and union keywords, tags, topics,
subjects and links, sum retrieval counts and remember the loser's content hashes (an ``add`` of
the loser's text later deduplicates to the survivor). They differ in the text:

* offline: the survivor's content gains the loser's sentences it lacks, by the write path's
  fold rule (``amem.write.fold.fold_content``), when the loser holds a search term the
  survivor does not (:func:`merged_text`): a duplicate or a rewording adds nothing, while two notes
  alike in shape but not in fact ("web-1 has IP 10.0.0.11", "web-3 has IP 10.0.0.13", cosine
  over the threshold) keep both facts where search reads them. The loser's whole text is
  also kept word for word in the survivor's ``evolution_history`` and in the soft-deleted
  loser. (The survivor's content used to stay as it was, which left the loser's facts in the
  history alone: found by no search.)
* LLM: the model writes one unified content and context from both notes; any
  :class:`~amem.errors.LLMError` falls back to the offline merge, and the error is recorded.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from ..errors import LLMError, LLMResponseError
from ..kernel.llm import JsonLLM
from ..notes import MAX_LIST_ITEMS, Note, content_hash, now_iso, unique, unique_subjects, unique_tags
from ..text import tokenize
from ..write.fold import fold_content

log = logging.getLogger(__name__)

_WORD_RE = re.compile(r"\w+", re.UNICODE)

MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "content": {"type": "string"},
        "context": {"type": "string"},
        "keywords": {"type": "array", "items": {"type": "string"}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["content", "context", "keywords", "tags"],
    "additionalProperties": False,
}

MERGE_SYSTEM = (
    "You merge two memory notes that say nearly the same thing into one note. Keep every fact "
    "from both (names, numbers, dates, preferences); drop only repetition; do not add anything. "
    "Answer with JSON: content (the unified note text), context (one sentence on what it is "
    "about), keywords and tags (short lists)."
)


#: the one call the merge makes of a chat model (``amem.llm.LLMClient`` has it)
MergeLLM = JsonLLM


def informativeness(content: str, links: int, retrievals: int, timestamp: str,
                    note_id: str) -> tuple[Any, ...]:
    """A sort key: the larger key is the more informative note (survivor of a merge)."""
    words = len({w.lower() for w in _WORD_RE.findall(content)})
    # Older notes win ties (their id is the one other systems already hold), so the timestamp
    # and the id compare inverted: the smaller string makes the larger key.
    return (words, len(content), links, retrievals, _Inverted(timestamp), _Inverted(note_id))


@dataclass(frozen=True, order=False)
class _Inverted:
    """Wraps a string so that the smaller string compares as the larger."""

    value: str

    def __lt__(self, other: "_Inverted") -> bool:
        return self.value > other.value

    def __gt__(self, other: "_Inverted") -> bool:
        return self.value < other.value

    def __le__(self, other: "_Inverted") -> bool:
        return self.value >= other.value

    def __ge__(self, other: "_Inverted") -> bool:
        return self.value <= other.value


def note_key(note: Note) -> tuple[Any, ...]:
    return informativeness(note.content, len(note.links), note.retrieval_count, note.timestamp,
                           note.id)


@dataclass
class Merged:
    """The survivor after a merge and how it was made."""

    note: Note
    merged_by: str
    llm_error: str | None = None


def _cap(items: list[str]) -> list[str]:
    # The schema caps lists at MAX_LIST_ITEMS; the loser keeps its full lists, so nothing is lost.
    return items[:MAX_LIST_ITEMS]


def _union_fields(survivor: Note, loser: Note, links: list[str]) -> Note:
    """Everything both merges share: unions, sums, hashes; content untouched."""
    out = survivor.copy()
    out.keywords = _cap(unique([*survivor.keywords, *loser.keywords]))
    out.tags = _cap(unique_tags([*survivor.tags, *loser.tags]))
    out.topics = _cap(unique([*survivor.topics, *loser.topics]))
    out.subjects = _cap(unique_subjects([*survivor.subjects, *loser.subjects]))
    out.links = links
    out.retrieval_count = survivor.retrieval_count + loser.retrieval_count
    out.folded_hashes = unique([*survivor.folded_hashes, loser.hash, *loser.folded_hashes])
    out.timestamp = min(t for t in (survivor.timestamp, loser.timestamp) if t) if (
        survivor.timestamp or loser.timestamp) else ""
    out.last_accessed = max(survivor.last_accessed, loser.last_accessed)
    out.context = survivor.context or loser.context
    # the larger label set: a merge joins only notes whose labels nest (amem.write.together)
    if len(loser.metadata) > len(survivor.metadata):
        out.metadata = dict(loser.metadata)
    out.pending_merge = False
    out.merged_into = None
    return out


def merged_text(survivor: Note, loser: Note) -> str:
    """The offline merge's content: the survivor's, then the loser's sentences it lacks.

    A loser whose every search term (``amem.text.tokenize``: stemmed, stop words out) and every
    word with a digit (:func:`_values`, whole) the survivor already holds is a rewording
    ("drinks green tea in the morning" beside "drinks green tea every morning before work"):
    search finds it through the survivor as it is, so nothing is appended. A loser with a term
    of its own (another number, name or date) has a fact the survivor lacks, and its sentences
    are appended by the fold rule.
    """
    if (set(tokenize(loser.content)) <= set(tokenize(survivor.content))
            and _values(loser.content) <= _values(survivor.content)):
        return survivor.content
    return fold_content(survivor.content, loser.content)


#: a word holding a digit, whole: "10.0.0.1", "web-1", "2025-01-05", "03:00"
_VALUE = re.compile(r"[\w.:/-]*\d[\w.:/-]*")


def _values(text: str) -> set[str]:
    """The words of ``text`` that hold a digit, whole (trailing dots off). The search
    tokenizer cuts them into pieces, and "10.0.0.1" is then made of "10.0.1.10"'s pieces:
    compared whole, another address is another fact."""
    return {m.group().strip(".:/-").casefold() for m in _VALUE.finditer(text)}


def _offline(survivor: Note, loser: Note, links: list[str]) -> Note:
    merged = _union_fields(survivor, loser, links)
    merged.content = merged_text(survivor, loser)
    if merged.content != survivor.content:
        merged.folded_hashes = unique([*merged.folded_hashes, survivor.hash])
        merged.hash = content_hash(merged.content)
    return merged


def merge_notes(survivor: Note, loser: Note, *, links: list[str], similarity: float | None,
                now: datetime, llm: MergeLLM | None, max_chars: int,
                linkers: Mapping[str, bool] | None = None) -> Merged:
    """The survivor with the loser merged in, its history entry appended. ``linkers``: the
    notes whose link to the loser the merge points at the survivor, each with whether it
    linked the survivor too (recorded, so that ``amem separate`` points them back)."""
    merged = _offline(survivor, loser, links)
    merged_by, error = "offline", None
    if llm is not None:
        try:
            reply = llm.complete_json(MERGE_SYSTEM, _merge_prompt(survivor, loser),
                                      schema=MERGE_SCHEMA, name="merge_notes")
            _apply_llm(merged, survivor, loser, reply, max_chars)
            model = getattr(llm, "model", "llm")
            merged_by = f"llm:{model}"
            merged.enriched_by = merged_by
        except LLMError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.warning("LLM merge of %s into %s failed, merged offline: %s", loser.id,
                        survivor.id, error)
            merged = _offline(survivor, loser, links)
    merged.evolution_history = [*survivor.evolution_history, {
        "triggered_by": "consolidate", "at": now_iso(now), "action": "consolidate_merge",
        "merged": loser.id, "similarity": None if similarity is None else round(similarity, 6),
        "merged_by": merged_by, "llm_error": error, "merged_text": loser.content,
        "old_content": survivor.content if merged.content != survivor.content else None,
        "old_context": survivor.context, "new_context": merged.context,
        "old_tags": list(survivor.tags), "new_tags": list(merged.tags),
        # what ``amem separate`` needs to take the loser out again exactly (amem.joins)
        **_undo_record(survivor, loser, merged, merged_by),
        **_moved_record(survivor, loser, merged, linkers or {})}]
    return Merged(merged, merged_by, error)


def _undo_record(survivor: Note, loser: Note, merged: Note, merged_by: str) -> dict[str, Any]:
    """The paragraph the offline merge appended (none for an LLM's rewrite: ``old_content``
    and ``new_hash`` undo that), the text's hash after the merge, and the list items the loser
    came with and those it added to the survivor."""
    lists = ("keywords", "tags", "subjects", "topics")
    out: dict[str, Any] = {
        "new_hash": merged.hash,
        "brought": {name: list(getattr(loser, name)) for name in lists},
        "added": {name: [v for v in getattr(merged, name) if v not in getattr(survivor, name)]
                  for name in lists}}
    # what the merge took of the loser over the survivor's own (the older write time, the
    # larger label set), so that a separation gives the survivor its own back
    if merged.timestamp != survivor.timestamp:
        out["old_timestamp"] = survivor.timestamp
    if merged.metadata != survivor.metadata:
        out["old_metadata"] = dict(survivor.metadata)
    if merged.enriched_by != survivor.enriched_by:  # an LLM's merge names its model
        out["old_enriched_by"] = survivor.enriched_by
    if merged.content == survivor.content:
        out["appended"] = ""
    elif merged_by == "offline" and merged.content.startswith(f"{survivor.content}\n\n"):
        out["appended"] = merged.content[len(survivor.content) + 2:]
    return out


def _moved_record(survivor: Note, loser: Note, merged: Note,
                  linkers: Mapping[str, bool]) -> dict[str, Any]:
    """What the merge moved from the loser to the survivor besides its text, so that a
    separation can move it back: each note's heat (retrieval count, last access: the merge
    sums the one and keeps the later of the other), the links the survivor took from the
    loser alone, whether it linked the loser itself, and the notes whose link to the loser
    now names the survivor (``both``: those that linked the survivor too, whose link to the
    loser was dropped)."""
    return {
        "heat": {"retrieval_count": survivor.retrieval_count,
                 "last_accessed": survivor.last_accessed,
                 "part": {"retrieval_count": loser.retrieval_count,
                          "last_accessed": loser.last_accessed}},
        "links_moved": {
            "added": [t for t in merged.links if t not in survivor.links],
            "linked_part": loser.id in survivor.links,
            "redirected": sorted(s for s, both in linkers.items() if not both),
            "both": sorted(s for s, both in linkers.items() if both)}}


def was_merged(survivor: Note, loser_id: str) -> bool:
    """Whether the survivor's history already records absorbing ``loser_id`` (resume check)."""
    return any(h.get("action") == "consolidate_merge" and h.get("merged") == loser_id
               for h in survivor.evolution_history)


def loser_entry(survivor_id: str, now: datetime) -> dict[str, Any]:
    return {"triggered_by": "consolidate", "at": now_iso(now), "action": "merged_into",
            "survivor": survivor_id}


def _merge_prompt(survivor: Note, loser: Note) -> str:
    def show(label: str, note: Note) -> str:
        return (f"{label}:\ncontent: {note.content}\ncontext: {note.context}\n"
                f"keywords: {', '.join(note.keywords)}\ntags: {', '.join(note.tags)}")

    return show("Note A", survivor) + "\n\n" + show("Note B", loser)


def _apply_llm(merged: Note, survivor: Note, loser: Note, reply: Any, max_chars: int) -> None:
    """Take the model's text; raise ``LLMResponseError`` for a reply that would harm the note."""
    if not isinstance(reply, dict):
        raise LLMResponseError("merge reply is not a JSON object", raw=repr(reply)[:300])
    content, context = reply.get("content"), reply.get("context")
    if not isinstance(content, str) or not content.strip():
        raise LLMResponseError("merge reply has no content", raw=repr(reply)[:300])
    if len(content) > max_chars or "\x00" in content:
        raise LLMResponseError(f"merged content is {len(content)} characters (limit {max_chars})",
                               raw=content[:300])
    lists = {}
    for name in ("keywords", "tags"):
        value = reply.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise LLMResponseError(f"merge reply field {name} is not a list of strings",
                                   raw=repr(reply)[:300])
        lists[name] = [v.strip()[:200] for v in value if v.strip()]
    merged.content = content.strip()
    if isinstance(context, str) and context.strip():
        merged.context = context.strip()[:500]
    merged.keywords = _cap(unique([*lists["keywords"], *survivor.keywords, *loser.keywords]))
    merged.tags = _cap(unique_tags([*lists["tags"], *survivor.tags, *loser.tags]))
    if merged.content != survivor.content:
        merged.folded_hashes = unique([*merged.folded_hashes, survivor.hash])
        merged.hash = content_hash(merged.content)
