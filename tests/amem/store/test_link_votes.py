"""Step 4b2: a candidate the best candidates link to is lifted by their standing
(amem.search.linked), on a real engine holding the notes' links."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

from amem import load_config
from amem.backends import EdgeBackend
from amem.backends.base import Point, SparseVector
from amem.notes import point_id
from amem.ranking import logistic
from amem.search import linked

AGENT = "a"


def _pid(n: int, agent: str = AGENT) -> str:
    return point_id(agent, f"note{n}")


@pytest.fixture
def backend() -> Iterator[EdgeBackend]:
    engine = EdgeBackend.temporary(4)
    # note0 and note1 (the best two) both link to note5; note2 links to another agent's
    # note6 and carries junk beside it; nothing links to note4
    links = {0: ["note5", "note3"], 1: ["note5", 17], 2: [None, "note6"], 3: [], 4: "note5"}
    # the seventh candidate is another agent's note6: a link names a note of its own agent
    owners = {n: AGENT for n in range(6)} | {6: "b"}
    engine.upsert([Point(id=_pid(n, owners[n]), dense=np.ones(4, dtype=np.float32),
                         sparse=SparseVector([], []),
                         payload={"id": f"note{n}", "agent_id": owners[n],
                                  "links": links.get(n, [])})
                   for n in range(7)])
    yield engine
    engine.close()


def _fused(*logits: float) -> list[tuple[str, float]]:
    return [(_pid(n, AGENT if n < 6 else "b"), logistic(z)) for n, z in enumerate(logits)]


def test_the_note_two_good_matches_link_to_climbs_under_the_kept_head(backend: EdgeBackend) -> None:
    config = load_config(overrides={"link_lift": 0.1, "link_lift_seeds": 3, "link_lift_keep": 1})
    fused = _fused(3.0, 2.0, 1.0, 0.4, 0.3, -0.5, -1.0)
    lifted, seeds = linked.lift(config, backend, AGENT, fused)
    scores = dict(lifted)
    # note5: -0.5 + 0.1 * (3.0 + 2.0) = 0.0; note3: 0.4 + 0.1 * 3.0 = 0.7 (note0 links it)
    assert scores[_pid(5)] == pytest.approx(logistic(0.0))
    assert scores[_pid(3)] == pytest.approx(logistic(0.7))
    assert [pid for pid, _ in lifted][:5] == [_pid(n) for n in (0, 1, 2, 3, 4)]
    assert [pid for pid, _ in lifted][5:] == [_pid(5), _pid(6, "b")]
    # another agent's note6 and the junk entries move nothing; note4's own links are not a seed's
    assert scores[_pid(6, "b")] == fused[6][1] and scores[_pid(4)] == fused[4][1]
    # the seeds are read whole, for the search's read of its matches to reuse
    assert set(seeds) == {_pid(0), _pid(1), _pid(2)}
    assert seeds[_pid(0)].payload["links"] == ["note5", "note3"]


def test_the_kept_head_is_never_passed(backend: EdgeBackend) -> None:
    config = load_config(overrides={"link_lift": 5.0, "link_lift_seeds": 2, "link_lift_keep": 2})
    lifted, _ = linked.lift(config, backend, AGENT, _fused(3.0, 2.0, 1.0, 0.4, 0.3, -0.5))
    order = [pid for pid, _ in lifted]
    # note5 (voted by both seeds) and note3 (by note0) lifted as far as under the second; at
    # that ceiling they tie and keep their order
    assert order[:4] == [_pid(0), _pid(1), _pid(3), _pid(5)]
    assert dict(lifted)[_pid(5)] == dict(lifted)[_pid(3)] < dict(lifted)[_pid(1)]


@pytest.mark.parametrize("overrides", [{"link_lift": 0.0}, {"fusion": "rrf"}])
def test_off_or_with_rrf_nothing_moves_and_nothing_is_read(
        backend: EdgeBackend, overrides: dict[str, object]) -> None:
    fused = _fused(3.0, 2.0, 1.0, 0.4, 0.3, -0.5)
    lifted, seeds = linked.lift(load_config(overrides=overrides), backend, AGENT, fused)
    assert lifted == fused and seeds == {}


def test_the_settings_are_checked() -> None:
    from amem.errors import ConfigError

    for bad in ({"link_lift": -0.1}, {"link_lift_seeds": 0}, {"link_lift_keep": 0}):
        with pytest.raises(ConfigError):
            load_config(overrides=bad)
