"""tools.settings: the config file read once, each table and variable handed to its owner."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from amem.config import AmemConfig
from amem.config import load_config as load_amem
from amem.errors import ConfigError
from amem.kernel.errors import BadConfigError
from tools.settings import load_settings

FILE = """
fold_threshold = 0.9
embedder = "hashing"
schedule_hour = 4
schedule_timezone = "Europe/Berlin"

[lcm]
freshTailCount = 10

[lcm.independentLogFile]
enabled = false
"""


@pytest.fixture()
def toml(tmp_path: Path) -> Path:
    path = tmp_path / "amem.toml"
    path.write_text(FILE)
    return path


def test_each_table_goes_to_its_owner(toml: Path, tmp_path: Path) -> None:
    s = load_settings(toml, env={"AMEM_HOME": str(tmp_path / "h")})
    assert (s.amem.fold_threshold, s.amem.embedder, s.amem.home) == (0.9, "hashing", tmp_path / "h")
    assert (s.scheduler.hour, s.scheduler.minute, s.scheduler.timezone) == (4, 30, "Europe/Berlin")
    assert s.scheduler.home == s.amem.home
    assert (s.lcm.fresh_tail_count, s.lcm.log_file_enabled) == (10, False)
    assert s.llm is None and s.config_path == toml
    assert not hasattr(s.amem, "schedule_hour")  # the note store no longer carries the schedule


def test_an_amem_table_holds_the_schedule_too(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[amem]\nrrf_k = 7\nschedule_minute = 5\n')
    s = load_settings(path, env={"AMEM_HOME": str(tmp_path)})
    assert (s.amem.rrf_k, s.scheduler.minute) == (7, 5)


def test_amem_config_names_the_file_when_no_path_is_given(toml: Path, tmp_path: Path) -> None:
    s = load_settings(env={"AMEM_CONFIG": str(toml), "AMEM_HOME": str(tmp_path)})
    assert s.config_path == toml and s.scheduler.hour == 4


def test_precedence_defaults_toml_env_arguments(toml: Path, tmp_path: Path) -> None:
    env = {"AMEM_HOME": str(tmp_path), "AMEM_SCHEDULE_HOUR": "5", "AMEM_FOLD_THRESHOLD": "0.95",
           "LCM_FRESH_TAIL_COUNT": "20"}
    s = load_settings(toml, env=env)
    assert (s.scheduler.hour, s.amem.fold_threshold, s.lcm.fresh_tail_count) == (5, 0.95, 20)
    s = load_settings(toml, env=env, schedule_hour=6, fold_threshold="0.99", freshTailCount=30,
                      schedule_timezone=None, home=str(tmp_path / "o"))  # None: an unset flag
    assert (s.scheduler.hour, s.amem.fold_threshold, s.lcm.fresh_tail_count) == (6, 0.99, 30)
    assert s.scheduler.timezone == "Europe/Berlin" and s.scheduler.home == tmp_path / "o"


def test_the_llm_section_is_the_note_stores_endpoint(tmp_path: Path) -> None:
    s = load_settings(env={"AMEM_HOME": str(tmp_path), "AMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                           "AMEM_LLM_DEADLINE_S": "3"})
    assert s.llm is not None
    assert (s.llm.base_url, s.llm.model, s.llm.deadline) == ("http://127.0.0.1:9/v1", "gpt-4o-mini", 3.0)


def test_the_tools_variables_are_not_config_typos(tmp_path: Path) -> None:
    # AMEM_SERVER_TOKEN used to stop every command: the note store's loader did not know it.
    env = {"AMEM_HOME": str(tmp_path), "AMEM_SERVER_TOKEN": "t", "AMEM_LAZY_TOOLS": "1",
           "AMEM_AGENT": "a", "AMEM_LOG_LEVEL": "INFO", "AMEM_LCM_URL": "x.db",
           "AMEM_TOOL_DESCRIPTION_MEMORY_ADD": "d", "AMEM_TEST_QDRANT_URL": "http://q"}
    assert load_settings(env=env).amem.home == tmp_path


@pytest.mark.parametrize(("where", "key"), [
    ({"env": {"AMEM_EMBEDER": "hashing"}}, "embeder"),
    ({"env": {"AMEM_SCHEDULE_HOURS": "3"}}, "schedule_hours"),
    ({"env": {"AMEM_SCHEDULE_HOUR": "25"}}, "schedule_hour"),
    ({"env": {"AMEM_SCHEDULE_TIMEZONE": "Mars/Olympus"}}, "schedule_timezone"),
    ({"file": "fold_treshold = 0.9\n"}, "fold_treshold"),
    ({"file": "schedule_hour = \"soon\"\n"}, "schedule_hour"),
    ({"file": "[amem]\nschedule_minutes = 3\n"}, "schedule_minutes"),
    ({"file": "[lcm]\nfreshTailCnt = 3\n"}, "freshTailCnt"),
    ({"args": {"embeddr": "hashing"}}, "embeddr"),
    ({"env": {"LCM_NOT_A_KEY": "1"}}, "LCM_NOT_A_KEY"),
    # read by nothing and dropped unsaid (exploratory test, 2026-12-05): a table no section
    # owns, and top-level keys beside an [amem] table
    ({"file": "[scheduler]\nschedule_hour = 5\n"}, "scheduler"),
    ({"file": "[lcmm]\nfreshTailCount = 3\n"}, "lcmm"),
    ({"file": "schedule_hour = 3\n[amem]\nschedule_minute = 10\n"}, "schedule_hour"),
])
def test_a_key_nobody_takes_is_an_error_naming_it(tmp_path: Path, where: dict[str, object], key: str) -> None:
    path = None
    if "file" in where:
        path = tmp_path / "c.toml"
        path.write_text(str(where["file"]))
    env = {"AMEM_HOME": str(tmp_path), **where.get("env", {})}  # type: ignore[dict-item]
    with pytest.raises(BadConfigError) as err:  # lcm's keys raise lcm's kind of it
        load_settings(path, env=env, **where.get("args", {}))  # type: ignore[arg-type]
    assert err.value.key == key and key in str(err.value)


def test_the_library_alone_warns_about_keys_it_does_not_own(toml: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    # The note store cannot tell the scheduler's key from a typo; tools.settings can, and does.
    with caplog.at_level(logging.WARNING, logger="amem.config"):
        cfg = load_amem(toml, env={"AMEM_SCHEDULE_HOUR": "3", "AMEM_AGENT": "a"})
    assert isinstance(cfg, AmemConfig) and cfg.fold_threshold == 0.9
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "schedule_hour" in warned and "AMEM_SCHEDULE_HOUR" in warned
    assert "AMEM_AGENT" not in warned  # MemoryStore() reads it itself
    with pytest.raises(ConfigError, match="schedule_hour") as err:  # an argument is never a neighbour's
        load_amem(overrides={"schedule_hour": 3})
    assert err.value.key == "schedule_hour"


def test_the_library_alone_refuses_a_misspelt_file_key(tmp_path: Path) -> None:
    # Only the scheduler's namespace is a neighbour's: any other key the note store does not
    # take is a typo, and running without it would lose the user's setting silently.
    path = tmp_path / "typo.toml"
    path.write_text("fold_treshold = 0.9\n")
    with pytest.raises(ConfigError, match="fold_treshold") as err:
        load_amem(path, env={})
    assert err.value.key == "fold_treshold"
