"""The retrieval benchmark gives each LoCoMo turn its own time: the session's plus a second per turn."""

from __future__ import annotations

from benchmarks.retrieval import parse_args, turn_time


def test_turns_of_a_session_are_a_second_apart_and_sessions_count_apart() -> None:
    told: dict[str, int] = {}
    first = [turn_time("2023-05-08T13:56:00", told) for _ in range(3)]
    other = turn_time("2023-05-25T13:14:00", told)
    assert first == ["2023-05-08T13:56:00", "2023-05-08T13:56:01", "2023-05-08T13:56:02"]
    assert other == "2023-05-25T13:14:00"  # another session starts at its own time
    assert turn_time("2023-05-08T13:56:00", told) == "2023-05-08T13:56:03"
    assert parse_args(["locomo"]).turn_times is True
    assert parse_args(["locomo", "--no-turn-times"]).turn_times is False
