"""Fixtures for the scheduler: small stand-in stores, a real note store, scheduler configs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from scheduler import SchedulerConfig


class ToyNoteStore:
    """The two calls the job makes of a note store, counted; ``fail`` makes consolidate raise."""

    def __init__(self, home: Path, *, fail: bool = False, delay: float = 0.0) -> None:
        self.config = load_config(overrides={"home": home})
        self.fail, self.delay = fail, delay
        self.consolidations = 0
        self.optimizations = 0
        self._lock = threading.Lock()

    def consolidate(self, *, agent_id: str | None = None, all_agents: bool = False,
                    progress: Any = None) -> Any:
        assert all_agents, "the nightly job consolidates every agent"
        with self._lock:
            self.consolidations += 1
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("disk full")
        return None

    def optimize(self) -> None:
        self.optimizations += 1


class ToyLcm:
    """An lcm store's ``maintenance()`` with a result of the real shape."""

    def __init__(self, failures: dict[str, str] | None = None) -> None:
        self.calls = 0
        self.failures = failures or {}

    def maintenance(self) -> Any:
        self.calls += 1
        failures = self.failures

        class Result:
            def to_dict(self) -> dict[str, Any]:
                return {"compactions": [{"id": 1}], "failures": failures, "retention": None}

        return Result()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def toy(home: Path) -> ToyNoteStore:
    return ToyNoteStore(home)


def cfg(home: Path, zone: str = "UTC", **kw: Any) -> SchedulerConfig:
    return SchedulerConfig(home=home, timezone=zone, **kw)


@pytest.fixture
def real_store(home: Path) -> Iterator[MemoryStore]:
    config = load_config(overrides={"home": home})
    with MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=128),
                     clock=ManualClock("2026-03-01T00:00:00+00:00")) as store:
        yield store
