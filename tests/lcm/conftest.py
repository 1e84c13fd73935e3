"""Shared fixtures for the lcm tests: a manual clock, a scripted LLM, an in-memory store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lcm import LcmConfig, LcmStore, ManualClock


class ScriptedLLM:
    """A SummaryLLM that replays a script: each entry is a reply string, an exception, or a callable."""

    def __init__(self, script: list[Any] | None = None, default: Any = None) -> None:
        self.script = list(script or [])
        self.default = default
        self.calls: list[tuple[str, str, int | None]] = []

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        self.calls.append((system, user, max_tokens))
        step = self.script.pop(0) if self.script else self.default
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return str(step(system, user))
        if step is None:
            raise RuntimeError("script exhausted")
        return str(step)


@pytest.fixture(autouse=True)
def _no_lcm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LCM_"):
            monkeypatch.delenv(name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_store(clock: ManualClock) -> Iterator[Callable[..., LcmStore]]:
    stores: list[LcmStore] = []

    def make(path: str = ":memory:", llm: Any = None, **overrides: Any) -> LcmStore:
        store = LcmStore(path, LcmConfig(**overrides), llm=llm, clock=clock)
        stores.append(store)
        return store

    yield make
    for s in stores:
        s.close()


@pytest.fixture
def open_again(clock: ManualClock) -> Iterator[Callable[[LcmStore], LcmStore]]:
    """Another handle on a store's database: a second host (another connection, another process)."""
    opened: list[LcmStore] = []

    def again(store: LcmStore) -> LcmStore:
        other = LcmStore(store.db.path, store.config, clock=clock)
        opened.append(other)
        return other

    yield again
    for s in opened:
        s.close()


@pytest.fixture
def store(make_store: Callable[..., LcmStore]) -> LcmStore:
    return make_store()


def chat(n: int, start: int = 0, prefix: str = "msg") -> list[dict[str, str]]:
    """Alternating user/assistant messages with distinct, recall-worthy content."""
    out = []
    for i in range(start, start + n):
        if i % 2 == 0:
            out.append({"role": "user", "content": f"{prefix} {i}: please check src/module_{i}.py for bug #{i}"})
        else:
            out.append({"role": "assistant", "content": f"{prefix} {i}: fixed it, ran `pytest -k case_{i}` and it passed"})
    return out
