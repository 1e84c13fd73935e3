"""``open_backend``: the one place that turns config into a backend, refusing contradictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amem.backends import EdgeBackend, QdrantServerBackend, open_backend
from amem.errors import ConfigError

from ._data import DIM


def test_edge_on_a_path_and_in_a_temporary_directory(tmp_path: Path) -> None:
    with open_backend("edge", path=tmp_path, dim=DIM) as backend:
        assert isinstance(backend, EdgeBackend) and backend.path == tmp_path.resolve()
    temp = open_backend("edge", path=":memory:", dim=DIM)
    assert isinstance(temp, EdgeBackend) and temp.path != tmp_path
    temp.close()


def test_qdrant_local_in_memory_and_on_disk(tmp_path: Path) -> None:
    with open_backend("qdrant", path=":memory:", collection="c1", dim=DIM) as backend:
        assert isinstance(backend, QdrantServerBackend) and backend.collection == "c1"
    with open_backend("qdrant", path=tmp_path, dim=DIM) as backend:
        assert isinstance(backend, QdrantServerBackend) and backend.dim == DIM


@pytest.mark.parametrize(
    ("kind", "kwargs", "key"),
    [
        ("edge", {"path": "/tmp/x", "url": "http://q:6333"}, "url"),
        ("edge", {"path": "/tmp/x", "api_key": "k"}, "url"),
        ("edge", {"path": "/tmp/x", "collection": "other"}, "collection"),
        ("edge", {}, "path"),
        ("edge", {"path": ":memory:"}, "dim"),
        ("qdrant", {"path": "/tmp/x", "url": "http://q:6333"}, "url"),
        ("qdrant", {"path": ":memory:", "api_key": "k"}, "api_key"),
        ("qdrant", {}, "url"),
        ("qdrant", {"url": "q:6333"}, "url"),
        ("sqlite", {"path": "/tmp/x"}, "kind"),
    ],
)
def test_contradictions_are_config_errors(kind: str, kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        open_backend(kind, **kwargs)  # type: ignore[arg-type]
    assert err.value.key == key


def test_the_embedded_store_never_imports_qdrant_client() -> None:
    """qdrant-client costs 0.5-1.2 s to import and only the server backend needs it: every CLI
    command on the embedded default paid for it (issue 16: CLI commands took 2.5-5 s)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from amem import MemoryStore\n"
            "from amem.embed.hashing import HashingEmbedder\n"
            "from tools.cli import build_parser\n"
            "with MemoryStore(':memory:', embedder=HashingEmbedder()) as s:\n"
            "    s.add('a note', enrich=False); s.search('note')\n"
            "print(sorted(m for m in sys.modules if m.startswith('qdrant_client')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
