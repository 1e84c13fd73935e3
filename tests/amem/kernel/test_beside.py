"""``amem.kernel.beside``: two steps at once, both awaited, errors raised only after both end."""

from __future__ import annotations

import threading
import time

import pytest

from amem.kernel.beside import beside


def test_the_background_step_runs_on_a_worker_while_the_other_runs_here() -> None:
    started = threading.Event()
    where: dict[str, str] = {}

    def background() -> int:
        where["background"] = threading.current_thread().name
        started.set()
        return 1

    def here() -> str:
        where["here"] = threading.current_thread().name
        # waits for the worker: a background step run after this one would time out here
        return "here" if started.wait(timeout=10) else "alone"

    assert beside(background, here) == (1, "here")
    assert where["here"] == threading.current_thread().name
    assert where["background"].startswith("amem-beside")


def test_an_error_here_is_raised_only_after_the_background_step_has_ended() -> None:
    ended: list[str] = []

    def background() -> None:
        time.sleep(0.3)
        ended.append("background")

    def here() -> None:
        raise KeyError("here failed")

    with pytest.raises(KeyError, match="here failed"):
        beside(background, here)
    assert ended == ["background"]


def test_a_background_error_reaches_the_caller_and_heres_error_wins_when_both_fail() -> None:
    def broken() -> None:
        raise ValueError("background failed")

    with pytest.raises(ValueError, match="background failed"):
        beside(broken, lambda: "fine")
    with pytest.raises(KeyError, match="here failed"):
        beside(broken, lambda: (_ for _ in ()).throw(KeyError("here failed")))
