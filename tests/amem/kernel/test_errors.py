"""One coded error root: amem's and lcm's trees both subclass it, and share the common kinds."""

from __future__ import annotations

import pytest

import amem.errors as ae
import lcm.errors as le
from amem.kernel.errors import (BadConfigError, CircuitOpenError, IdNotFoundError, InvalidArgumentError,
                                MemoryToolError)
from lcm.recall import ExpansionFailedError


def _tree(root: type[MemoryToolError]) -> set[type[MemoryToolError]]:
    found: set[type[MemoryToolError]] = set()
    todo = [root]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_both_package_roots_stand_under_the_kernel_root() -> None:
    assert issubclass(ae.AmemError, MemoryToolError) and issubclass(le.LcmError, MemoryToolError)
    assert issubclass(ExpansionFailedError, MemoryToolError)
    # every error class either package defines carries its own string code
    for cls in _tree(ae.AmemError) | _tree(le.LcmError):
        assert isinstance(cls.code, str) and cls.code, cls


@pytest.mark.parametrize("amem_cls,lcm_cls,kind,code", [
    (ae.ValidationError, le.LcmValidationError, InvalidArgumentError, "invalid_argument"),
    (ae.ConfigError, le.LcmConfigError, BadConfigError, "config_error"),
    (ae.NotFoundError, le.LcmNotFoundError, IdNotFoundError, "not_found"),
])
def test_the_shared_kinds_are_one_class_each(amem_cls: type, lcm_cls: type, kind: type, code: str) -> None:
    # The same kind, whichever package raised it: one except clause catches both.
    for cls, root in ((amem_cls, ae.AmemError), (lcm_cls, le.LcmError)):
        assert issubclass(cls, kind) and issubclass(cls, root) and cls.code == code
    assert not issubclass(amem_cls, le.LcmError) and not issubclass(lcm_cls, ae.AmemError)


def test_the_kinds_keep_their_fields_and_builtin_bases() -> None:
    bad = ae.ValidationError("limit must be >= 1", field="limit")
    assert isinstance(bad, ValueError) and bad.field == "limit"
    assert le.LcmValidationError("x").field is None
    missing = le.LcmNotFoundError("no summary sum_1", id="sum_1")
    assert isinstance(missing, KeyError) and missing.id == "sum_1"
    assert str(missing) == "no summary sum_1"  # not KeyError's repr with quotes
    assert str(ae.NotFoundError("no note n1", id="n1")) == "no note n1"
    cfg = le.LcmConfigError("bad", key="freshTailCount", source="env")
    assert isinstance(cfg, ValueError) and (cfg.key, cfg.source) == ("freshTailCount", "env")
    assert ae.ConfigError("bad", key="home").key == "home"
    flood = le.ReplayFloodError("flood", role="user", count=9, threshold=8)
    assert isinstance(flood, InvalidArgumentError) and flood.field == "messages"
    assert CircuitOpenError("open").code == "circuit_open"
