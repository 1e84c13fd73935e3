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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcm.errors import LcmConfigError

log = logging.getLogger(__name__)

__all__ = ["LcmConfig", "ThresholdOverride", "load_config", "ENV_NAMES"]


@dataclass(frozen=True)
class ThresholdOverride:
    """One ``contextThresholdOverrides`` rule (matching: ``lcm.compaction.resolve_params``).

    ``model`` and the context-window bounds match what the host passes to ``assemble`` /
    ``compact`` (``model=``, ``context_window=``); a rule needing one the host did not pass
    does not match.
    """

    context_threshold: float
    name: str = ""
    session_pattern: str | None = None
    model: str | None = None
    model_context_window_min: int | None = None
    model_context_window_max: int | None = None
    fresh_tail_count: int | None = None
    leaf_chunk_tokens: int | None = None


@dataclass(frozen=True)
class LcmConfig:
    """Every tunable of lcm. Defaults follow the lossless-claw configuration reference."""

    enabled: bool = True
    database_path: str = ""
    large_files_dir: str = ""
    ignore_session_patterns: tuple[str, ...] = ()
    stateless_session_patterns: tuple[str, ...] = ()
    skip_stateless_sessions: bool = True
    timezone: str = "UTC"
    proactive_threshold_compaction_mode: str = "deferred"
    context_threshold: float = 0.75
    context_threshold_overrides: tuple[ThresholdOverride, ...] = ()
    fresh_tail_count: int = 64
    fresh_tail_max_tokens: int | None = None
    prompt_aware_eviction: bool = False
    leaf_min_fanout: int = 8
    condensed_min_fanout: int = 4
    condensed_min_fanout_hard: int = 2
    sweep_max_depth: int = 1
    leaf_chunk_tokens: int = 20000
    summary_prefix_target_tokens: int | None = None
    max_sweep_iterations: int = 12
    sweep_deadline_ms: int = 120000
    compact_until_under_deadline_ms: int = 300000
    leaf_target_tokens: int = 2400
    condensed_target_tokens: int = 2000
    summary_max_overage_factor: float = 3.0
    fallback_max_tokens: int = 512
    large_file_threshold_tokens: int = 25000
    max_assembly_token_budget: int | None = None
    max_expand_tokens: int = 4000
    summary_model: str = ""
    expansion_model: str = ""
    delegation_timeout_ms: int = 120000
    summary_timeout_ms: int = 60000
    summary_call_window_ms: int = 600000
    summary_max_calls_per_window: int = 24
    summary_spend_backoff_ms: int = 1800000
    custom_instructions: str = ""
    circuit_breaker_threshold: int = 5
    circuit_breaker_cooldown_ms: int = 1800000
    replay_flood_threshold_external: int = 3
    replay_flood_threshold_internal: int = 32
    strip_injected_context_tags: tuple[str, ...] = (
        "active_memory_plugin",
        "relevant-memories",
        "relevant_memories",
        "hindsight_memories",
    )
    log_file_enabled: bool = True
    log_file: str = ""
    log_max_file_bytes: int = 104857600
    #: days a rotated log file is kept (the log rotates daily; 0 keeps every file)
    log_retention_days: int = 14
    # lcm's own keys (no lossless-claw equivalent): retention and the regex scan bound.
    retention_archived_max_age_days: int = 0
    retention_max_database_bytes: int = 0
    grep_regex_max_rows: int = 200000
    grep_regex_deadline_ms: int = 5000
    ignored_keys: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # Direct construction accepts the same shapes as load_config (lists, rule dicts).
        for spec in _SPECS.values():
            value = getattr(self, spec.attr)
            if spec.kind == "list" and isinstance(value, list):
                object.__setattr__(self, spec.attr, tuple(value))
            elif spec.kind == "overrides" and not (
                isinstance(value, tuple) and all(isinstance(r, ThresholdOverride) for r in value)
            ):
                object.__setattr__(self, spec.attr, _parse_overrides(spec, value, "constructor"))
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
        for spec in _SPECS.values():
            value = getattr(self, spec.attr)
            if isinstance(value, tuple):
                value = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
                         for v in value]
            out[spec.name] = value
        out["ignoredKeys"] = list(self.ignored_keys)
        return out


# ---------------------------------------------------------------------------------------
# Key table: camelCase name -> attribute, parser, env var.


@dataclass(frozen=True)
class _Spec:
    name: str
    attr: str
    kind: str  # bool | int | opt_int | float | str | list | enum:<a>|<b> | overrides
    env: str | None


def _spec(name: str, attr: str, kind: str, env: str | None) -> _Spec:
    return _Spec(name, attr, kind, env)


_SPECS: dict[str, _Spec] = {
    s.name: s
    for s in [
        _spec("enabled", "enabled", "bool", "LCM_ENABLED"),
        _spec("databasePath", "database_path", "str", "LCM_DATABASE_PATH"),
        _spec("largeFilesDir", "large_files_dir", "str", "LCM_LARGE_FILES_DIR"),
        _spec("ignoreSessionPatterns", "ignore_session_patterns", "list", "LCM_IGNORE_SESSION_PATTERNS"),
        _spec("statelessSessionPatterns", "stateless_session_patterns", "list", "LCM_STATELESS_SESSION_PATTERNS"),
        _spec("skipStatelessSessions", "skip_stateless_sessions", "bool", "LCM_SKIP_STATELESS_SESSIONS"),
        _spec("timezone", "timezone", "str", "LCM_TIMEZONE"),
        _spec(
            "proactiveThresholdCompactionMode",
            "proactive_threshold_compaction_mode",
            "enum:deferred|inline",
            "LCM_PROACTIVE_THRESHOLD_COMPACTION_MODE",
        ),
        _spec("contextThreshold", "context_threshold", "float", "LCM_CONTEXT_THRESHOLD"),
        _spec("contextThresholdOverrides", "context_threshold_overrides", "overrides", None),
        _spec("freshTailCount", "fresh_tail_count", "int", "LCM_FRESH_TAIL_COUNT"),
        _spec("freshTailMaxTokens", "fresh_tail_max_tokens", "opt_int", "LCM_FRESH_TAIL_MAX_TOKENS"),
        _spec("promptAwareEviction", "prompt_aware_eviction", "bool", "LCM_PROMPT_AWARE_EVICTION_ENABLED"),
        _spec("leafMinFanout", "leaf_min_fanout", "int", "LCM_LEAF_MIN_FANOUT"),
        _spec("condensedMinFanout", "condensed_min_fanout", "int", "LCM_CONDENSED_MIN_FANOUT"),
        _spec("condensedMinFanoutHard", "condensed_min_fanout_hard", "int", "LCM_CONDENSED_MIN_FANOUT_HARD"),
        _spec("sweepMaxDepth", "sweep_max_depth", "int", "LCM_SWEEP_MAX_DEPTH"),
        _spec("leafChunkTokens", "leaf_chunk_tokens", "int", "LCM_LEAF_CHUNK_TOKENS"),
        _spec(
            "summaryPrefixTargetTokens", "summary_prefix_target_tokens", "opt_int", "LCM_SUMMARY_PREFIX_TARGET_TOKENS"
        ),
        _spec("maxSweepIterations", "max_sweep_iterations", "int", "LCM_MAX_SWEEP_ITERATIONS"),
        _spec("sweepDeadlineMs", "sweep_deadline_ms", "int", "LCM_SWEEP_DEADLINE_MS"),
        _spec(
            "compactUntilUnderDeadlineMs",
            "compact_until_under_deadline_ms",
            "int",
            "LCM_COMPACT_UNTIL_UNDER_DEADLINE_MS",
        ),
        _spec("leafTargetTokens", "leaf_target_tokens", "int", "LCM_LEAF_TARGET_TOKENS"),
        _spec("condensedTargetTokens", "condensed_target_tokens", "int", "LCM_CONDENSED_TARGET_TOKENS"),
        _spec("summaryMaxOverageFactor", "summary_max_overage_factor", "float", "LCM_SUMMARY_MAX_OVERAGE_FACTOR"),
        _spec("fallbackMaxTokens", "fallback_max_tokens", "int", "LCM_FALLBACK_MAX_TOKENS"),
        _spec("largeFileThresholdTokens", "large_file_threshold_tokens", "int", "LCM_LARGE_FILE_TOKEN_THRESHOLD"),
        _spec("maxAssemblyTokenBudget", "max_assembly_token_budget", "opt_int", "LCM_MAX_ASSEMBLY_TOKEN_BUDGET"),
        _spec("maxExpandTokens", "max_expand_tokens", "int", "LCM_MAX_EXPAND_TOKENS"),
        _spec("summaryModel", "summary_model", "str", "LCM_SUMMARY_MODEL"),
        _spec("expansionModel", "expansion_model", "str", "LCM_EXPANSION_MODEL"),
        _spec("delegationTimeoutMs", "delegation_timeout_ms", "int", "LCM_DELEGATION_TIMEOUT_MS"),
        _spec("summaryTimeoutMs", "summary_timeout_ms", "int", "LCM_SUMMARY_TIMEOUT_MS"),
        _spec("summaryCallWindowMs", "summary_call_window_ms", "int", "LCM_SUMMARY_CALL_WINDOW_MS"),
        _spec("summaryMaxCallsPerWindow", "summary_max_calls_per_window", "int", "LCM_SUMMARY_MAX_CALLS_PER_WINDOW"),
        _spec("summarySpendBackoffMs", "summary_spend_backoff_ms", "int", "LCM_SUMMARY_SPEND_BACKOFF_MS"),
        _spec("customInstructions", "custom_instructions", "str", "LCM_CUSTOM_INSTRUCTIONS"),
        _spec("circuitBreakerThreshold", "circuit_breaker_threshold", "int", "LCM_CIRCUIT_BREAKER_THRESHOLD"),
        _spec("circuitBreakerCooldownMs", "circuit_breaker_cooldown_ms", "int", "LCM_CIRCUIT_BREAKER_COOLDOWN_MS"),
        _spec(
            "replayFloodThresholdExternal",
            "replay_flood_threshold_external",
            "int",
            "LCM_REPLAY_FLOOD_THRESHOLD_EXTERNAL",
        ),
        _spec(
            "replayFloodThresholdInternal",
            "replay_flood_threshold_internal",
            "int",
            "LCM_REPLAY_FLOOD_THRESHOLD_INTERNAL",
        ),
        _spec("stripInjectedContextTags", "strip_injected_context_tags", "list", "LCM_STRIP_INJECTED_CONTEXT_TAGS"),
        _spec("independentLogFile.enabled", "log_file_enabled", "bool", "LCM_LOG_FILE_ENABLED"),
        _spec("independentLogFile.file", "log_file", "str", "LCM_LOG_FILE"),
        _spec("independentLogFile.maxFileBytes", "log_max_file_bytes", "int", "LCM_LOG_MAX_FILE_BYTES"),
        _spec("independentLogFile.retentionDays", "log_retention_days", "int", "LCM_LOG_RETENTION_DAYS"),
        _spec(
            "retentionArchivedMaxAgeDays",
            "retention_archived_max_age_days",
            "int",
            "LCM_RETENTION_ARCHIVED_MAX_AGE_DAYS",
        ),
        _spec(
            "retentionMaxDatabaseBytes", "retention_max_database_bytes", "int", "LCM_RETENTION_MAX_DATABASE_BYTES"
        ),
        _spec("grepRegexMaxRows", "grep_regex_max_rows", "int", "LCM_GREP_REGEX_MAX_ROWS"),
        _spec("grepRegexDeadlineMs", "grep_regex_deadline_ms", "int", "LCM_GREP_REGEX_DEADLINE_MS"),
    ]
}

_ALIASES = {
    "dbPath": "databasePath",
    "incrementalMaxDepth": "sweepMaxDepth",
    "largeFileTokenThreshold": "largeFileThresholdTokens",
}

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
_INAPPLICABLE_ENV = {
    "LCM_ENABLE_SUMMARY_THINKING": "enableSummaryThinking",
    "LCM_STUB_LARGE_TOOL_PAYLOADS": "stubLargeToolPayloads",
    "LCM_BOOTSTRAP_MAX_TOKENS": "bootstrapMaxTokens",
    "LCM_NEW_SESSION_RETAIN_DEPTH": "newSessionRetainDepth",
    "LCM_SUMMARY_PROVIDER": "summaryProvider",
    "LCM_EXPANSION_PROVIDER": "expansionProvider",
    "LCM_LARGE_FILE_SUMMARY_MODEL": "largeFileSummaryModel",
    "LCM_LARGE_FILE_SUMMARY_PROVIDER": "largeFileSummaryProvider",
    "LCM_FALLBACK_PROVIDERS": "fallbackProviders",
    "LCM_CACHE_AWARE_COMPACTION_ENABLED": "cacheAwareCompaction.enabled",
    "LCM_CACHE_TTL_SECONDS": "cacheAwareCompaction.cacheTTLSeconds",
    "LCM_MAX_COLD_CACHE_CATCHUP_PASSES": "cacheAwareCompaction.maxColdCacheCatchupPasses",
    "LCM_HOT_CACHE_PRESSURE_FACTOR": "cacheAwareCompaction.hotCachePressureFactor",
    "LCM_HOT_CACHE_BUDGET_HEADROOM_RATIO": "cacheAwareCompaction.hotCacheBudgetHeadroomRatio",
    "LCM_COLD_CACHE_OBSERVATION_THRESHOLD": "cacheAwareCompaction.coldCacheObservationThreshold",
    "LCM_CRITICAL_BUDGET_PRESSURE_RATIO": "cacheAwareCompaction.criticalBudgetPressureRatio",
    "LCM_DYNAMIC_LEAF_CHUNK_TOKENS_ENABLED": "dynamicLeafChunkTokens.enabled",
    "LCM_DYNAMIC_LEAF_CHUNK_TOKENS_MAX": "dynamicLeafChunkTokens.max",
}

# Deprecated spellings' environment variables (the key's own variable wins over these).
_ALIAS_ENV = {"LCM_INCREMENTAL_MAX_DEPTH": "incrementalMaxDepth"}

_BY_ATTR = {s.attr: s for s in _SPECS.values()}
ENV_NAMES: dict[str, str] = {s.env: s.name for s in _SPECS.values() if s.env}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _canonical(key: str) -> str | None:
    """Map any accepted spelling of a key to its camelCase name (None if unknown)."""
    key = _ALIASES.get(key, key)
    if key in _SPECS:
        return key
    if key in _BY_ATTR:
        return _BY_ATTR[key].name
    return None


def _parse(spec: _Spec, raw: Any, source: str, *, from_env: bool) -> Any:
    """Turn a raw value (TOML/dict/env string) into the attribute's type, or raise."""

    def bad(why: str) -> LcmConfigError:
        return LcmConfigError(f"{spec.name} ({source}): {why}; got {raw!r}", key=spec.name, source=source)

    kind = spec.kind
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if from_env and isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise bad("expected a boolean")
    if kind in ("int", "opt_int"):
        if kind == "opt_int" and (raw is None or (from_env and str(raw).strip() == "")):
            return None
        if isinstance(raw, bool):
            raise bad("expected an integer")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if from_env and isinstance(raw, str):
            try:
                return int(raw.strip())
            except ValueError:
                pass
        raise bad("expected an integer")
    if kind == "float":
        if isinstance(raw, bool):
            raise bad("expected a number")
        if isinstance(raw, (int, float)):
            return float(raw)
        if from_env and isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise bad("expected a number")
    if kind == "str":
        if isinstance(raw, str):
            return raw
        raise bad("expected a string")
    if kind.startswith("enum:"):
        choices = kind[5:].split("|")
        if isinstance(raw, str) and raw.strip() in choices:
            return raw.strip()
        raise bad(f"expected one of {choices}")
    if kind == "list":
        if from_env and isinstance(raw, str):
            return tuple(p.strip() for p in raw.split(",") if p.strip())
        if isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
            return tuple(raw)
        raise bad("expected a list of strings")
    if kind == "overrides":
        return _parse_overrides(spec, raw, source)
    raise AssertionError(kind)  # pragma: no cover - table is static


def _parse_overrides(spec: _Spec, raw: Any, source: str) -> tuple[ThresholdOverride, ...]:
    if isinstance(raw, tuple) and all(isinstance(r, ThresholdOverride) for r in raw):
        return raw
    if not isinstance(raw, (list, tuple)):
        raise LcmConfigError(f"{spec.name} ({source}): expected a list of rules", key=spec.name, source=source)
    rules = []
    for i, rule in enumerate(raw):
        where = f"{spec.name}[{i}]"
        if isinstance(rule, ThresholdOverride):
            rules.append(rule)
            continue
        if not isinstance(rule, Mapping) or not isinstance(rule.get("match"), Mapping):
            raise LcmConfigError(f"{where} ({source}): needs a 'match' table", key=where, source=source)
        known = {"name", "match", "contextThreshold", "freshTailCount", "leafChunkTokens"}
        extra = set(rule) - known
        match = rule["match"]
        extra_match = set(match) - {"model", "modelContextWindowMin", "modelContextWindowMax", "sessionPattern"}
        if extra or extra_match:
            raise LcmConfigError(
                f"{where} ({source}): unknown keys {sorted(extra | extra_match)}", key=where, source=source
            )
        threshold = rule.get("contextThreshold")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise LcmConfigError(f"{where}.contextThreshold ({source}): expected a number", key=where, source=source)
        rules.append(
            ThresholdOverride(
                context_threshold=float(threshold),
                name=str(rule.get("name", "")),
                session_pattern=match.get("sessionPattern"),
                model=match.get("model"),
                model_context_window_min=match.get("modelContextWindowMin"),
                model_context_window_max=match.get("modelContextWindowMax"),
                fresh_tail_count=rule.get("freshTailCount"),
                leaf_chunk_tokens=rule.get("leafChunkTokens"),
            )
        )
    return tuple(rules)


def _check(ok: bool, key: str, why: str, value: Any) -> None:
    if not ok:
        raise LcmConfigError(f"{key}: {why}; got {value!r}", key=key)


def _validate(cfg: LcmConfig) -> None:
    """Range checks shared by every way of building a config."""
    positive = [
        "fresh_tail_count", "leaf_min_fanout", "condensed_min_fanout", "leaf_chunk_tokens",
        "max_sweep_iterations", "sweep_deadline_ms", "compact_until_under_deadline_ms",
        "leaf_target_tokens", "condensed_target_tokens", "fallback_max_tokens",
        "large_file_threshold_tokens", "max_expand_tokens", "delegation_timeout_ms",
        "summary_timeout_ms", "summary_call_window_ms", "summary_max_calls_per_window",
        "circuit_breaker_threshold", "replay_flood_threshold_external",
        "replay_flood_threshold_internal", "log_max_file_bytes", "grep_regex_max_rows",
        "grep_regex_deadline_ms",
    ]  # fmt: skip
    for attr in positive:
        value = getattr(cfg, attr)
        _check(isinstance(value, int) and not isinstance(value, bool) and value > 0, _name(attr), "must be > 0", value)
    for attr in ("summary_spend_backoff_ms", "circuit_breaker_cooldown_ms", "retention_archived_max_age_days",
                 "retention_max_database_bytes", "log_retention_days"):  # fmt: skip
        value = getattr(cfg, attr)
        _check(isinstance(value, int) and value >= 0, _name(attr), "must be >= 0", value)
    _check(0 < cfg.context_threshold <= 1, "contextThreshold", "must be in (0, 1]", cfg.context_threshold)
    _check(cfg.condensed_min_fanout_hard >= 2, "condensedMinFanoutHard", "hard floor is 2", cfg.condensed_min_fanout_hard)
    _check(
        cfg.condensed_min_fanout >= cfg.condensed_min_fanout_hard,
        "condensedMinFanout",
        f"must be >= condensedMinFanoutHard ({cfg.condensed_min_fanout_hard})",
        cfg.condensed_min_fanout,
    )
    _check(cfg.sweep_max_depth >= -1, "sweepMaxDepth", "must be -1 (unlimited), 0 or more", cfg.sweep_max_depth)
    _check(cfg.summary_max_overage_factor >= 1, "summaryMaxOverageFactor", "must be >= 1", cfg.summary_max_overage_factor)
    for attr in ("fresh_tail_max_tokens", "max_assembly_token_budget", "summary_prefix_target_tokens"):
        value = getattr(cfg, attr)
        _check(value is None or value > 0, _name(attr), "must be > 0 when set", value)
    _check(
        cfg.proactive_threshold_compaction_mode in ("deferred", "inline"),
        "proactiveThresholdCompactionMode",
        "expected 'deferred' or 'inline'",
        cfg.proactive_threshold_compaction_mode,
    )
    for rule in cfg.context_threshold_overrides:
        _check(0 < rule.context_threshold <= 1, "contextThresholdOverrides", "threshold must be in (0, 1]", rule)
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(cfg.timezone)
    except Exception as exc:  # ZoneInfoNotFoundError, ValueError
        raise LcmConfigError(f"timezone: unknown IANA zone {cfg.timezone!r}", key="timezone") from exc


def _name(attr: str) -> str:
    return _BY_ATTR[attr].name


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten the one nested table lossless-claw has (independentLogFile)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("independentLogFile", "independent_log_file") and isinstance(value, Mapping):
            for sub, subval in value.items():
                out[f"independentLogFile.{sub}"] = subval
        else:
            out[prefix + key] = value
    return out


def _apply(
    values: dict[str, Any], ignored: list[str], data: Mapping[str, Any], source: str, *, from_env: bool = False
) -> None:
    # A deprecated alias first, so the key's own name wins within one layer
    # ("sweepMaxDepth wins over incrementalMaxDepth"); a later layer still wins over both.
    flat = sorted(_flatten(data).items(), key=lambda kv: kv[0] not in _ALIASES)
    for key, raw in flat:
        name = _canonical(key)
        if name is None:
            if key.split(".")[0] in _INAPPLICABLE:
                ignored.append(key)
                continue
            raise LcmConfigError(f"unknown config key {key!r} ({source})", key=key, source=source)
        values[_SPECS[name].attr] = _parse(_SPECS[name], raw, source, from_env=from_env)


def load_config(
    toml_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    section: str = "lcm",
) -> LcmConfig:
    """Build an LcmConfig from defaults < TOML < ``LCM_*`` env < overrides.

    Args:
        toml_path: optional TOML file; its ``[lcm]`` table is used when present, else the
            top level.
        env: an environment mapping (e.g. ``os.environ``) — only ``LCM_*`` names are read,
            and an ``LCM_*`` name that is not a known key is an error.
        overrides: explicit values, camelCase or snake_case.
        section: the TOML table to read.

    Raises:
        LcmConfigError: unknown key or invalid value; ``.key`` and ``.source`` name it.
    """
    values: dict[str, Any] = {}
    ignored: list[str] = []
    if toml_path is not None:
        path = Path(toml_path)
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise LcmConfigError(f"config file not found: {path}", source=str(path)) from exc
        except tomllib.TOMLDecodeError as exc:
            raise LcmConfigError(f"config file {path} is not valid TOML: {exc}", source=str(path)) from exc
        table = doc.get(section, doc) if isinstance(doc.get(section), Mapping) else doc
        _apply(values, ignored, table, str(path))
    if env is not None:
        env_values: dict[str, Any] = {}
        for var, raw in env.items():
            if not var.startswith("LCM_"):
                continue
            if var in _INAPPLICABLE_ENV:
                ignored.append(var)
                continue
            name = ENV_NAMES.get(var) or _ALIAS_ENV.get(var)
            if name is None:
                raise LcmConfigError(f"unknown environment variable {var}", key=var, source="env")
            env_values[name] = raw
        _apply(values, ignored, env_values, "env", from_env=True)
    if overrides:
        _apply(values, ignored, overrides, "overrides")
    keys = tuple(sorted(set(ignored)))
    if keys and keys not in _WARNED:
        # Once per process and set of keys: a server opens the store for every request.
        _WARNED.add(keys)
        log.warning("lcm config: ignoring lossless-claw keys that do not apply here: %s", list(keys))
    return LcmConfig(**values, ignored_keys=keys)


#: the sets of ignored keys already warned about in this process
_WARNED: set[tuple[str, ...]] = set()


