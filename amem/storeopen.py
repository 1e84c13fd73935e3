"""Opening a ``MemoryStore``: its arguments checked, the settings, embedder and LLM it is not
given resolved as the ``amem`` CLI resolves them, and the one process that may use the
embedded engine it opens."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .backends import EdgeBackend
from .config import AmemConfig, load_config
from .errors import StoreLockedError

if TYPE_CHECKING:
    from .backends.base import VectorBackend
    from .embed.base import Embedder
    from .kernel.llm import LLM


def check_arguments(path: object, *, config: object, embedder: object, backend: object,
                    llm: object) -> None:
    """Refuse contradictory or mistyped constructor arguments at once, naming the fix
    (``ValueError`` for a contradiction or a bad path, ``TypeError`` for a wrong type)."""
    if path is not None and backend is not None:
        raise ValueError("give either a path or an open backend, not both")
    if path is not None and (not isinstance(path, (str, os.PathLike)) or not str(path).strip()):
        raise ValueError(f"path must be a directory, ':memory:' or None (the configured "
                         f"store), not {path!r}")
    if config is not None and not isinstance(config, AmemConfig):
        raise TypeError(f"config must be an AmemConfig (amem.load_config() builds one), "
                        f"not {type(config).__name__}")
    if embedder is not None and not all(hasattr(embedder, name)
                                        for name in ("model_id", "dim", "embed")):
        # a name ("hashing") is a setting: config=load_config(embedder=...) or AMEM_EMBEDDER
        raise TypeError(f"embedder must be an Embedder (model_id, dim, embed), not "
                        f"{type(embedder).__name__}; to choose one by name, use "
                        "config=amem.load_config(overrides={'embedder': ...})")
    if llm is not None and not callable(getattr(llm, "complete_json", None)):
        # else the add succeeded with a warning and a traceback of offline enrichment
        raise TypeError(f"llm must be an LLM (at least complete_json(system, user, *, schema, "
                        f"name)), not {type(llm).__name__}")


def settings_from_environment(agent_id: str | None) -> tuple[AmemConfig, str | None]:
    """The settings and agent of a store opened without ``config``."""
    # Resolved as the CLI resolves it (AMEM_CONFIG, AMEM_HOME, AMEM_EMBEDDER, ...,
    # AMEM_AGENT), so a script and `amem` open the same store; config= reads no env.
    config = load_config(os.environ.get("AMEM_CONFIG") or None, env=os.environ)
    if agent_id is None:
        agent_id = os.environ.get("AMEM_AGENT") or None
    return config, agent_id


def configured_embedder(config: AmemConfig) -> "Embedder":
    """The embedder the settings name, for a store given none."""
    from .embed import make_embedder

    # The converted model (e5-small) lives with this store's home, not the environment's.
    return make_embedder(config.embedder, threads=config.embed_threads,
                         cache_dir=Path(config.home) / "models")


def configured_llm(config: AmemConfig) -> "LLM | None":
    """An LLM client when ``llm_base_url`` is configured; None means offline enrichment."""
    from .llm.config import LLMConfig

    endpoint = LLMConfig.from_amem(config)
    if endpoint is None:
        return None
    # the client (and httpx, ~60 ms of every CLI command's start) only when one is configured
    from .llm.client import LLMClient

    return LLMClient(endpoint)


class OpeningProcess:
    """The process that opened the store: a process forked after the open may not use the
    embedded engine (a Qdrant server's client it may)."""

    def __init__(self, location: str) -> None:
        self.pid = os.getpid()
        self._location = location

    def is_elsewhere(self, backend: "VectorBackend") -> bool:
        """Whether this is a forked child and the engine the parent's embedded one."""
        return self.pid != os.getpid() and isinstance(backend, EdgeBackend)

    def check(self, backend: "VectorBackend") -> None:
        """Refuse a forked child's use of the parent's embedded engine."""
        if self.is_elsewhere(backend):
            # A forked child wrote through the parent's engine: the parent never saw the note
            # and the store's BM25 statistics disagreed with the engine at the next open.
            raise StoreLockedError(
                f"the embedded amem store at {self._location} is owned by process {self.pid}, "
                "which opened it before forking this one: open the store in one process only "
                "(close it in the parent first, or send the work to the parent)",
                path=str(self._location), holder_pid=self.pid)


__all__ = ["OpeningProcess", "check_arguments", "configured_embedder", "configured_llm",
           "settings_from_environment"]
