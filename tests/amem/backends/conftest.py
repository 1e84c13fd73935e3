"""Fixtures that run every backend test on every engine.

``backend`` is parametrized over the embedded engine (a temporary directory), qdrant-client's
local mode, and a real Qdrant server when ``AMEM_TEST_QDRANT_URL`` is set (skipped otherwise).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from amem.backends import EdgeBackend, QdrantServerBackend
from amem.backends.base import VectorBackend

from ._data import DIM

KINDS = ("edge", "qdrant-local", "qdrant-server")

Factory = Callable[..., VectorBackend]


@pytest.fixture(scope="session")
def qdrant_test_url() -> str | None:
    """The test server URL, read once before any per-test fixture clears the environment."""
    return os.environ.get("AMEM_TEST_QDRANT_URL") or None


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest, qdrant_test_url: str | None) -> str:
    """The engine under test."""
    if request.param == "qdrant-server" and qdrant_test_url is None:
        pytest.skip("set AMEM_TEST_QDRANT_URL to run the backend suite against a Qdrant server")
    return str(request.param)


@pytest.fixture
def make_backend(kind: str, tmp_path: Path, qdrant_test_url: str | None) -> Iterator[Factory]:
    """Build backends of ``kind``; a second call reopens the same store (edge, local on disk, server).

    qdrant-local is in memory unless ``persistent=True`` asks for local mode on disk.

    Everything made is closed (and server collections dropped) at teardown.
    """
    made: list[VectorBackend] = []
    collection = f"amem_test_{uuid.uuid4().hex[:12]}"

    def make(dim: int | None = DIM, persistent: bool = False) -> VectorBackend:
        backend: VectorBackend
        if kind == "edge":
            backend = EdgeBackend(tmp_path / "store", dim)
        elif kind == "qdrant-local":
            location = tmp_path / "local" if persistent else ":memory:"
            backend = QdrantServerBackend.local(location, collection, dim)
        else:
            assert qdrant_test_url is not None
            backend = QdrantServerBackend.from_url(qdrant_test_url, collection=collection, dim=dim)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    if kind == "qdrant-server":
        assert qdrant_test_url is not None
        client = QdrantClient(url=qdrant_test_url)
        for name in (collection, collection + "__meta"):
            client.delete_collection(name)
        client.close()


@pytest.fixture(scope="module", params=KINDS)
def shared_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, qdrant_test_url: str | None,
) -> Iterator[VectorBackend]:
    """One empty backend per kind for a whole module: for read-only tests over fixed data."""
    collection = f"amem_test_{uuid.uuid4().hex[:12]}"
    backend: VectorBackend
    if request.param == "edge":
        backend = EdgeBackend(tmp_path_factory.mktemp("shared-edge"), DIM)
    elif request.param == "qdrant-local":
        backend = QdrantServerBackend.local(":memory:", collection, DIM)
    elif qdrant_test_url is None:
        pytest.skip("set AMEM_TEST_QDRANT_URL to run the backend suite against a Qdrant server")
    else:
        backend = QdrantServerBackend.from_url(qdrant_test_url, collection=collection, dim=DIM)
    yield backend
    backend.close()
    if request.param == "qdrant-server":
        client = QdrantClient(url=qdrant_test_url)
        for name in (collection, collection + "__meta"):
            client.delete_collection(name)
        client.close()


@pytest.fixture
def backend(make_backend: Factory) -> VectorBackend:
    """One fresh, empty backend of the parametrized kind."""
    return make_backend()
