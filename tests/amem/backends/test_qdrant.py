"""What only the qdrant-client backend has: the meta collection, schema checks, client ownership."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from amem.backends import QdrantServerBackend
from amem.backends.qdrant import META_POINT_ID
from amem.errors import BackendError, ConfigError, StoreLockedError

from ._data import DIM, point


def test_meta_lives_in_a_sibling_collection() -> None:
    client = QdrantClient(":memory:")
    backend = QdrantServerBackend(client, "notes", DIM)
    backend.write_meta({"embedder": "e5", "dim": DIM})
    assert client.collection_exists("notes__meta")
    records = client.scroll("notes__meta", limit=10)[0]
    assert [(str(r.id), r.payload) for r in records] == [(META_POINT_ID, {"embedder": "e5", "dim": DIM})]
    assert client.count("notes").count == 0
    backend.close()
    # the caller's client stays open: the backend did not create it
    assert client.collection_exists("notes")
    reopened = QdrantServerBackend(client, "notes", None)
    assert reopened.dim == DIM and reopened.read_meta() == {"embedder": "e5", "dim": DIM}
    client.close()


def test_schema_of_a_new_collection() -> None:
    client = QdrantClient(":memory:")
    QdrantServerBackend(client, "amem", DIM)
    params = client.get_collection("amem").config.params
    assert isinstance(params.vectors, dict)
    assert params.vectors["dense"].size == DIM and params.vectors["dense"].distance == qm.Distance.COSINE
    assert params.sparse_vectors is not None and params.sparse_vectors["bm25"].modifier == qm.Modifier.IDF
    client.close()


def test_a_collection_that_is_not_ours_is_refused() -> None:
    client = QdrantClient(":memory:")
    client.create_collection("plain", vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE))
    with pytest.raises(BackendError, match="not an amem collection"):
        QdrantServerBackend(client, "plain", DIM)
    client.close()


def test_config_errors() -> None:
    client = QdrantClient(":memory:")
    with pytest.raises(ConfigError, match="needs dim"):
        QdrantServerBackend(client, "fresh", None)
    with pytest.raises(ConfigError, match="collection"):
        QdrantServerBackend(client, "x__meta", DIM)
    with pytest.raises(ConfigError, match="dim"):
        QdrantServerBackend(client, "fresh", -3)
    with pytest.raises(ConfigError, match="http"):
        QdrantServerBackend.from_url("localhost:6333", dim=DIM)
    client.close()


def test_local_mode_on_disk_is_owned_by_one_client(tmp_path: Path) -> None:
    with QdrantServerBackend.local(tmp_path, dim=DIM) as owner:
        owner.upsert([point(0, np.eye(DIM)[0], {1: 1.0})])
        with pytest.raises(StoreLockedError) as err:
            QdrantServerBackend.local(tmp_path, dim=DIM)
        assert err.value.path == str(tmp_path)
        assert "AMEM_QDRANT_URL" in str(err.value)
        assert owner.count() == 1


def test_an_unreachable_server_is_a_backend_error_naming_the_url() -> None:
    with pytest.raises(BackendError, match="http://127.0.0.1:9"):
        QdrantServerBackend.from_url("http://127.0.0.1:9", dim=DIM, timeout=2)
