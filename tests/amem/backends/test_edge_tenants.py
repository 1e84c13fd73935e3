"""The edge backend knows when one agent owns every point (``amem.backends._edge_tenants``)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np

from amem.backends import EdgeBackend
from amem.backends._edge_tenants import SoleTenant
from amem.backends.base import Point, SparseVector


def sole(backend: EdgeBackend) -> tuple[str | None, int]:
    """The backend's sole agent and its facts' epoch."""
    facts = backend.store_facts()
    return facts.sole_agent, facts.epoch


def point(agent: str | None) -> Point:
    payload = {} if agent is None else {"agent_id": agent}
    return Point(str(uuid.uuid4()), np.ones(4, dtype=np.float32), SparseVector((1,), (1.0,)),
                 payload)


def test_the_states_and_when_the_epoch_moves() -> None:
    tenants = SoleTenant()
    assert tenants.get() == (None, 0)  # not read yet: never sole
    tenants.load([])
    empty_epoch = tenants.epoch
    tenants.written(["a", "a"])
    # nothing was stored before: no search could have left a tenant out, the epoch stays
    assert tenants.get() == ("a", empty_epoch)
    tenants.written(["a"])
    assert tenants.get() == ("a", empty_epoch)
    tenants.written(["a", "b"])
    assert tenants.get() == (None, empty_epoch + 1)
    tenants.written(["a"])  # one agent again in a batch does not make the store sole again
    assert tenants.get() == (None, empty_epoch + 1)

    tenants.load(["a"])
    epoch = tenants.epoch
    tenants.written([None])  # a point naming no agent is another agent
    assert tenants.get() == (None, epoch + 1)

    tenants.load(["a"])
    epoch = tenants.epoch
    tenants.reassigned()
    assert tenants.get() == (None, epoch + 1)

    tenants.load(["a", "b"])
    assert tenants.get()[0] is None
    tenants.load([])
    tenants.written(["a", "b"])  # the first batch already holds two agents
    assert tenants.get()[0] is None


def test_the_backend_reads_them_at_open_and_keeps_them_through_writes(tmp_path: Path) -> None:
    backend = EdgeBackend(tmp_path, 4)
    try:
        assert sole(backend)[0] is None  # empty
        first = point("alice")
        backend.upsert([first, point("alice")])
        assert sole(backend)[0] == "alice"
        backend.delete([first.id])
        assert sole(backend)[0] == "alice"
    finally:
        backend.close()

    backend = EdgeBackend(tmp_path, 4)  # read from the engine's tenant index at open
    try:
        assert sole(backend)[0] == "alice"
        epoch = sole(backend)[1]
        bob = point("bob")
        backend.upsert([bob])
        assert sole(backend) == (None, epoch + 1)
        backend.delete([bob.id])
        # the delete has the tenant index read afresh at the next read: sole again
        assert sole(backend) == ("alice", epoch + 3)  # both trackers counted again
    finally:
        backend.close()

    # a payload naming the tenant (either write) leaves the backend unsure: not sole
    writes = [lambda b, pid: b.set_payload(pid, {"agent_id": "alice"}),
              lambda b, pid: b.update_point(pid, {"agent_id": "carol"})]
    for write in writes:  # bob's only point is gone: the store is alice's alone at each open
        backend = EdgeBackend(tmp_path, 4)
        try:
            assert sole(backend)[0] == "alice"
            epoch = sole(backend)[1]
            write(backend, backend.scroll(None, limit=1)[0][0].id)
            assert sole(backend) == (None, epoch + 1)
        finally:
            backend.close()
    reopened = EdgeBackend(tmp_path, 4)
    try:
        # the store's one point is carol's now: read so at open
        assert sole(reopened)[0] == "carol"
    finally:
        reopened.close()


def test_a_delete_makes_the_store_sole_only_when_one_agent_is_left(tmp_path: Path) -> None:
    # the engine's exact facet keeps a deleted agent's value, with a count of 0, after the
    # agents holding points: "a" sorts first by name and must not hide "c"
    backend = EdgeBackend(tmp_path, 4)
    try:
        a1, a2, c = point("a"), point("a"), point("c")
        backend.upsert([a1, a2, point("b"), c, point("b")])
        backend.delete([a1.id, a2.id])
        assert sole(backend)[0] is None  # b and c hold points
        backend.delete([c.id])
        assert sole(backend)[0] == "b"
    finally:
        backend.close()
