"""Package attributes that load on first use (PEP 562), written once for every package.

A package's ``__init__`` names its public classes, but importing any submodule runs that
``__init__`` first: if it imported the store eagerly, ``import amem.kernel.clock`` or a CLI
command routed to a running server would load the vector engines and numpy for nothing. Each
package therefore maps a public name to the submodule that defines it and resolves it on first
access, then binds it in the package so the next access is a plain attribute read.

    __getattr__, __dir__ = lazy_exports(__name__, {"MemoryStore": ".store"}, __all__)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str], public: Sequence[str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    ``names`` maps an attribute to the submodule (relative to ``package``) that defines it.
    """
    lazy = dict(names)

    def module_getattr(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        vars(sys.modules[package])[name] = value  # the next access is a plain attribute read
        return value

    def module_dir() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return module_getattr, module_dir
