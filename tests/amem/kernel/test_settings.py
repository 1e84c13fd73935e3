"""amem.kernel.settings: one loader for every config section, driven by field metadata."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from amem.kernel.errors import BadConfigError
from amem.kernel.settings import ARGUMENTS, Section, camel, read_toml, setting, warn_once


class DemoError(BadConfigError):
    code = "config_error"


def _parse_pairs(raw: Any, source: str) -> tuple[tuple[str, int], ...]:
    if isinstance(raw, tuple):
        return raw
    if not isinstance(raw, dict):
        raise DemoError(f"pairs ({source}): expected a table", key="pairs", source=source)
    return tuple(sorted((str(k), int(v)) for k, v in raw.items()))


@dataclass(frozen=True)
class Demo:
    count: int = setting(3, at_least=1)
    ratio: float = setting(0.5, above=0, at_most=1)
    flag: bool = False
    name: str = ""
    limit: int | None = None
    home: Path = Path("/")
    mode: Literal["fast", "slow"] = "fast"
    tags: tuple[str, ...] = ()
    depth: int = setting(1, aliases=("oldDepth",), env_aliases=("DEMO_OLD_DEPTH",))
    quiet_mode: bool = setting(False, env="DEMO_HUSH")
    secret: str = setting("", env=None)
    log_enabled: bool = setting(True, key="log.enabled")
    log_file: str = setting("", key="log.file")
    pairs: tuple[tuple[str, int], ...] = setting((), env=None, parse=_parse_pairs)
    derived: int = setting(0, is_setting=False)

    def __post_init__(self) -> None:
        DEMO.validate(self)


DEMO = Section(Demo, error=DemoError, env_prefix="DEMO_", style="camel")


def load(**kwargs: Any) -> Demo:
    loaded = DEMO.load(**kwargs)
    for item in loaded.unclaimed:
        raise DEMO.unknown(item)
    return DEMO.build(loaded.values)


def test_values_take_the_fields_real_types_not_the_annotation_text() -> None:
    # `from __future__ import annotations` makes every annotation a string here.
    cfg = load(env={"DEMO_COUNT": " 7 ", "DEMO_RATIO": "1", "DEMO_FLAG": "yes", "DEMO_LIMIT": "",
                    "DEMO_HOME": "~/x", "DEMO_MODE": "slow", "DEMO_TAGS": "a, b,,c"})
    assert (cfg.count, cfg.ratio, cfg.flag, cfg.limit, cfg.mode) == (7, 1.0, True, None, "slow")
    assert cfg.home == Path("~/x").expanduser() and cfg.tags == ("a", "b", "c")
    assert load(tables=[({"limit": 5, "ratio": 1, "count": 4.0}, "f.toml")]).ratio == 1.0


def test_precedence_defaults_toml_env_arguments() -> None:
    tables = [({"count": 10, "ratio": 0.1}, "f.toml")]
    cfg = load(tables=tables, env={"DEMO_COUNT": "20"}, overrides={"count": 30})
    assert (cfg.count, cfg.ratio) == (30, 0.1)
    assert load(tables=tables, env={"DEMO_COUNT": "20"}).count == 20
    assert load(base={"count": 99}).count == 99


def test_keys_in_every_accepted_spelling() -> None:
    assert DEMO.spec("quietMode") is DEMO.spec("quiet_mode") is not None
    assert load(overrides={"quiet_mode": True}).quiet_mode is True
    assert load(env={"DEMO_HUSH": "on"}).quiet_mode is True  # the field's own variable name
    assert "DEMO_QUIET_MODE" not in DEMO.env_names
    assert "DEMO_SECRET" not in DEMO.env_names and DEMO.spec("derived") is None


@pytest.mark.parametrize("layer", [{"oldDepth": 5, "depth": 2}, {"depth": 2, "oldDepth": 5}])
def test_the_key_wins_over_its_alias_in_one_layer(layer: dict[str, int]) -> None:
    assert load(overrides=layer).depth == 2
    assert load(tables=[({"oldDepth": 5}, "f")], overrides={"depth": 2}).depth == 2
    assert load(tables=[({"depth": 2}, "f")], overrides={"oldDepth": 5}).depth == 5  # later layer


def test_the_variable_wins_over_its_deprecated_alias() -> None:
    assert load(env={"DEMO_OLD_DEPTH": "5", "DEMO_DEPTH": "2"}).depth == 2
    assert load(env={"DEMO_DEPTH": "2", "DEMO_OLD_DEPTH": "5"}).depth == 2
    assert load(env={"DEMO_OLD_DEPTH": "5"}).depth == 5


def test_nested_tables_and_dotted_keys() -> None:
    cfg = load(tables=[({"log": {"enabled": False, "file": "a.log"}}, "f")])
    assert (cfg.log_enabled, cfg.log_file) == (False, "a.log")
    assert load(overrides={"log.file": "b.log"}).log_file == "b.log"
    assert load(env={"DEMO_LOG_ENABLED": "0"}).log_enabled is False


def test_a_parser_for_a_type_the_loader_does_not_know() -> None:
    assert load(tables=[({"pairs": {"b": 2, "a": "1"}}, "f")]).pairs == (("a", 1), ("b", 2))
    assert Demo(pairs={"x": 3}).pairs == (("x", 3),)  # type: ignore[arg-type]
    assert Demo(tags=["a"]).tags == ("a",)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "key", "why"), [
    ({"env": {"DEMO_COUNT": "lots"}}, "count", "expected an integer"),
    ({"env": {"DEMO_FLAG": "maybe"}}, "flag", "expected a boolean"),
    ({"env": {"DEMO_RATIO": "x"}}, "ratio", "expected a number"),
    ({"tables": [({"count": "4"}, "f.toml")]}, "count", "expected an integer"),  # not lenient
    ({"tables": [({"count": True}, "f.toml")]}, "count", "expected an integer"),
    ({"tables": [({"count": 1.5}, "f.toml")]}, "count", "expected an integer"),
    ({"tables": [({"name": 3}, "f.toml")]}, "name", "expected a string"),
    ({"overrides": {"mode": "medium"}}, "mode", "expected one of"),
    ({"overrides": {"tags": [1]}}, "tags", "expected a list of strings"),
    ({"overrides": {"count": None}}, "count", "may not be empty"),
    # out of bounds: where the value came from, not only the key (it said "got 0" alone)
    ({"env": {"DEMO_COUNT": "0"}}, "count", r"count must be >= 1, got 0 \(from environment variable DEMO_COUNT\)"),
    ({"tables": [({"ratio": 2}, "f.toml")]}, "ratio", r"ratio must lie in \(0, 1\], got 2.0 \(from f.toml\)"),
])
def test_bad_values_name_the_key_and_the_source(kwargs: dict[str, Any], key: str, why: str) -> None:
    with pytest.raises(DemoError, match=why) as err:
        load(**kwargs)
    assert err.value.key == key and key in str(err.value) and err.value.source


def test_unknown_keys_and_variables_are_returned_not_raised() -> None:
    loaded = DEMO.load(tables=[({"colour": 1}, "f.toml")], env={"DEMO_NOPE": "1", "OTHER": "x"},
                       overrides={"typo": 1})
    assert [(u.name, u.source, u.is_env) for u in loaded.unclaimed] == [
        ("colour", "f.toml", False), ("DEMO_NOPE", "environment variable DEMO_NOPE", True),
        ("typo", ARGUMENTS, False)]
    assert "colour" in str(DEMO.unknown(loaded.unclaimed[0]))
    assert DEMO.unknown(loaded.unclaimed[1]).key == "DEMO_NOPE"


def test_lenient_sections_parse_strings_from_files_and_arguments() -> None:
    lenient = Section(Demo, error=DemoError, env_prefix="DEMO_", lenient=True)
    loaded = lenient.load(tables=[({"count": "4", "flag": "on", "name": 7}, "f")], overrides={"limit": "9"})
    assert loaded.values == {"count": 4, "flag": True, "name": "7", "limit": 9}


def test_read_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="does not exist") as err:
        read_toml(tmp_path / "missing.toml", DemoError)
    assert err.value.key == "config"
    (tmp_path / "bad.toml").write_text("a = = 1")
    with pytest.raises(DemoError, match="not valid TOML"):
        read_toml(tmp_path / "bad.toml", DemoError)
    (tmp_path / "ok.toml").write_text("[t]\na = 1")
    assert read_toml(tmp_path / "ok.toml", DemoError) == {"t": {"a": 1}}


def test_camel() -> None:
    assert camel("fresh_tail_count") == "freshTailCount"
    assert camel("independent_log_file.max_file_bytes") == "independentLogFile.maxFileBytes"
    assert camel("home") == "home"


@pytest.mark.parametrize(("changes", "key", "why"), [
    ({"count": 0}, "count", "count must be >= 1, got 0"),
    ({"ratio": 0}, "ratio", r"ratio must lie in \(0, 1\], got 0"),
    ({"ratio": float("nan")}, "ratio", "ratio must lie in"),
    ({"count": "3"}, "count", "expected an integer"),
    ({"flag": 1}, "flag", "expected a boolean"),
    ({"mode": "medium"}, "mode", "expected one of"),
])
def test_direct_construction_is_checked_as_loading_is(changes: dict[str, Any], key: str, why: str) -> None:
    with pytest.raises(DemoError, match=why) as err:
        Demo(**changes)
    assert err.value.key == key
    assert Demo(ratio=1).ratio == 1.0 and isinstance(Demo(ratio=1).ratio, float)  # a TOML int is a float
    with pytest.raises(DemoError, match="count must be >= 1"):  # loading ends in the same check
        load(env={"DEMO_COUNT": "0"})


def test_warn_once_says_each_set_of_names_once(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("tests.kernel.settings.warn_once")
    with caplog.at_level(logging.WARNING, logger=log.name):
        for _ in range(3):
            warn_once(log, "not ours: %s", ["b", "a"])
        warn_once(log, "not ours: %s", ["a"])
        warn_once(log, "not ours: %s", [])  # nothing to say
    assert [r.getMessage() for r in caplog.records] == ["not ours: a, b", "not ours: a"]
