"""Vector backends: the embedded qdrant-edge engine and a Qdrant server through qdrant-client."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from amem.backends.base import VectorBackend
from amem.backends.edge import SEGMENT_KB, EdgeBackend
from amem.errors import ConfigError

if TYPE_CHECKING:
    from amem.backends.qdrant import QdrantServerBackend
    from amem.config import AmemConfig

__all__ = ["EdgeBackend", "QdrantServerBackend", "VectorBackend", "open_backend", "open_for_store"]

#: the path of a throwaway embedded store
MEMORY = ":memory:"


def __getattr__(name: str) -> Any:
    # qdrant-client takes ~0.5-1 s to import; only the server backend needs it, so the
    # embedded default (and every CLI start) does not pay for it.
    if name == "QdrantServerBackend":
        from amem.backends.qdrant import QdrantServerBackend

        return QdrantServerBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_backend(
    kind: Literal["edge", "qdrant"],
    *,
    path: str | Path | None = None,
    url: str | None = None,
    api_key: str | None = None,
    collection: str = "amem",
    dim: int | None = None,
    segment_kb: int | None = None,
    search_threads: int = 0,
) -> "EdgeBackend | QdrantServerBackend":
    """Open (or create) a backend.

    Args:
        kind: ``"edge"`` for the embedded engine (needs ``path``; ``":memory:"`` gives a
            temporary store), ``"qdrant"`` for a server at ``url`` or qdrant-client local mode
            at ``path`` (``":memory:"`` or a directory).
        path: The store directory (edge, or qdrant local mode).
        url: The Qdrant server URL (qdrant only).
        api_key: The server API key (qdrant with ``url`` only).
        collection: The collection name (qdrant only; edge has one shard per directory).
        dim: The dense vector size; required when the store is created.
        segment_kb: edge only: the largest segment a build makes, in KB of float vectors
            (``EdgeBackend``; None: its default).
        search_threads: edge only: the engine's search threads (0: ``auto_search_threads``).

    Raises:
        ConfigError: an unknown kind or contradictory arguments.
    """
    if kind == "edge":
        if url is not None or api_key is not None:
            raise ConfigError("the edge backend is embedded: url and api_key do not apply", key="url")
        if collection != "amem":
            raise ConfigError("the edge backend has one collection per directory: collection does not apply",
                              key="collection")
        if path is None:
            raise ConfigError("the edge backend needs a path (or ':memory:' for a temporary store)", key="path")
        if str(path) == ":memory:":
            if dim is None:
                raise ConfigError("a temporary edge store needs dim", key="dim")
            return EdgeBackend.temporary(dim, search_threads=search_threads)
        return EdgeBackend(path, dim, segment_kb=SEGMENT_KB if segment_kb is None else segment_kb,
                           search_threads=search_threads)
    if kind == "qdrant":
        from amem.backends.qdrant import QdrantServerBackend

        if search_threads:
            raise ConfigError("search_threads sets the embedded engine's threads: a Qdrant "
                              "server or local mode sizes its own", key="search_threads")

        if url is not None and path is not None:
            raise ConfigError("give either url (a Qdrant server) or path (local mode), not both", key="url")
        if url is not None:
            return QdrantServerBackend.from_url(url, api_key, collection, dim)
        if api_key is not None:
            raise ConfigError("api_key needs a url", key="api_key")
        if path is None:
            raise ConfigError("the qdrant backend needs url (a server) or path (local mode)", key="url")
        return QdrantServerBackend.local(path, collection, dim)
    raise ConfigError(f"unknown backend kind {kind!r} (expected 'edge' or 'qdrant')", key="kind")


def open_for_store(config: "AmemConfig", path: str | Path | None, dim: int
                   ) -> tuple[VectorBackend, str, str]:
    """The engine a ``MemoryStore`` opens, where it lives, and its kind.

    A Qdrant server when the config names one and no ``path`` is given; else the embedded
    engine at ``path`` (``":memory:"``: a throwaway one), or at the config's store path.
    """
    if path is None and config.backend == "qdrant":
        assert config.qdrant_url is not None  # checked by the config
        return (open_backend("qdrant", url=config.qdrant_url, api_key=config.qdrant_api_key,
                             collection=config.collection, dim=dim), config.qdrant_url, "qdrant")
    where = MEMORY if str(path) == MEMORY else (
        str(Path(path).expanduser()) if path is not None else str(config.store_path))
    if where != MEMORY:  # a reembed killed between its two renames left no store here
        from ..storeswap import finish_interrupted_swap

        finish_interrupted_swap(Path(where))
    return (open_backend("edge", path=where, dim=dim, segment_kb=config.segment_mb * 1024,
                         search_threads=config.search_threads), where, "edge")
