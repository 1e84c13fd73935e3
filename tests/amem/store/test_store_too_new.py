"""A store a newer amem upgraded is refused at open, by name, and left as it is.

Opening the stores of five older revisions with each other's code showed what a silent open
costs: a note an older amem wrote into an upgraded store stayed under its old point id (search
found it, get/update/delete said "no note") and without the subject keys the filter compares.
The format number (``meta.json``'s ``schema``) lets this code refuse what it cannot keep whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.backends.edge import EdgeBackend
from amem.embed.hashing import HashingEmbedder
from amem.errors import BackendError, StoreTooNewError
from amem.index import SCHEMA_VERSION


def test_a_store_of_a_newer_format_is_refused_and_left_intact(tmp_path: Path) -> None:
    path, config, embedder = tmp_path / "store", load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder) as store:
        store.add("Prefers green tea", subjects=["Alice"], id="a", enrich=False)
    with EdgeBackend(path, 64) as engine:  # what a later amem records when it upgrades it
        meta = engine.read_meta()
        assert meta["schema"] == SCHEMA_VERSION
        engine.write_meta({**meta, "schema": SCHEMA_VERSION + 1})
    with pytest.raises(StoreTooNewError, match="newer amem") as caught:
        MemoryStore(path, config=config, embedder=embedder)
    assert (caught.value.schema, caught.value.supported) == (SCHEMA_VERSION + 1, SCHEMA_VERSION)
    assert isinstance(caught.value, BackendError) and caught.value.code == "schema_too_new"
    with EdgeBackend(path, 64) as engine:  # refused before any upgrade wrote to it
        assert engine.read_meta() == {**meta, "schema": SCHEMA_VERSION + 1}
        assert engine.count(None) == 1


def test_a_store_of_this_format_or_an_older_one_opens(tmp_path: Path) -> None:
    path, config, embedder = tmp_path / "store", load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder) as store:
        store.add("Prefers green tea", id="a", enrich=False)
    with EdgeBackend(path, 64) as engine:  # the oldest stores record no format at all
        meta = engine.read_meta()
        engine.write_meta({k: v for k, v in meta.items() if k != "schema"})
    with MemoryStore(path, config=config, embedder=embedder) as store:
        assert store.get("a").content == "Prefers green tea"
