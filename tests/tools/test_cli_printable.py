"""What the human output shows of a note: never a control a terminal would act on, and the
note's place in a supersession chain in words (``--json`` had it; the table did not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amem.supersede import changed_in_part_order
from tools.cli.output import printable, search_table

from .test_cli_console import amem, amem_json, base_env

HOSTILE = "ANSI \x1b[2J\x1b[31mred\x1b[0m, a bell\x07, a return\r and a flip \u202eevil"


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    shown = printable(HOSTILE + "\nsecond line\tcolumn, emoji 👩‍👩‍👧, 中文")
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown and "\u202e" not in shown
    assert "\\x1b[2J" in shown and "\\x07" in shown and "\\x0d" in shown and "\\u202e" in shown
    assert shown.endswith("\nsecond line\tcolumn, emoji 👩‍👩‍👧, 中文")  # breaks, tabs, ZWJ kept


def test_the_table_says_what_replaced_or_changed_a_note() -> None:
    rows = [{"id": "new", "content": "moved", "via": "match", "rrf": 0.5, "hidden": ["old1"]},
            {"id": "part", "content": "runs pg", "via": "match", "rrf": 0.4,
             "partly_superseded_by": "new"},
            {"id": "old1", "content": "was here", "via": "match", "rrf": 0.3, "superseded_by": "new"}]
    text = search_table(rows)
    assert "↳ hides old1 (amem history old1)" in text
    assert "↳ partly changed by new; shown for the rest" in text
    assert "↳ replaced by new (shown for --history)" in text


def test_a_newer_note_that_changed_part_of_one_is_read_right_before_it() -> None:
    # the older note keeps its rank (its other facts may be what was asked)
    assert changed_in_part_order([("old", "new"), ("x", None), ("new", None)]) == [2, 0, 1]
    assert changed_in_part_order([("new", None), ("old", "new"), ("x", None)]) == [0, 1, 2]
    assert changed_in_part_order([("old", "gone"), ("x", None)]) == [0, 1]


@pytest.mark.slow
def test_list_search_and_get_print_no_escape_sequence(tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    note = amem_json(env, "add", HOSTILE, "--no-enrich")["id"]  # type: ignore[index]
    for args in (("list",), ("search", "ANSI red escape"), ("get", note)):
        out = amem(env, *args).stdout
        assert "\x1b" not in out and "\u202e" not in out and "\\x1b[2J" in out, (args, out)
    stored = amem_json(env, "get", note)["content"]  # type: ignore[index]
    assert stored == HOSTILE  # stored as given; only its printing is escaped


def test_status_lines_show_a_tuple_as_a_list_and_an_empty_table_on_its_line() -> None:
    # `amem status` (README step 2) showed `filters_left_out: ('tenant', 'is_active', ...)`, a
    # Python tuple, and an empty table (`summaries_by_depth`, a step's `summary`) as its name
    # over a blank line.
    from tools.cli.output import kv_text

    shown = kv_text({"memory": {"filters_left_out": ("tenant", "expiry"), "depths": {},
                                "points": 3}, "empty": []})
    assert shown == "memory:\n  filters_left_out: tenant, expiry\n  depths: \n  points: 3\nempty: "
