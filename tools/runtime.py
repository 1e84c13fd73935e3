"""The composition root: one ``Runtime`` builds what a process works with, from its settings.

The CLI, ``amem serve`` (the MCP server and its host routes) and ``amem scheduler`` all open
their stores here, and nowhere else::

    Settings ──► Runtime ──► embedder   (one, lazy: nothing loads until a text is encoded)
                         ├─► llm        (one LLMClient, or None without llm_base_url)
                         ├─► memory     (MemoryStore: the notes, opened on first use)
                         └─► lcm        (LcmStore: the conversations, opened on first use)

The two stores share the embedder (e5 loads once) and the LLM client (one circuit breaker per
endpoint: the note store's enrichment and lcm's summaries stop calling a dead endpoint
together). ``close()`` (or leaving ``with``) closes whatever was opened.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Mapping

from amem.errors import ConfigError, EmbedderMismatchError
from amem.kernel.files import private_dir
from lcm.pg.url import is_postgres_url

from .settings import Settings, load_settings

if TYPE_CHECKING:
    from amem import MemoryStore
    from amem.config import AmemConfig
    from amem.embed.base import Embedder
    from amem.llm import CircuitBreaker, LLMClient
    from lcm import LcmConfig, LcmStore

log = logging.getLogger(__name__)

__all__ = ["RoleLLM", "Runtime", "make_embedder", "stored_model_id"]

def make_embedder(name: str, *, threads: int = 1, cache_dir: Path | None = None) -> Embedder:
    """The embedder called ``name`` (``amem.embed.make_lazy_embedder``: every name amem knows,
    ``hashing-DIM`` included; a bad name is a ``ConfigError`` naming ``embedder``).

    Lazy: list, get, status and doctor never encode a text and skip loading the model.
    ``cache_dir`` is where a converted model lives (e5-small: ``<home>/models``), so a
    ``--home`` keeps its model with its store instead of under the environment's home.
    """
    from amem.embed import make_lazy_embedder

    return make_lazy_embedder(name, threads=threads, cache_dir=cache_dir)


def stored_model_id(config: AmemConfig) -> str | None:
    """The ``model_id`` of the embedder that wrote the embedded store of ``config`` (its
    ``meta.json``); None for a server backend, no store yet, or a file that names none (a
    damaged one is reported when the store opens)."""
    if config.backend != "edge":
        return None
    from amem.backends._jsonfile import read_object
    from amem.backends.edge import META_FILE
    from amem.errors import BackendError

    try:
        stored = read_object(config.store_path / META_FILE).get("embedder")
    except (BackendError, OSError):
        return None
    return stored if isinstance(stored, str) else None


class RoleLLM:
    """The shared client as one lcm role sees it: that role's model and deadline on every call.

    ``summaryModel`` / ``summaryTimeoutMs`` for summaries, ``expansionModel`` /
    ``delegationTimeoutMs`` for ``lcm_expand_query``; an empty model means ``llm_model``.
    """

    def __init__(self, client: LLMClient, model: str, deadline_s: float) -> None:
        self._client = client
        self._model = model.strip()
        self._deadline_s = deadline_s

    @property
    def model(self) -> str:
        return self._model or str(self._client.model)

    @property
    def breaker(self) -> CircuitBreaker:
        """The client's breaker, shared with the note store (lcm's summarizer reads it)."""
        return self._client.breaker

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        return self._client.complete(system, user, max_tokens=max_tokens, model=self._model or None,
                                     deadline=self._deadline_s)

    def complete_within(self, system: str, user: str, *, max_tokens: int | None, seconds: float) -> str:
        """One call ended at the caller's deadline (``lcm_expand_query``'s ``timeoutMs``), at most
        the role's own: the HTTP request stops then. A caller's short deadline says nothing about
        the endpoint, so passing it does not open the shared circuit."""
        return self._client.complete(system, user, max_tokens=max_tokens, model=self._model or None,
                                     deadline=min(seconds, self._deadline_s), trip_on_deadline=False)


class Runtime:
    """The stores and the LLM client of one process, built from one :class:`Settings`.

    Everything is built on first use and once: ``memory`` opens the note store (embedded under
    ``home``, or a Qdrant server), ``lcm`` the conversation store. ``close()`` closes what was
    opened (the conversation store first); a closed runtime opens nothing again.

    Args:
        settings: Every config section, resolved once (``tools.settings.load_settings``).
        agent_id: Who the stores act as; None means the config's ``agent_id``.
        env: The variables only the tools read (``AMEM_LCM_URL``, tool description overrides,
            ``AMEM_SERVER_TOKEN``); the runtime never reads ``os.environ`` itself.
        embedder: The embedder of both stores instead of the configured one.

    Raises:
        ConfigError: from ``memory``/``lcm``/``embedder`` when the settings cannot build them
            (an unknown embedder, two names for the conversation store).
    """

    def __init__(self, settings: Settings, *, agent_id: str | None = None,
                 env: Mapping[str, str] | None = None, embedder: Embedder | None = None) -> None:
        self._settings = settings
        self._agent_id = agent_id or settings.amem.agent_id
        self._env: Mapping[str, str] = MappingProxyType(dict(env or {}))
        self._embedder = embedder
        self._llm: LLMClient | None = None
        self._llm_built = False
        self._memory: MemoryStore | None = None
        self._lcm: LcmStore | None = None
        self._closed = False

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, *, config_path: str | Path | None = None,
             overrides: Mapping[str, Any] | None = None, agent: str | None = None) -> Runtime:
        """The process's runtime: defaults < TOML (``config_path`` or ``AMEM_CONFIG``) < env
        < ``overrides`` (the command line's flags; None values are unset flags), acting as
        ``agent`` (else ``AMEM_AGENT``, else the config's). ``env`` None is ``os.environ``."""
        env = dict(os.environ if env is None else env)
        settings = load_settings(Path(config_path) if config_path else None, env=env,
                                 **dict(overrides or {}))
        return cls(settings, agent_id=agent or env.get("AMEM_AGENT") or None, env=env)

    # Read-only: the stores were (or will be) built from these; changing them afterwards would
    # leave a runtime whose stores disagree with its settings.
    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def agent_id(self) -> str:
        """Who the stores act as."""
        return self._agent_id

    @property
    def env(self) -> Mapping[str, str]:
        """The environment the tools read (a read-only copy)."""
        return self._env

    @property
    def lcm_path(self) -> Path:
        """Where the lcm database lives unless ``LCM_DATABASE_PATH`` says otherwise."""
        return Path(self.settings.amem.home) / "lcm.db"

    # ------------------------------------------------------------------ shared parts

    @property
    def embedder(self) -> Embedder:
        """The one embedder of both stores (lazy: nothing loads until a text is encoded)."""
        if self._embedder is None:
            cfg = self.settings.amem
            self._embedder = make_embedder(self.embedder_name, threads=cfg.embed_threads,
                                           cache_dir=Path(cfg.home) / "models")
        return self._embedder

    @property
    def embedder_name(self) -> str:
        """The embedder the settings name; when they name none, the one that wrote the store.

        ``amem reembed --to hashing`` rebuilds a store with another embedder; a later
        ``amem search`` without ``--embedder`` or ``AMEM_EMBEDDER`` then opens it with that
        embedder, as the store's ``meta.json`` records it, instead of refusing it for the
        default's dimension.
        """
        cfg = self.settings.amem
        if self.settings.embedder_chosen:
            return cfg.embedder
        stored, where = stored_model_id(cfg), str(cfg.store_path)
        if stored is None:
            # A home holding conversations only (a host feeding `amem lcm ingest`): the
            # conversation store's recorded embedder, or every read without --embedder would
            # switch it to the default and owe a re-embed of every message.
            from lcm.semantic import recorded_model

            where = self.lcm_database() or ""
            stored = recorded_model(where) if where else None
        if stored is None:
            return cfg.embedder
        from amem.embed import embedder_name

        name = embedder_name(stored)
        if name is not None and name != cfg.embedder:
            log.info("opening the store at %s with %s, the embedder that wrote it (no embedder "
                     "is configured)", where, name)
            return name
        return cfg.embedder

    def lcm_database(self) -> str | None:
        """Where the conversation store lives (a file or a ``postgresql://`` URL), or None while
        its settings contradict each other (the error is raised when the store is opened)."""
        try:
            return self._lcm_settings().database_path
        except ConfigError:
            return None

    @property
    def llm(self) -> LLMClient | None:
        """The one LLM client of both stores, or None (``llm_base_url`` unset)."""
        if not self._llm_built:
            if self.settings.llm is not None:
                from amem.llm import LLMClient

                self._llm = LLMClient(self.settings.llm)
            self._llm_built = True
        return self._llm

    # ------------------------------------------------------------------ stores

    @property
    def memory(self) -> MemoryStore:
        """The note store (opened on first use).

        Raises:
            StoreLockedError: another process (a running ``amem serve``) holds the store.
        """
        if self._memory is None:
            self._check_open()
            from amem import MemoryStore

            cfg = self.settings.amem
            if cfg.backend == "edge":
                private_dir(Path(cfg.home).expanduser())  # 0700 (amem.kernel.files)
            try:
                self._memory = MemoryStore(None, config=cfg, embedder=self.embedder,
                                           agent_id=self.agent_id, llm=self.llm)
            except EmbedderMismatchError as exc:
                raise self._mismatch(exc) from None
        return self._memory

    def _mismatch(self, exc: EmbedderMismatchError) -> EmbedderMismatchError:
        """The store refused the embedder: say which one wrote it and how to choose it."""
        cfg = self.settings.amem
        stored = stored_model_id(cfg) if cfg.backend == "edge" else None
        if stored is None:
            return exc
        from amem.embed import embedder_name

        name = embedder_name(stored)
        how = (f"open it with --embedder {name} (or AMEM_EMBEDDER={name}, or embedder = "
               f"\"{name}\" in the config file)" if name is not None else
               "open it with the embedder that wrote it")
        return EmbedderMismatchError(
            f"the store at {cfg.store_path} was written by {stored!r}, not by the embedder "
            f"{self.embedder_name!r} chosen here: {how}, or rebuild its vectors with `amem "
            f"reembed --to {self.embedder_name}`", stored=stored, given=self.embedder.model_id)

    @property
    def lcm(self) -> LcmStore:
        """The conversation store (opened on first use).

        Raises:
            ConfigError: ``AMEM_LCM_URL`` and ``LCM_DATABASE_PATH`` name different stores.
        """
        if self._lcm is None:
            self._check_open()
            self._lcm = self._build_lcm()
        return self._lcm

    def switch_lcm_embedder(self) -> LcmStore:
        """Open the conversation store with this runtime's embedder recorded as its own, though
        another made its vectors (``LcmStore(switch_embedder=True)``): every message and summary
        is embedded again (``amem lcm embed --switch-embedder``). Without it such a store keeps
        its embedder and refuses semantic recall with the other one.

        Raises:
            RuntimeError: the conversation store is already open (as it was).
        """
        if self._lcm is not None:
            raise RuntimeError("the conversation store is already open; switch its embedder before using it")
        self._check_open()
        self._lcm = self._build_lcm(switch_embedder=True)
        return self._lcm

    def _lcm_settings(self) -> "LcmConfig":
        """The conversation store's settings with where it lives resolved.

        Raises:
            ConfigError: ``AMEM_LCM_URL`` and ``LCM_DATABASE_PATH`` name different stores.
        """
        from lcm.config import with_location
        from lcm.errors import LcmConfigError

        try:  # one rule with LcmStore() (lcm.config.with_location)
            return with_location(self.settings.lcm, self.env, Path(self.settings.amem.home))
        except LcmConfigError as exc:
            raise ConfigError(str(exc), key=exc.key) from None

    def _build_lcm(self, *, switch_embedder: bool = False) -> LcmStore:
        from lcm import LcmStore

        lcm_cfg = self._lcm_settings()
        # a postgresql:// URL (LCM_DATABASE_PATH or [lcm] databasePath) names a server, not a file
        if not is_postgres_url(lcm_cfg.database_path):
            private_dir(Path(lcm_cfg.database_path).expanduser().parent)
        try:  # semantic recall uses the note store's embedder; without one lcm still works
            embedder: Embedder | None = self.embedder
        except ConfigError as exc:
            log.warning("lcm semantic recall disabled: %s", exc)
            embedder = None
        client = self.llm
        if client is None:
            return LcmStore(lcm_cfg.database_path, config=lcm_cfg, embedder=embedder,
                            switch_embedder=switch_embedder)
        return LcmStore(lcm_cfg.database_path, config=lcm_cfg, embedder=embedder,
                        switch_embedder=switch_embedder,
                        llm=RoleLLM(client, lcm_cfg.summary_model, lcm_cfg.summary_timeout_ms / 1000),
                        expansion_llm=RoleLLM(client, lcm_cfg.expansion_model,
                                              lcm_cfg.delegation_timeout_ms / 1000))

    # ------------------------------------------------------------------ lifetime

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Runtime is closed; build a new one to open the stores again")

    def close(self) -> None:
        """Close the stores that were opened (lcm first, then the notes). Idempotent."""
        self._closed = True
        lcm, self._lcm = self._lcm, None
        memory, self._memory = self._memory, None
        try:
            if lcm is not None:
                lcm.close()
        finally:
            if memory is not None:
                memory.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

