"""What a fold or a merge put into a note, read back from its history, and its text without it.

A fold (``amem.write.fold``) and a nightly merge (``amem.consolidate.merge``) each leave one
``evolution_history`` entry on the note that received a text: ``fold`` with the text's id in
``triggered_by``, ``consolidate_merge`` with the merged note's id in ``merged``. That id is
the *part*: what ``amem separate NOTE PART`` takes out again (``amem.separate``).

Pure functions over a note's content and history. Taking the text out is exact or not done:

* the join appended a paragraph (``"\\n\\n"`` + the sentences the note lacked); entries
  written since 2026-12-06 record it (``appended``), older ones are redone (the fold rule is a
  function of the two texts) at each paragraph break of the note, and must match one alone;
* that paragraph must still stand in the text exactly once, whole, between paragraph breaks
  (an edit since may have rewritten it);
* no text joined *later* may lose a sentence by it (a later fold appended only what the note
  lacked then, so a sentence it shares with this paragraph lives there alone);
* a merge by an LLM rewrote the text whole: undone (its ``old_content`` back) only while no
  later entry changed the text.

When any of these fails the note keeps its text and the caller says why: guessing which
sentences to drop could delete what the note itself said.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import ValidationError
from .notes import content_hash
from .write.fold import fold_content

FOLD = "fold"
MERGE = "consolidate_merge"
#: the entry a separation leaves on the note the part was taken out of
SEPARATED = "separated"
#: the entry the part's own note gets
SEPARATED_FROM = "separated_from"
#: entries that may change a note's text
_TEXT_CHANGES = (FOLD, MERGE, "update", SEPARATED)
#: the lists a join may add to a note, and a separation may take out again
LISTS = ("keywords", "tags", "subjects", "topics")


@dataclass(frozen=True)
class Join:
    """One text joined into a note: the history entry at ``position``."""

    position: int
    kind: str  # "fold" or "merge"
    part: str  # the id to pass to ``amem separate``
    text: str  # the whole text joined, word for word
    entry: Mapping[str, Any]


def _join(position: int, entry: Mapping[str, Any]) -> Join | None:
    action = entry.get("action")
    if action == FOLD:
        return Join(position, "fold", str(entry.get("triggered_by")),
                    str(entry.get("folded_text", "")), entry)
    if action == MERGE:
        return Join(position, "merge", str(entry.get("merged")),
                    str(entry.get("merged_text", "")), entry)
    return None


def part_of(entry: Mapping[str, Any]) -> str | None:
    """The part a history entry names: the id a fold or a merge joined in (what ``amem
    separate`` takes), or the one a separation took out or made; None for other entries."""
    join = _join(0, entry)
    if join is not None:
        return join.part
    if entry.get("action") in (SEPARATED, SEPARATED_FROM) and entry.get("part"):
        return str(entry["part"])
    return None


def separated_into(history: Sequence[Mapping[str, Any]], part: str) -> str | None:
    """The note ``part`` became when it was separated from this note (None: it was not)."""
    for entry in reversed(history):
        if entry.get("action") == SEPARATED and entry.get("part") == part:
            return str(entry.get("into"))
    return None


def joined(history: Sequence[Mapping[str, Any]]) -> list[Join]:
    """The texts joined into a note and not separated since, oldest first."""
    out = []
    for position, entry in enumerate(history):
        join = _join(position, entry)
        if join is not None and separated_into(history[position:], join.part) is None:
            out.append(join)
    return out


def find_join(note_id: str, history: Sequence[Mapping[str, Any]], part: str) -> Join:
    """The join of ``part`` into the note; ``ValidationError`` (field ``part``) when the note
    never received it, or it was separated already."""
    into = separated_into(history, part)
    if into is not None:
        raise ValidationError(f"{part!r} was separated from note {note_id!r} already: it is "
                              f"note {into!r}", field="part")
    for join in reversed(joined(history)):
        if join.part == part:
            return join
    raise ValidationError(f"note {note_id!r} received no fold or merge of {part!r}; "
                          f"`amem history {note_id}` lists the parts it received", field="part")


def added_by(join: Join) -> dict[str, list[str]]:
    """The list items the join gave the note (it lacked them before). An entry written before
    they were recorded tells only its tags (``old_tags`` beside ``new_tags``)."""
    added = join.entry.get("added")
    if isinstance(added, Mapping):
        return {name: [str(v) for v in added.get(name) or ()] for name in LISTS}
    old = set(join.entry.get("old_tags") or ())
    return {"tags": [str(t) for t in join.entry.get("new_tags") or () if t not in old]}


def brought_by(join: Join) -> dict[str, list[str]]:
    """Every list item the joined text came with (whether the note had it or not)."""
    brought = join.entry.get("brought")
    if isinstance(brought, Mapping):
        return {name: [str(v) for v in brought.get(name) or ()] for name in LISTS}
    return added_by(join)


def lists_without(lists: Mapping[str, Sequence[str]], join: Join,
                  later: Sequence[Join]) -> dict[str, list[str]]:
    """The items to take out of each of the note's ``lists``: those the join alone gave (a
    later join still in the note that came with one keeps it)."""
    kept: dict[str, set[str]] = {name: set() for name in LISTS}
    for other in later:
        for name, items in brought_by(other).items():
            kept[name].update(items)
    out: dict[str, list[str]] = {}
    for name, items in added_by(join).items():
        gone = [i for i in items if i in (lists.get(name) or ()) and i not in kept[name]]
        if gone:
            out[name] = gone
    return out


def heat_back(join: Join, count: int, accessed: str
              ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A merge's heat split back by its record: (the survivor's ``retrieval_count`` and
    ``last_accessed`` now, the merged note's); None when the merge recorded none (before
    2026-12-06) or the join is a fold (a folded text had no heat of its own).

    The merged note gets exactly what it had at the merge. The retrievals since the merge
    returned the survivor, by its id, for its whole text: which of the two texts a search
    matched cannot be told, so they stay with the note that was found (a share given to the
    merged note would be heat for searches nobody can say it answered). The survivor's last
    access goes back to its own unless it was opened or found since the merge.
    """
    heat = join.entry.get("heat")
    if join.kind != "merge" or not isinstance(heat, Mapping) \
            or not isinstance(heat.get("part"), Mapping):
        return None
    part = heat["part"]
    part_count = int(part.get("retrieval_count") or 0)
    own_accessed = str(heat.get("last_accessed") or "")
    part_accessed = str(part.get("last_accessed") or "")
    # the merge kept the later of the two; a later one since is the survivor's own access
    since = accessed > max(own_accessed, part_accessed)
    mine = {"retrieval_count": max(int(heat.get("retrieval_count") or 0), count - part_count),
            "last_accessed": accessed if since else own_accessed}
    return mine, {"retrieval_count": part_count, "last_accessed": part_accessed}


def _breaks(text: str) -> list[int]:
    out, at = [], text.find("\n\n")
    while at >= 0:
        out.append(at)
        at = text.find("\n\n", at + 1)
    return out


def appended(join: Join, content: str) -> str | None:
    """The paragraph the join appended to the note's text ("" when it appended none); None
    when that cannot be told (a rewrite by an LLM, or an older fold redone to no one answer)."""
    entry = join.entry
    if "appended" in entry:
        return str(entry["appended"])
    if join.kind == "merge":
        old = entry.get("old_content")
        if old is None:
            return ""  # the merge left the survivor's text as it was
        if entry.get("merged_by") != "offline":
            return None
        out = fold_content(str(old), join.text)
        return out[len(old) + 2:] if out.startswith(f"{old}\n\n") else None
    found = set()
    for k in _breaks(content):  # a fold appends at the end of the text it found
        before = content[:k]
        out = fold_content(before, join.text)
        if out != before and content.startswith(out) and (
                len(out) == len(content) or content.startswith("\n\n", len(out))):
            found.add(out[k + 2:])
    return found.pop() if len(found) == 1 else None


def without(content: str, paragraph: str) -> str | None:
    """``content`` without ``"\\n\\n" + paragraph``, which must stand in it exactly once and
    whole (a paragraph break or the end after it); None otherwise."""
    piece = "\n\n" + paragraph
    at = content.find(piece)
    if not paragraph or at < 0 or content.find(piece, at + 1) >= 0:
        return None
    end = at + len(piece)
    if end != len(content) and not content.startswith("\n\n", end):
        return None
    return content[:at] + content[end:]


def _still_holds(content: str, join: Join) -> bool:
    """Whether ``content`` still holds every sentence ``join`` put into it."""
    if join.kind == "merge" and join.entry.get("old_content") is None:
        return True  # a merge that appended nothing held no sentence of its own
    return fold_content(content, join.text) == content


def text_without(join: Join, content: str, history: Sequence[Mapping[str, Any]]
                 ) -> tuple[str, str | None]:
    """The note's text without what ``join`` put into it, and why it is kept whole (None
    when it was taken out, or there was nothing to take out)."""
    later_changes = [e for e in history[join.position + 1:] if e.get("action") in _TEXT_CHANGES]
    old = join.entry.get("old_content")
    if join.kind == "merge" and old is not None and join.entry.get("merged_by") != "offline":
        if later_changes:
            return content, ("the merge rewrote the text (by an LLM) and it changed again "
                             "since: kept as it is")
        made = join.entry.get("new_hash")
        if made is not None and made != content_hash(content):
            return content, "the text is not the one the merge wrote: kept as it is"
        return str(old), None
    paragraph = appended(join, content)
    if paragraph is None:
        return content, ("which sentences the join added cannot be told from its record: "
                         "kept as it is")
    if not paragraph:
        return content, None
    out = without(content, paragraph)
    if out is None:
        return content, ("the sentences the join added are no longer in the text as they were "
                         "(edited since): kept as it is")
    later = [j for j in joined(history) if j.position > join.position]
    sharing = [j.part for j in later if not _still_holds(out, j)]
    if sharing:
        return content, (f"texts joined later ({', '.join(sharing)}) hold sentences only the "
                         "join's paragraph holds: kept as it is")
    return out, None


def _left_in(history: Sequence[Mapping[str, Any]]) -> list[Join]:
    """Joins separated while their paragraph had to stay in the text (``text: "kept"``) and
    not taken out of it since (``also_taken_out`` of a later separation)."""
    done = {str(p) for e in history if e.get("action") == SEPARATED
            for p in e.get("also_taken_out") or ()}
    parts = {str(e.get("part")) for e in history
             if e.get("action") == SEPARATED and e.get("text") == "kept"} - done
    return [j for j in (_join(k, e) for k, e in enumerate(history))
            if j is not None and j.part in parts]


def settle_left(content: str, history: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """``content`` without the paragraphs earlier separations had to leave in it, where that
    is exact now (the later joins that held their sentences were separated since), and the
    parts taken out."""
    out, parts = content, []
    still = joined(history)
    for join in _left_in(history):
        paragraph = appended(join, out)
        if not paragraph:
            continue
        cut = without(out, paragraph)
        if cut is None or not all(_still_holds(cut, j) for j in still
                                  if j.position > join.position):
            continue
        out = cut
        parts.append(join.part)
    return out, parts


__all__ = ["FOLD", "Join", "LISTS", "MERGE", "SEPARATED", "SEPARATED_FROM", "added_by",
           "appended", "brought_by", "find_join", "heat_back", "joined", "lists_without", "part_of",
           "separated_into",
           "settle_left",
           "text_without", "without"]
