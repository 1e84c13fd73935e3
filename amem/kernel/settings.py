"""Settings sections: frozen dataclasses loaded from a TOML table, the environment and arguments.

A section is a frozen dataclass. Each field's metadata (written with :func:`setting`) says how
users spell it; a plain field takes every default below, so most fields need none:

    key          the TOML key                 (default: the field name; camelCase if style="camel")
    aliases      other accepted spellings      (deprecated names; the key itself wins in one layer)
    env          the environment variable      (default: prefix + FIELD_NAME; None: none)
    env_aliases  deprecated variables          (the field's own variable wins over them)
    parse        ``parse(raw, source)`` for a type the loader does not know (a list of rules)
    at_least, above, at_most, below            bounds a value must keep (None passes)
    is_setting   False: not a setting at all   (a derived field such as ``ignored_keys``)

Values are converted by the field's real type (``typing.get_type_hints``, not the annotation
text): ``bool``, ``int``, ``float``, ``str``, ``Path``, ``Literal[...]``, ``tuple[str, ...]``
and ``X | None``. Text (an environment variable; with ``lenient`` any string) is parsed
(``"1"``/``"yes"``/``"off"``, ``"a, b"`` for a list, ``""`` for None); a TOML value must already
have the type, except that an integral float is an int and an int is a float. A dotted key
(``independentLogFile.enabled``) is a nested table: ``[lcm.independentLogFile]`` or the dotted
name both set it.

:meth:`Section.load` merges layers (lowest first) and returns the values and what it could not
place (``unclaimed``); the package's ``load_config`` decides whether an unclaimed key is an
error, a warning or a reported no-op, since only it knows which neighbours share its table.
:meth:`Section.validate`, called from the dataclass's ``__post_init__``, checks every value's
type and bounds however the object was built. Errors are the section's ``BadConfigError``
subclass and name the key and the source.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from .errors import BadConfigError

__all__ = ["setting", "Section", "Spec", "Bounds", "Unclaimed", "Loaded", "camel", "read_toml", "warn_once", "did_you_mean", "ARGUMENTS",
           "TRUE", "FALSE"]

T = TypeVar("T")
#: a parser for a type the loader does not know: ``(raw value, source) -> value``
Parser = Callable[[Any, str], Any]
_DERIVE = "<derive>"  # env metadata default: prefix + FIELD_NAME
#: the source of explicit arguments (``overrides``) in errors and ``Unclaimed``
ARGUMENTS = "arguments"

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


def setting(default: Any = MISSING, *, default_factory: Any = MISSING, key: str | None = None,
            aliases: Iterable[str] = (), env: str | None = _DERIVE, env_aliases: Iterable[str] = (),
            parse: Parser | None = None, at_least: float | None = None, above: float | None = None,
            at_most: float | None = None, below: float | None = None, is_setting: bool = True,
            compare: bool = True) -> Any:
    """A dataclass field with the metadata :class:`Section` reads (see the module docstring)."""
    meta = {"key": key, "aliases": tuple(aliases), "env": env, "env_aliases": tuple(env_aliases),
            "parse": parse, "setting": is_setting, "bounds": Bounds(at_least, above, at_most, below)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, compare=compare, metadata=meta)
    return dataclasses.field(default=default, compare=compare, metadata=meta)


def camel(name: str) -> str:
    """``fresh_tail_count`` -> ``freshTailCount`` (each dotted part on its own)."""
    def one(part: str) -> str:
        head, *rest = part.split("_")
        return head + "".join(w[:1].upper() + w[1:] for w in rest)

    return ".".join(one(p) for p in name.split("."))


@dataclass(frozen=True)
class Bounds:
    """The range a number must keep; each end is optional, inclusive (``at_*``) or not."""

    at_least: float | None = None
    above: float | None = None
    at_most: float | None = None
    below: float | None = None

    def why_not(self, value: float) -> str | None:
        """None when ``value`` keeps the bounds, else what it must be (NaN keeps none)."""
        ok = ((self.at_least is None or value >= self.at_least) and (self.above is None or value > self.above)
              and (self.at_most is None or value <= self.at_most) and (self.below is None or value < self.below))
        if ok:
            return None
        low = f"[{self.at_least:g}" if self.at_least is not None else (
            f"({self.above:g}" if self.above is not None else None)
        high = f"{self.at_most:g}]" if self.at_most is not None else (
            f"{self.below:g})" if self.below is not None else None)
        if low and high:
            return f"lie in {low}, {high}"
        if low:
            return (">= " if low[0] == "[" else "> ") + low[1:]
        return ("<= " if high and high[-1] == "]" else "< ") + (high or "")[:-1]


@dataclass(frozen=True)
class Spec:
    """One field as users see it."""

    attr: str
    key: str
    aliases: tuple[str, ...]
    env: str | None
    env_aliases: tuple[str, ...]
    kind: Any
    parse: Parser | None
    bounds: Bounds = Bounds()


@dataclass(frozen=True)
class Unclaimed:
    """A key or variable no field of the section takes; ``source`` says where it was."""

    name: str
    source: str
    is_env: bool


@dataclass(frozen=True)
class Loaded(Generic[T]):
    """What :meth:`Section.load` found: the field values and what it could not place."""

    values: dict[str, Any]
    unclaimed: tuple[Unclaimed, ...]


class Section(Generic[T]):
    """The loader of one settings dataclass (built once per class, at import)."""

    def __init__(self, cls: type[T], *, error: type[BadConfigError], env_prefix: str | None,
                 style: Literal["snake", "camel"] = "snake", lenient: bool = False) -> None:
        """Args:
            cls: the frozen dataclass.
            error: the package's config error (raised with ``key`` and ``source``).
            env_prefix: the prefix of every variable of this section (``AMEM_``, ``LCM_``);
                None: only the variables fields name (none by default).
            style: how keys are spelled by default; the field name is always accepted too.
            lenient: a string from a file or an argument is parsed like an environment value
                (amem's rule: the command line hands its flags over as text).
        """
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        self.cls = cls
        self.error = error
        self.env_prefix = env_prefix
        self.lenient = lenient
        hints = typing.get_type_hints(cls)
        self.specs: dict[str, Spec] = {}  # by key, in field order
        for f in dataclasses.fields(cls):
            meta = f.metadata
            if not meta.get("setting", True):
                continue
            key = meta.get("key") or (camel(f.name) if style == "camel" else f.name)
            env = meta.get("env", _DERIVE)
            if env == _DERIVE:
                env = None if env_prefix is None else env_prefix + f.name.upper()
            self.specs[key] = Spec(f.name, key, tuple(meta.get("aliases", ())), env,
                                   tuple(meta.get("env_aliases", ())), hints[f.name], meta.get("parse"),
                                   meta.get("bounds", Bounds()))
        self._lookup: dict[str, Spec] = {}
        for spec in self.specs.values():
            for name in (*spec.aliases, spec.attr, camel(spec.attr), spec.key):  # key wins a clash
                self._lookup[name] = spec
        self._aliases = {a for s in self.specs.values() for a in s.aliases}
        self._tables = {k.split(".")[0] for k in self.specs if "." in k}
        self.env_names: dict[str, Spec] = {s.env: s for s in self.specs.values() if s.env}
        self.by_attr: dict[str, Spec] = {s.attr: s for s in self.specs.values()}

    # -- lookup ------------------------------------------------------------------------------

    def spec(self, name: str) -> Spec | None:
        """The field a key names, in any accepted spelling (None if none)."""
        return self._lookup.get(name) or self._lookup.get(camel(name))

    def flatten(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """Nested tables of dotted keys become dotted names; any other value stays as it is."""
        out: dict[str, Any] = {}
        for key, value in table.items():
            if isinstance(value, Mapping) and camel(key) in self._tables:
                for sub, subvalue in value.items():
                    out[f"{camel(key)}.{sub}"] = subvalue
            else:
                out[key] = value
        return out

    # -- conversion --------------------------------------------------------------------------

    def convert(self, spec: Spec, raw: Any, source: str, *, text: bool = False) -> Any:
        """``raw`` as the field's type, or the section's error naming the key and the source.

        ``text``: the value is text to parse (an environment variable); with ``lenient``
        every string is.
        """
        if spec.parse is not None:
            return spec.parse(raw, source)
        # lenient: amem has always taken `embed_threads = "4"` or `agent_id = 7` from a file
        text = text or (self.lenient and isinstance(raw, (str, int, float)) and not isinstance(raw, bool))
        try:
            return _convert(spec.kind, raw, text)
        except (TypeError, ValueError) as exc:
            raise self.error(f"invalid value {raw!r} for {spec.key} (from {source}): {exc}",
                             key=spec.key, source=source) from None

    # -- loading -----------------------------------------------------------------------------

    def load(self, *, base: Mapping[str, Any] | None = None,
             tables: Iterable[tuple[Mapping[str, Any], str]] = (),
             env: Mapping[str, str] | None = None,
             overrides: Mapping[str, Any] | None = None) -> Loaded[T]:
        """Merge ``base`` < each TOML table < ``env`` < ``overrides`` into field values.

        ``tables`` are ``(table, source)`` pairs (the source names the file). Keys and
        ``env_prefix`` variables no field takes are returned, not raised: the caller knows
        whether a neighbour owns them (an unknown override has the source ``ARGUMENTS``).
        """
        values: dict[str, Any] = dict(base or {})
        sources: dict[str, str] = {}
        unclaimed: list[Unclaimed] = []
        for table, source in tables:
            unclaimed += self._apply(values, self.flatten(table), source, text=False, sources=sources)
        if env:
            unclaimed += self._apply_env(values, env, sources)
        if overrides:
            unclaimed += self._apply(values, self.flatten(overrides), ARGUMENTS, text=False,
                                     sources=sources)
        self._check_bounds(values, sources)
        return Loaded(values, tuple(unclaimed))

    def _check_bounds(self, values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
        """A value out of bounds names where it came from (``validate`` knows only the key:
        ``schedule_hour must lie in [0, 23], got 25`` left the reader to find which file or
        variable said 25)."""
        for spec in self.specs.values():
            if spec.attr in sources and spec.parse is None:
                why = _out_of_bounds(spec.bounds, values[spec.attr])
                if why:
                    source = sources[spec.attr]
                    raise self.error(f"{spec.key} must {why}, got {values[spec.attr]!r} (from {source})",
                                     key=spec.key, source=source)

    def _apply(self, values: dict[str, Any], layer: Mapping[str, Any], source: str, *,
               text: bool, sources: dict[str, str] | None = None) -> list[Unclaimed]:
        # A deprecated alias first, so the key's own spelling wins within one layer; a later
        # layer still wins over both.
        unclaimed: list[Unclaimed] = []
        for key, raw in sorted(layer.items(), key=lambda kv: kv[0] not in self._aliases):
            spec = self.spec(key)
            if spec is None:
                unclaimed.append(Unclaimed(key, source, is_env=False))
                continue
            values[spec.attr] = self.convert(spec, raw, source, text=text)
            if sources is not None:
                sources[spec.attr] = source
        return unclaimed

    def _apply_env(self, values: dict[str, Any], env: Mapping[str, str],
                   sources: dict[str, str] | None = None) -> list[Unclaimed]:
        known = set(self.env_names)
        aliases = {a: s for s in self.specs.values() for a in s.env_aliases}
        unclaimed = [Unclaimed(var, f"environment variable {var}", is_env=True) for var in env
                     if self.env_prefix is not None and var.startswith(self.env_prefix)
                     and var not in known and var not in aliases]
        for var, spec in [*aliases.items(), *self.env_names.items()]:  # own variable last: it wins
            if var in env:
                values[spec.attr] = self.convert(spec, env[var], f"environment variable {var}", text=True)
                if sources is not None:
                    sources[spec.attr] = f"environment variable {var}"
        return unclaimed

    def unknown(self, item: Unclaimed, also: Iterable[str] = ()) -> BadConfigError:
        """The error for a key or variable nobody takes, with the nearest known spelling.

        ``also``: the names the table's or the namespace's other owners take (a neighbour's
        key is a fine suggestion for a typo in a shared table).
        """
        if item.is_env:
            hint = did_you_mean(item.name, [*self.env_names, *also])
            return self.error(f"unknown environment variable {item.name}{hint}", key=item.name,
                              source=item.source)
        hint = did_you_mean(item.name, [*self.specs, *also])
        return self.error(f"unknown config key {item.name!r} (from {item.source}){hint}",
                          key=item.name, source=item.source)

    def build(self, values: Mapping[str, Any]) -> T:
        """The dataclass from field values (its ``__post_init__`` validates)."""
        return self.cls(**values)

    def validate(self, obj: T) -> None:
        """Check every setting of a built dataclass against its type and bounds; call from
        ``__post_init__`` (frozen), so direct construction is checked as loading is.

        A value of a TOML shape is stored in the field's (a list as a tuple, an int as a float,
        a rule table through the field's parser); a wrong type or a value out of bounds is the
        section's error naming the key.
        """
        for spec in self.specs.values():
            value = getattr(obj, spec.attr)
            if spec.parse is not None:
                converted = spec.parse(value, "constructor")
            else:
                try:
                    converted = _convert(spec.kind, value, text=False)
                except (TypeError, ValueError) as exc:
                    raise self.error(f"invalid value {value!r} for {spec.key}: {exc}", key=spec.key,
                                     source="constructor") from None
                why = _out_of_bounds(spec.bounds, converted)
                if why:
                    raise self.error(f"{spec.key} must {why}, got {value!r}", key=spec.key, source="constructor")
            if converted is not value:
                object.__setattr__(obj, spec.attr, converted)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the known names closest to a misspelt one, else ``""``.

    Case and ``-``/``_`` are ignored when comparing (``AMEM_RRF_k``, ``fresh-tail-count``),
    so a case slip finds its name whatever its distance.
    """
    def fold(text: str) -> str:
        return text.lower().replace("-", "_").replace(".", "_")

    by_fold: dict[str, str] = {}
    for candidate in known:
        by_fold.setdefault(fold(candidate), candidate)
        if "_" in candidate and candidate == candidate.lower():  # a snake key is also camel
            by_fold.setdefault(fold(camel(candidate)), candidate)
    close = difflib.get_close_matches(fold(name), list(by_fold), n=2, cutoff=0.75)
    names = list(dict.fromkeys(by_fold[c] for c in close))
    if not names:
        return ""
    return "; did you mean " + " or ".join(repr(n) for n in names) + "?"


def warn_once(log: logging.Logger, message: str, names: Iterable[str]) -> None:
    """Log ``message`` (a ``%s`` for the names) once per process for each set of names: a
    server or a script loads its config many times, and one warning says it."""
    key = (log.name, message, tuple(sorted(set(names))))
    if key[2] and key not in _WARNED:
        _WARNED.add(key)
        log.warning(message, ", ".join(key[2]))


#: what warn_once has already said in this process
_WARNED: set[tuple[str, str, tuple[str, ...]]] = set()


def read_toml(path: str | os.PathLike[str], error: type[BadConfigError]) -> dict[str, Any]:
    """The parsed file; a missing or malformed file is ``error`` naming the path (key ``config``)."""
    where = Path(path).expanduser()
    try:
        return tomllib.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"config file {where} does not exist (not found)", key="config",
                    source=str(where)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"config file {where} cannot be read: {exc}", key="config", source=str(where)) from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"config file {where} is not valid TOML: {exc}", key="config", source=str(where)) from None


def _out_of_bounds(bounds: Bounds, value: Any) -> str | None:
    if value is None or bounds == Bounds() or not isinstance(value, (int, float)):
        return None
    why = bounds.why_not(value)
    return None if why is None else (why if why.startswith("lie") else "be " + why)


def _convert(kind: Any, raw: Any, text: bool) -> Any:
    """``raw`` as ``kind``; ValueError says what was expected."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if raw is None or (text and isinstance(raw, str) and raw.strip() == ""):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported setting type {kind!r}")
        return _convert(inner[0], raw, text)
    if raw is None:
        raise ValueError("may not be empty")
    if origin is Literal:
        if isinstance(raw, str) and raw.strip() in args:
            return raw.strip()
        raise ValueError(f"expected one of {list(args)}")
    if origin is tuple:
        if text and isinstance(raw, str):
            return tuple(p.strip() for p in raw.split(",") if p.strip())
        if isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
            return tuple(raw)
        raise ValueError("expected a list of strings")
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if text and str(raw).strip().lower() in TRUE | FALSE:
            return str(raw).strip().lower() in TRUE
        raise ValueError("expected a boolean (1/0, true/false)")
    if kind is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if text and isinstance(raw, str) and _parses(int, raw):
            return int(raw.strip())
        raise ValueError("expected an integer")
    if kind is float:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        if text and isinstance(raw, str) and _parses(float, raw):
            return float(raw.strip())
        raise ValueError("expected a number")
    if kind is Path:
        if isinstance(raw, (str, Path)):
            return Path(raw).expanduser()
        raise ValueError("expected a path")
    if kind is str:
        if isinstance(raw, str):
            return raw
        if text and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return str(raw)
        raise ValueError("expected a string")
    raise TypeError(f"unsupported setting type {kind!r}")



def _parses(kind: type, text: str) -> bool:
    """Whether ``kind(text)`` (int or float) accepts the text."""
    try:
        kind(text.strip())
    except ValueError:
        return False
    return True
