"""Stored tags an older amem wrote that this one refuses or keeps once (``amem.tagtidy``)."""

from __future__ import annotations

from amem.tagtidy import tidy_tags


def test_tags_naming_nothing_go_and_each_tag_stays_once() -> None:
    assert tidy_tags(["#", "work", " # ", "##"]) == ["work"]  # refused since: names no tag
    # one tag in two spellings (written before tags were compared by key): once, the spelling
    # without the '#' a note app writes before it, in the place the tag first came
    assert tidy_tags(["#Morning", "travel", "morning"]) == ["morning", "travel"]
    assert tidy_tags(["Morning", "MORNING", "#morning"]) == ["Morning"]
    # tidy already: unchanged, a lone '#'-spelled tag included (it is a tag, any case)
    assert tidy_tags(["#Morning", "travel"]) == ["#Morning", "travel"]
    assert tidy_tags([]) == []
