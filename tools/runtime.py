"""Opening the stores for the CLI and the server: config, embedder, agent, lcm."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from amem.config import AmemConfig, load_config
from amem.errors import ConfigError

log = logging.getLogger(__name__)

#: embedder names the tools resolve themselves (the rest go to ``amem.embed.make_embedder``)
HASHING = "hashing"


@dataclass(frozen=True)
class Settings:
    """What the command line resolved before any store is opened."""

    config: AmemConfig
    agent_id: str
    env: Mapping[str, str]
    config_path: str | None = None
    #: what the stores opened with these settings share (the one LLM client); see shared_llm
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def lcm_path(self) -> Path:
        """Where the lcm database lives unless ``LCM_DATABASE_PATH`` says otherwise."""
        return Path(self.config.home) / "lcm.db"


def load_settings(env: Mapping[str, str] | None = None, *, config_path: str | None = None,
                  overrides: Mapping[str, Any] | None = None, agent: str | None = None) -> Settings:
    """Defaults < TOML (``--config`` or ``AMEM_CONFIG``) < ``AMEM_*`` env < the CLI's flags."""
    env = dict(os.environ if env is None else env)
    path = config_path or env.get("AMEM_CONFIG") or None
    cfg = load_config(path, env=env, overrides={k: v for k, v in (overrides or {}).items()
                                                if v is not None})
    agent_id = agent or env.get("AMEM_AGENT") or cfg.agent_id
    return Settings(config=cfg, agent_id=agent_id, env=env, config_path=path)


def make_embedder(name: str, *, threads: int = 1, cache_dir: Path | None = None) -> Any:
    """The embedder called ``name``: ``hashing`` (or ``hashing-DIM``) here, others by amem.

    ``cache_dir`` is where a converted model lives (e5-small: ``<home>/models``), so a
    ``--home`` keeps its model with its store instead of under the environment's home.
    """
    if name == HASHING or name.startswith(HASHING + "-"):
        from amem.embed.hashing import HashingEmbedder

        dim = name.partition("-")[2]
        if dim and not dim.isdigit():
            raise ConfigError(f"embedder {name!r}: write hashing-<dim>, e.g. hashing-256",
                              key="embedder")
        return HashingEmbedder(int(dim)) if dim else HashingEmbedder()
    try:
        from amem.embed import make_lazy_embedder
    except ImportError as exc:
        raise ConfigError(f"embedder {name!r} cannot be built: amem.embed.make_embedder is not "
                          f"available ({exc})", key="embedder") from None
    # Lazy: list, get, status and doctor never encode a text and skip loading the model.
    return make_lazy_embedder(name, threads=threads, cache_dir=cache_dir)


def shared_embedder(settings: Settings) -> Any:
    """The one embedder of every store opened with ``settings`` (lazy: nothing loads until a text
    is encoded). The note store and lcm's semantic recall share it, so e5 loads once."""
    if "embedder" not in settings.shared:
        cfg = settings.config
        settings.shared["embedder"] = make_embedder(cfg.embedder, threads=cfg.embed_threads,
                                                    cache_dir=Path(cfg.home) / "models")
    return settings.shared["embedder"]


def shared_llm(settings: Settings) -> Any:
    """The one LLM client of every store opened with ``settings``, or None (``llm_base_url`` unset).

    One client means one circuit breaker for the endpoint: the note store's enrichment and
    lcm's summaries and expansions all stop calling a dead endpoint together.
    """
    if "llm" not in settings.shared:
        cfg = settings.config
        client = None
        if cfg.llm_base_url:
            from amem.llm import PLACEHOLDER_API_KEY, LLMClient, LLMConfig

            client = LLMClient(LLMConfig(
                base_url=cfg.llm_base_url, model=cfg.llm_model, api_key=cfg.llm_api_key or PLACEHOLDER_API_KEY,
                connect_timeout=cfg.llm_connect_timeout, read_timeout=cfg.llm_read_timeout,
                deadline=cfg.llm_deadline_s, max_reply_bytes=cfg.llm_max_reply_bytes))
        settings.shared["llm"] = client
    return settings.shared["llm"]


class RoleLLM:
    """The shared client as one lcm role sees it: that role's model and deadline on every call.

    ``summaryModel`` / ``summaryTimeoutMs`` for summaries, ``expansionModel`` /
    ``delegationTimeoutMs`` for ``lcm_expand_query``; an empty model means ``llm_model``.
    """

    def __init__(self, client: Any, model: str, deadline_s: float) -> None:
        self._client = client
        self._model = model.strip()
        self._deadline_s = deadline_s

    @property
    def model(self) -> str:
        return self._model or str(self._client.model)

    @property
    def breaker(self) -> Any:
        """The client's breaker, shared with the note store (lcm's summarizer reads it)."""
        return self._client.breaker

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        reply: str = self._client.complete(system, user, max_tokens=max_tokens, model=self._model or None,
                                           deadline=self._deadline_s)
        return reply

    def complete_within(self, system: str, user: str, *, max_tokens: int | None, seconds: float) -> str:
        """One call ended at the caller's deadline (``lcm_expand_query``'s ``timeoutMs``), at most
        the role's own: the HTTP request stops then. A caller's short deadline says nothing about
        the endpoint, so passing it does not open the shared circuit."""
        reply: str = self._client.complete(system, user, max_tokens=max_tokens, model=self._model or None,
                                           deadline=min(seconds, self._deadline_s), trip_on_deadline=False)
        return reply


def open_memory(settings: Settings, *, embedder: Any = None) -> Any:
    """The note store the settings point at (embedded under ``home``, or a Qdrant server)."""
    from amem import MemoryStore

    cfg = settings.config
    if embedder is None:
        embedder = shared_embedder(settings)
    if cfg.backend == "edge":
        Path(cfg.home).mkdir(parents=True, exist_ok=True)
    return MemoryStore(None, config=cfg, embedder=embedder, agent_id=settings.agent_id,
                       llm=shared_llm(settings))


def open_lcm(settings: Settings, *, required: bool = False) -> Any:
    """The lcm conversation store, or ``None`` (with a logged warning) when it cannot be built.

    ``required`` turns the warning into the error itself (the ``amem lcm ...`` commands).
    """
    try:
        from lcm import LcmStore
        from lcm.config import load_config as lcm_load_config
    except ImportError as exc:
        if required:
            raise ConfigError(f"the conversation store (lcm) is not available: {exc}",
                              key="lcm") from None
        log.warning("lcm tools disabled: the lcm package is not available (%s)", exc)
        return None
    lcm_cfg = lcm_load_config(_lcm_table_path(settings.config_path), env=settings.env)
    url = settings.env.get("AMEM_LCM_URL", "").strip()
    if url:
        # amem's own name for where conversations live (a postgresql:// URL to share them
        # between hosts, or a file); lossless-claw's LCM_DATABASE_PATH may say the same, never
        # something else, or one of the two would silently lose.
        if lcm_cfg.database_path and lcm_cfg.database_path != url:
            raise ConfigError("AMEM_LCM_URL and LCM_DATABASE_PATH / [lcm] databasePath name "
                              "different conversation stores; set one of them",
                              key="AMEM_LCM_URL")
        lcm_cfg = _with(lcm_cfg, database_path=url)
    if not getattr(lcm_cfg, "database_path", ""):
        lcm_cfg = _with(lcm_cfg, database_path=str(settings.lcm_path))
    # a postgresql:// URL (LCM_DATABASE_PATH or [lcm] databasePath) names a server, not a file
    if not lcm_cfg.database_path.startswith(("postgresql://", "postgres://")):
        Path(lcm_cfg.database_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    client = shared_llm(settings)
    try:  # semantic recall uses the note store's embedder; without one lcm still works
        embedder = shared_embedder(settings)
    except ConfigError as exc:
        log.warning("lcm semantic recall disabled: %s", exc)
        embedder = None
    if client is None:
        return LcmStore(lcm_cfg.database_path, config=lcm_cfg, embedder=embedder)
    return LcmStore(lcm_cfg.database_path, config=lcm_cfg, embedder=embedder,
                    llm=RoleLLM(client, lcm_cfg.summary_model, lcm_cfg.summary_timeout_ms / 1000),
                    expansion_llm=RoleLLM(client, lcm_cfg.expansion_model, lcm_cfg.delegation_timeout_ms / 1000))


def _lcm_table_path(path: str | None) -> str | None:
    """The config file for lcm only if it has an ``[lcm]`` table (its top level is amem's)."""
    if path is None:
        return None
    import tomllib

    try:
        doc = tomllib.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None  # amem's own loader already reported the problem
    return path if isinstance(doc.get("lcm"), dict) else None


def _with(cfg: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(cfg, **changes)
