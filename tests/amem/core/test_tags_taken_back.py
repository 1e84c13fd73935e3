"""Which tags a note's user took back, read from its history (``amem.write.takenback``):
pure functions over literal histories."""

from __future__ import annotations

from typing import Any

from amem.write.takenback import first_taken, held_back, taken_back


def upd(old: list[str], new: list[str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"action": "update", "at": "2026-01-10T12:00:00+00:00",
                             "old_tags": old}
    if new is not None:
        entry["new_tags"] = new
    return entry


def joined(tags: list[str], kept: list[str], by: str) -> dict[str, Any]:
    return {"action": "tags_added", "at": "2026-01-10T12:00:00+00:00", "tags": tags,
            "kept": kept, "triggered_by": by}


def test_a_removal_is_in_force_until_the_tag_comes_back() -> None:
    history = [upd(["travel", "Conference"], ["travel"])]
    assert taken_back(history, ["travel"]) == {"conference": 0}  # by key: any spelling
    # the user put it back: no removal in force, whatever happened before
    back = [*history, upd(["travel"], ["travel", "conference"])]
    assert taken_back(back, ["travel", "conference"]) == {}
    # and took it out again: the last removal counts
    again = [*back, {"action": "evolve"}, upd(["travel", "conference"], ["travel"])]
    assert taken_back(again, ["travel"]) == {"conference": 3}
    # a text-only update says nothing about tags
    assert taken_back([{"action": "update", "old_content": "x"}], ["a"]) == {}


def test_an_older_entry_without_its_new_tags_is_read_from_what_follows() -> None:
    # written before updates recorded their new tags: the tags after it are the next
    # recorded "before" (an update's old_tags, a join's kept), else the note's tags now
    assert taken_back([upd(["a", "b", "c"])], ["a"]) == {"b": 0, "c": 0}
    history = [upd(["a", "b", "c"]), joined(["d"], ["a", "c"], "imp-1")]
    assert taken_back(history, ["a", "c", "d"]) == {"b": 0}
    # a tag a join brought back is no removal in force
    assert taken_back([upd(["a", "b"]), joined(["b"], ["a"], "imp-1")], ["a", "b"]) == {}


def test_when_a_source_first_gave_its_tags() -> None:
    history = [{"action": "fold", "triggered_by": "imp-2", "old_tags": [], "new_tags": []},
               joined(["x"], [], "imp-1"), joined(["y"], ["x"], "imp-1")]
    assert first_taken(history, "note", "note") == -1  # the text the note was stored from
    assert first_taken(history, "note", "imp-1") == 1
    assert first_taken(history, "note", "imp-2") == 0  # folded into it
    assert first_taken(history, "note", "imp-3") is None  # never: a new source


def test_held_back_only_what_was_removed_after_the_source_gave_it() -> None:
    # stored from imp-1 with [travel, conference]; the user removed conference
    history = [upd(["travel", "conference"], ["travel"])]
    assert held_back(history, ["travel"], "imp-1", "imp-1") == {"conference"}
    # another source, never seen before the removal: its tags arrive
    assert held_back(history, ["travel"], "imp-1", "imp-9") == set()
    # a source first seen before the removal is held back too
    seen = [joined(["conference"], ["travel"], "imp-9"), *history]
    assert held_back(seen, ["travel"], "imp-1", "imp-9") == {"conference"}
    # ... but not one first seen after it
    late = [*history, joined(["lisbon"], ["travel"], "imp-9")]
    assert held_back(late, ["travel", "lisbon"], "imp-1", "imp-9") == set()
