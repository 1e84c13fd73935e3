"""Config: defaults match lossless-claw, precedence defaults < TOML < env < overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcm import LcmConfig, load_config
from lcm.errors import LcmConfigError


def test_defaults_follow_the_reference() -> None:
    cfg = load_config()
    assert (cfg.context_threshold, cfg.fresh_tail_count, cfg.leaf_chunk_tokens) == (0.75, 64, 20000)
    assert (cfg.leaf_min_fanout, cfg.condensed_min_fanout, cfg.condensed_min_fanout_hard) == (8, 4, 2)
    assert (cfg.max_sweep_iterations, cfg.sweep_deadline_ms, cfg.large_file_threshold_tokens) == (12, 120000, 25000)
    assert (cfg.replay_flood_threshold_external, cfg.replay_flood_threshold_internal) == (3, 32)
    assert "relevant-memories" in cfg.strip_injected_context_tags
    assert cfg.prefix_target_tokens(100000) == 20000  # max(2000, min(20000, 37500))
    assert cfg.prefix_target_tokens(4000) == 2000


def test_precedence_toml_env_overrides(tmp_path: Path) -> None:
    toml = tmp_path / "amem.toml"
    toml.write_text(
        '[lcm]\nfreshTailCount = 10\nleafChunkTokens = 5000\ncontextThreshold = 0.5\n'
        '[lcm.independentLogFile]\nenabled = false\n'
    )
    env = {"LCM_FRESH_TAIL_COUNT": "20", "LCM_CONTEXT_THRESHOLD": "0.6", "HOME": "/x"}
    cfg = load_config(toml, env=env, overrides={"fresh_tail_count": 30})
    assert cfg.fresh_tail_count == 30  # override beats env beats TOML
    assert cfg.context_threshold == 0.6  # env beats TOML
    assert cfg.leaf_chunk_tokens == 5000  # TOML beats default
    assert cfg.log_file_enabled is False


def test_env_lists_and_bools() -> None:
    cfg = load_config(env={"LCM_STRIP_INJECTED_CONTEXT_TAGS": "a, b", "LCM_PROMPT_AWARE_EVICTION_ENABLED": "true",
                           "LCM_FRESH_TAIL_MAX_TOKENS": ""})  # fmt: skip
    assert cfg.strip_injected_context_tags == ("a", "b")
    assert cfg.prompt_aware_eviction is True
    assert cfg.fresh_tail_max_tokens is None


def test_aliases_and_inapplicable_keys_are_reported() -> None:
    cfg = load_config(overrides={"dbPath": "/tmp/x.db", "hostFallbackMode": "error", "incrementalMaxDepth": 2})
    assert cfg.database_path == "/tmp/x.db"
    assert cfg.sweep_max_depth == 2
    assert cfg.ignored_keys == ("hostFallbackMode",)


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ({"overrides": {"freshTailCnt": 3}}, "freshTailCnt"),
        ({"overrides": {"contextThreshold": 1.5}}, "contextThreshold"),
        ({"overrides": {"freshTailCount": "many"}}, "freshTailCount"),
        ({"overrides": {"proactiveThresholdCompactionMode": "later"}}, "proactiveThresholdCompactionMode"),
        ({"env": {"LCM_LEAF_CHUNK_TOKENS": "lots"}}, "leafChunkTokens"),
        ({"env": {"LCM_NOT_A_KEY": "1"}}, "LCM_NOT_A_KEY"),
        ({"overrides": {"condensedMinFanoutHard": 1}}, "condensedMinFanoutHard"),
        ({"overrides": {"timezone": "Mars/Olympus"}}, "timezone"),
        ({"overrides": {"contextThresholdOverrides": [{"match": {"colour": "x"}, "contextThreshold": 0.3}]}},
         "contextThresholdOverrides[0]"),
        # a rule is typed like every other key (a string window used to pass and fail at compare)
        ({"overrides": {"contextThresholdOverrides": [{"match": {"modelContextWindowMin": "big"},
                                                       "contextThreshold": 0.3}]}},
         "contextThresholdOverrides[0]"),
        ({"overrides": {"contextThresholdOverrides": [{"match": {}, "contextThreshold": 1.5}]}},
         "contextThresholdOverrides[0]"),
    ],
)
def test_invalid_values_name_the_key(source: dict[str, dict[str, object]], key: str) -> None:
    with pytest.raises(LcmConfigError) as err:
        load_config(**source)  # type: ignore[arg-type]
    assert err.value.key == key
    assert key.split("[")[0] in str(err.value)


def test_bad_toml_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("freshTailCount = = 3")
    with pytest.raises(LcmConfigError, match="not valid TOML"):
        load_config(bad)
    with pytest.raises(LcmConfigError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_config_is_frozen_and_serializable() -> None:
    cfg = LcmConfig()
    with pytest.raises(AttributeError):
        cfg.fresh_tail_count = 3  # type: ignore[misc]
    d = cfg.to_dict()
    assert d["freshTailCount"] == 64 and d["independentLogFile.enabled"] is True


def test_a_lossless_claw_config_and_environment_load(tmp_path: Path) -> None:
    toml = tmp_path / "amem.toml"
    toml.write_text(
        "[lcm]\ntranscriptGcEnabled = true\n"
        "[lcm.autoRotateSessionFiles]\nenabled = true\nsizeBytes = 2097152\nstartup = \"rotate\"\n"
    )
    env = {"LCM_ENABLE_SUMMARY_THINKING": "true", "LCM_STUB_LARGE_TOOL_PAYLOADS": "false",
           "LCM_CRITICAL_BUDGET_PRESSURE_RATIO": "0.9", "LCM_INCREMENTAL_MAX_DEPTH": "3"}
    cfg = load_config(toml, env=env)
    assert cfg.sweep_max_depth == 3  # the deprecated variable still sets the depth
    assert cfg.ignored_keys == ("LCM_CRITICAL_BUDGET_PRESSURE_RATIO", "LCM_ENABLE_SUMMARY_THINKING",
                                "LCM_STUB_LARGE_TOOL_PAYLOADS", "autoRotateSessionFiles", "transcriptGcEnabled")
    assert cfg.to_dict()["ignoredKeys"] == list(cfg.ignored_keys)


def test_ignored_keys_are_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    env = {"LCM_NEW_SESSION_RETAIN_DEPTH": "2", "LCM_FALLBACK_PROVIDERS": "a/b"}
    with caplog.at_level("WARNING", logger="lcm.config"):
        load_config(env=env)
        load_config(env=env)
    warned = [r for r in caplog.records if "LCM_NEW_SESSION_RETAIN_DEPTH" in r.getMessage()]
    assert len(warned) == 1


@pytest.mark.parametrize(
    ("source", "depth"),
    [
        ({"overrides": {"sweepMaxDepth": 2, "incrementalMaxDepth": 5}}, 2),
        ({"overrides": {"incrementalMaxDepth": 5, "sweepMaxDepth": 2}}, 2),
        ({"env": {"LCM_INCREMENTAL_MAX_DEPTH": "5", "LCM_SWEEP_MAX_DEPTH": "2"}}, 2),
        ({"env": {"LCM_SWEEP_MAX_DEPTH": "2", "LCM_INCREMENTAL_MAX_DEPTH": "5"}}, 2),
        ({"env": {"LCM_INCREMENTAL_MAX_DEPTH": "5"}, "overrides": {"sweepMaxDepth": 2}}, 2),
        ({"env": {"LCM_INCREMENTAL_MAX_DEPTH": "-1"}}, -1),
    ],
)
def test_sweep_max_depth_wins_over_incremental_max_depth(source: dict[str, dict[str, object]], depth: int) -> None:
    assert load_config(**source).sweep_max_depth == depth  # type: ignore[arg-type]
