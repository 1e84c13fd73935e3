"""LcmConfig: the lossless-claw configuration keys that apply to lcm, and load_config().

Precedence is defaults < TOML < ``LCM_*`` environment < explicit overrides. Keys are accepted
in lossless-claw's camelCase (``freshTailCount``) or as snake_case attribute names; nested
``independentLogFile`` keys may be given as a table or as dotted names. Library code never
reads ``os.environ``: the caller passes the environment mapping in.

Keys of the lossless-claw reference that have no meaning here (host wiring, provider routing,
deprecated cache knobs) are accepted so a ported config loads, but they are reported in
``LcmConfig.ignored_keys`` and logged once; any other unknown key is an error.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from amem.kernel.home import configured_home
from amem.kernel.settings import Section, read_toml, setting, warn_once
from lcm.errors import LcmConfigError

log = logging.getLogger(__name__)

__all__ = ["LcmConfig", "ThresholdOverride", "load_config", "ENV_NAMES", "environment_config", "with_location"]


@dataclass(frozen=True)
class ThresholdOverride:
    """One ``contextThresholdOverrides`` rule (matching: ``lcm.compaction.resolve_params``).

    ``model`` and the context-window bounds match what the host passes to ``assemble`` /
    ``compact`` (``model=``, ``context_window=``); a rule needing one the host did not pass
    does not match.
    """

    context_threshold: float = setting(above=0, at_most=1)
    name: str = ""
    # the rule's nested [match] table
    session_pattern: str | None = setting(None, key="match.sessionPattern")
    model: str | None = setting(None, key="match.model")
    model_context_window_min: int | None = setting(None, key="match.modelContextWindowMin", at_least=0)
    model_context_window_max: int | None = setting(None, key="match.modelContextWindowMax", at_least=0)
    fresh_tail_count: int | None = setting(None, at_least=1)
    leaf_chunk_tokens: int | None = setting(None, at_least=1)

    def __post_init__(self) -> None:
        _RULE.validate(self)


#: one rule is a section of its own, in a list: camelCase keys, no environment variables
_RULE = Section(ThresholdOverride, error=LcmConfigError, env_prefix=None, style="camel")


@dataclass(frozen=True)
class LcmConfig:
    """Every tunable of lcm. Defaults follow the lossless-claw configuration reference.

    Keys are the camelCase of the field names and variables ``LCM_`` + the field name, unless
    the field says otherwise (``amem.kernel.settings``).
    """

    enabled: bool = True
    database_path: str = setting("", aliases=("dbPath",))
    large_files_dir: str = ""
    ignore_session_patterns: tuple[str, ...] = ()
    stateless_session_patterns: tuple[str, ...] = ()
    skip_stateless_sessions: bool = True
    timezone: str = "UTC"
    proactive_threshold_compaction_mode: Literal["deferred", "inline"] = "deferred"
    context_threshold: float = setting(0.75, above=0, at_most=1)
    context_threshold_overrides: tuple[ThresholdOverride, ...] = setting(
        (), env=None, parse=lambda raw, source: _parse_overrides(raw, source))
    fresh_tail_count: int = setting(64, at_least=1)
    fresh_tail_max_tokens: int | None = setting(None, at_least=1)
    prompt_aware_eviction: bool = setting(False, env="LCM_PROMPT_AWARE_EVICTION_ENABLED")
    leaf_min_fanout: int = setting(8, at_least=1)
    condensed_min_fanout: int = setting(4, at_least=1)
    condensed_min_fanout_hard: int = setting(2, at_least=2)
    #: incrementalMaxDepth: the reference's older name (its own name wins when both are set)
    sweep_max_depth: int = setting(1, aliases=("incrementalMaxDepth",), at_least=-1,  # -1: unlimited
                                   env_aliases=("LCM_INCREMENTAL_MAX_DEPTH",))
    leaf_chunk_tokens: int = setting(20000, at_least=1)
    summary_prefix_target_tokens: int | None = setting(None, at_least=1)
    max_sweep_iterations: int = setting(12, at_least=1)
    sweep_deadline_ms: int = setting(120000, at_least=1)
    compact_until_under_deadline_ms: int = setting(300000, at_least=1)
    leaf_target_tokens: int = setting(2400, at_least=1)
    condensed_target_tokens: int = setting(2000, at_least=1)
    summary_max_overage_factor: float = setting(3.0, at_least=1)
    fallback_max_tokens: int = setting(512, at_least=1)
    large_file_threshold_tokens: int = setting(25000, aliases=("largeFileTokenThreshold",), at_least=1,
                                               env="LCM_LARGE_FILE_TOKEN_THRESHOLD")
    max_assembly_token_budget: int | None = setting(None, at_least=1)
    max_expand_tokens: int = setting(4000, at_least=1)
    #: bytes of a stored file ``describe(expand_file=True)`` inlines at most (lossless-claw's
    #: default and bounds; a call may ask for less or more within them)
    expand_file_max_bytes: int = setting(32768, at_least=1024, at_most=512000)
    summary_model: str = ""
    expansion_model: str = ""
    delegation_timeout_ms: int = setting(120000, at_least=1)
    summary_timeout_ms: int = setting(60000, at_least=1)
    summary_call_window_ms: int = setting(600000, at_least=1)
    summary_max_calls_per_window: int = setting(24, at_least=1)
    summary_spend_backoff_ms: int = setting(1800000, at_least=0)
    custom_instructions: str = ""
    #: a directory of edited summary prompts (leaf.txt, d1.txt, d2.txt, d3plus.txt:
    #: lcm.operator.prompts); empty uses the built-in templates. lcm's own key.
    summary_prompts_dir: str = ""
    #: where ``rotate`` writes its rolling backups (lcm.operator.rotate); empty: ``lcm-rotate-backups``
    #: beside a SQLite database (a PostgreSQL or in-memory store must name one). lcm's own key.
    rotate_backup_dir: str = ""
    #: backups of one conversation ``rotate`` keeps, newest first (older ones are deleted)
    rotate_keep_backups: int = setting(3, at_least=1)
    circuit_breaker_threshold: int = setting(5, at_least=1)
    circuit_breaker_cooldown_ms: int = setting(1800000, at_least=0)
    replay_flood_threshold_external: int = setting(3, at_least=1)
    replay_flood_threshold_internal: int = setting(32, at_least=1)
    #: seconds a batch of anonymous messages is remembered: the same batch again within them is a
    #: host's retry (lcm.resend); 0 turns the check off (then only a grown window is re-sent)
    resend_window_seconds: int = setting(120, at_least=0)
    strip_injected_context_tags: tuple[str, ...] = (
        "active_memory_plugin",
        "relevant-memories",
        "relevant_memories",
        "hindsight_memories",
    )
    # lossless-claw's one nested table, [lcm.independentLogFile]
    log_file_enabled: bool = setting(True, key="independentLogFile.enabled")
    log_file: str = setting("", key="independentLogFile.file")
    log_max_file_bytes: int = setting(104857600, key="independentLogFile.maxFileBytes", at_least=1)
    #: days a rotated log file is kept (the log rotates daily, and through .1...5 when a day's
    #: file passes maxFileBytes; 0 keeps every file)
    log_retention_days: int = setting(3, key="independentLogFile.retentionDays", at_least=0)
    # lcm's own keys (no lossless-claw equivalent): retention and the regex scan bound.
    retention_archived_max_age_days: int = setting(0, at_least=0)
    retention_max_database_bytes: int = setting(0, at_least=0)
    grep_regex_max_rows: int = setting(200000, at_least=1)
    grep_regex_deadline_ms: int = setting(5000, at_least=1)
    #: share of the scope's mean vector a semantic or hybrid grep takes off the question's
    #: vector before ranking (lcm.semantic; 0 = off; semantic hits still show the question's
    #: own cosines). LoCoMo dev as messages, R@10 at 0.5: hybrid 0.706 -> 0.731, semantic
    #: 0.536 -> 0.591
    query_centering: float = setting(0.5, at_least=0, at_most=1)
    ignored_keys: tuple[str, ...] = setting((), is_setting=False, compare=False)

    def __post_init__(self) -> None:
        # Direct construction accepts the same shapes as load_config (lists, rule dicts) and is
        # checked as loading is: types and bounds by the fields, the rest by _validate.
        SECTION.validate(self)
        _validate(self)

    @property
    def fallback_budget(self) -> int:
        """Token cap of a deterministic fallback summary (values below 64 are ignored)."""
        return self.fallback_max_tokens if self.fallback_max_tokens >= 64 else 512

    def prefix_target_tokens(self, token_budget: int | None) -> int:
        """The summarized-prefix target after a full sweep (derived when unset)."""
        if self.summary_prefix_target_tokens is not None:
            return self.summary_prefix_target_tokens
        if token_budget is None:
            return max(self.condensed_target_tokens, self.leaf_chunk_tokens)
        derived = math.floor(self.context_threshold * token_budget * 0.5)
        return max(self.condensed_target_tokens, min(self.leaf_chunk_tokens, derived))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-friendly dict keyed by the camelCase names."""
        out: dict[str, Any] = {}
        for spec in SECTION.specs.values():
            value = getattr(self, spec.attr)
            if isinstance(value, tuple):
                value = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
                         for v in value]
            out[spec.key] = value
        out["ignoredKeys"] = list(self.ignored_keys)
        return out


SECTION = Section(LcmConfig, error=LcmConfigError, env_prefix="LCM_", style="camel")

# lossless-claw keys with no meaning for an embedded Python library: accepted, reported.
# transcriptGcEnabled and autoRotateSessionFiles act on the host's transcript files (lcm owns
# none; lossless-claw itself retired both in 1.0); the rest are host wiring, provider routing,
# or cache knobs the reference itself deprecated.
_INAPPLICABLE = frozenset(
    {
        "hostFallbackMode", "stubLargeToolPayloads", "bootstrapMaxTokens", "summaryProvider",
        "largeFileSummaryProvider", "largeFileSummaryModel", "expansionProvider", "pruneHeartbeatOk",
        "enableSummaryThinking", "fallbackProviders", "cacheAwareCompaction", "dynamicLeafChunkTokens",
        "newSessionRetainDepth", "transcriptGcEnabled", "autoRotateSessionFiles",
    }
)  # fmt: skip

# The reference's environment variables for those keys: accepted and reported the same way, so
# an environment written for lossless-claw does not stop ``amem serve`` (exit 2) at startup.
_INAPPLICABLE_ENV = frozenset(
    {
        "LCM_ENABLE_SUMMARY_THINKING", "LCM_STUB_LARGE_TOOL_PAYLOADS", "LCM_BOOTSTRAP_MAX_TOKENS",
        "LCM_NEW_SESSION_RETAIN_DEPTH", "LCM_SUMMARY_PROVIDER", "LCM_EXPANSION_PROVIDER",
        "LCM_LARGE_FILE_SUMMARY_MODEL", "LCM_LARGE_FILE_SUMMARY_PROVIDER", "LCM_FALLBACK_PROVIDERS",
        "LCM_CACHE_AWARE_COMPACTION_ENABLED", "LCM_CACHE_TTL_SECONDS",
        "LCM_MAX_COLD_CACHE_CATCHUP_PASSES", "LCM_HOT_CACHE_PRESSURE_FACTOR",
        "LCM_HOT_CACHE_BUDGET_HEADROOM_RATIO", "LCM_COLD_CACHE_OBSERVATION_THRESHOLD",
        "LCM_CRITICAL_BUDGET_PRESSURE_RATIO", "LCM_DYNAMIC_LEAF_CHUNK_TOKENS_ENABLED",
        "LCM_DYNAMIC_LEAF_CHUNK_TOKENS_MAX",
    }
)  # fmt: skip

#: every variable lcm reads as a key -> the key's camelCase name
ENV_NAMES: dict[str, str] = {var: spec.key for var, spec in SECTION.env_names.items()}


def _parse_overrides(raw: Any, source: str) -> tuple[ThresholdOverride, ...]:
    name = "contextThresholdOverrides"
    if isinstance(raw, tuple) and all(isinstance(r, ThresholdOverride) for r in raw):
        return raw
    if not isinstance(raw, (list, tuple)):
        raise LcmConfigError(f"{name} ({source}): expected a list of rules", key=name, source=source)
    rules = []
    for i, rule in enumerate(raw):
        where = f"{name}[{i}]"
        if isinstance(rule, ThresholdOverride):
            rules.append(rule)
            continue
        if not isinstance(rule, Mapping) or not isinstance(rule.get("match"), Mapping):
            raise LcmConfigError(f"{where} ({source}): needs a 'match' table", key=where, source=source)
        try:
            loaded = _RULE.load(tables=[(rule, source)])
            unknown = sorted(item.name for item in loaded.unclaimed)
            if unknown:
                raise LcmConfigError(f"unknown keys {unknown}", key=unknown[0], source=source)
            if "context_threshold" not in loaded.values:
                raise LcmConfigError("contextThreshold: expected a number", key="contextThreshold")
            rules.append(_RULE.build(loaded.values))
        except LcmConfigError as exc:  # name the rule: the key alone does not say which
            raise LcmConfigError(f"{where} ({source}): {exc}", key=where, source=source) from None
    return tuple(rules)


def _check(ok: bool, key: str, why: str, value: Any) -> None:
    if not ok:
        raise LcmConfigError(f"{key}: {why}; got {value!r}", key=key)


def _validate(cfg: LcmConfig) -> None:
    """What the fields' bounds cannot say: rules between fields, the zone."""
    _check(
        cfg.condensed_min_fanout >= cfg.condensed_min_fanout_hard,
        "condensedMinFanout",
        f"must be >= condensedMinFanoutHard ({cfg.condensed_min_fanout_hard})",
        cfg.condensed_min_fanout,
    )
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(cfg.timezone)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError
        raise LcmConfigError(f"timezone: unknown IANA zone {cfg.timezone!r}", key="timezone") from exc


def load_config(
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    section: str = "lcm",
    table: Mapping[str, Any] | None = None,
) -> LcmConfig:
    """Build an LcmConfig from defaults < TOML < ``LCM_*`` env < overrides.

    Args:
        toml_path: optional TOML file; its ``[lcm]`` table is used when present, else the
            top level.
        env: an environment mapping (e.g. ``os.environ``) — only ``LCM_*`` names are read,
            and an ``LCM_*`` name that is not a known key is an error.
        overrides: explicit values, camelCase or snake_case.
        section: the TOML table to read.
        table: the ``[lcm]`` table itself, already read (``tools.settings`` reads the file
            once); ``toml_path`` then only names it in errors.

    Raises:
        LcmConfigError: unknown key or invalid value; ``.key`` and ``.source`` name it.
    """
    tables: list[tuple[Mapping[str, Any], str]] = []
    if table is not None:
        tables.append((table, str(toml_path) if toml_path is not None else f"[{section}]"))
    elif toml_path is not None:
        doc = read_toml(toml_path, LcmConfigError)
        tables.append((doc[section] if isinstance(doc.get(section), Mapping) else doc, str(toml_path)))
    loaded = SECTION.load(tables=tables, env=env, overrides=overrides)
    ignored: list[str] = []
    for item in loaded.unclaimed:
        if item.name in _INAPPLICABLE_ENV or (not item.is_env and item.name.split(".")[0] in _INAPPLICABLE):
            ignored.append(item.name)
        else:
            raise SECTION.unknown(item)
    # once per process and set of keys: a server opens the store for every request
    warn_once(log, "lcm config: ignoring lossless-claw keys that do not apply here: %s", ignored)
    return LcmConfig(**loaded.values, ignored_keys=tuple(sorted(set(ignored))))


#: the variable that names where amem's conversations live (a file or a postgresql:// URL),
#: amem's own name for what lossless-claw calls ``LCM_DATABASE_PATH``
URL_VARIABLE = "AMEM_LCM_URL"


def with_location(cfg: LcmConfig, env: Mapping[str, str], home: str | Path) -> LcmConfig:
    """``cfg`` with where the store lives resolved, the one rule of ``amem lcm ...`` and of
    ``LcmStore()``: ``AMEM_LCM_URL``, else ``databasePath`` (``LCM_DATABASE_PATH``), else
    ``lcm.db`` in amem's ``home``.

    Raises:
        LcmConfigError: ``AMEM_LCM_URL`` and ``databasePath`` name different stores (one of
            the two would silently lose).
    """
    from lcm.pg.url import is_postgres_url

    url = env.get(URL_VARIABLE, "").strip()
    if url:
        if cfg.database_path and cfg.database_path != url:
            raise LcmConfigError("AMEM_LCM_URL and LCM_DATABASE_PATH / [lcm] databasePath name "
                                 "different conversation stores; set one of them", key=URL_VARIABLE)
        cfg = dataclasses.replace(cfg, database_path=url)
    default = Path(home) / "lcm.db"
    if not cfg.database_path:
        cfg = dataclasses.replace(cfg, database_path=str(default))
    elif is_postgres_url(cfg.database_path) and cfg.log_file_enabled and not cfg.log_file:
        # A server has no data directory for lcm's event log, but this host has its home: the
        # log of what this host did (ingests, compactions, repairs) is kept there, as beside a
        # SQLite file, instead of nowhere.
        cfg = dataclasses.replace(cfg, log_file=str(default.with_name("lcm-log.jsonl")))
    return cfg


def environment_config(env: Mapping[str, str]) -> LcmConfig:
    """The settings of the conversation store ``amem lcm ...`` opens in ``env``: defaults <
    the ``[lcm]`` table of ``AMEM_CONFIG``'s file < ``LCM_*`` variables, where it lives
    resolved by :func:`with_location` (amem's home read as ``MemoryStore()`` reads it).
    ``LcmStore()`` without a path or a config opens this; an explicit ``config=`` reads no
    environment.

    Raises:
        LcmConfigError: a bad key or value (``.key`` names it); ``ConfigError`` (amem's) for
            a bad key of the note store's part of the file.
    """
    source = env.get("AMEM_CONFIG") or None
    doc = read_toml(source, LcmConfigError) if source is not None else None
    # the file's [lcm] table is lcm's; its top level (or [amem]) belongs to the note store
    table = doc.get("lcm") if doc is not None and isinstance(doc.get("lcm"), Mapping) else None
    cfg = load_config(source if table is not None else None, env=env, table=table)
    return with_location(cfg, env, configured_home(doc, env))  # amem's home, as it reads it
