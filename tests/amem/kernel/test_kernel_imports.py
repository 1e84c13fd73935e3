"""``import amem.kernel.*`` (and ``import lcm``) loads no store: the kernel is cheap to depend on."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

_HEAVY = ("amem.store", "amem.backends", "amem.embed", "qdrant_client", "qdrant_edge", "numpy")


def _loaded_after(statement: str) -> list[str]:
    """The heavy modules present in ``sys.modules`` after ``statement`` ran in a fresh interpreter."""
    probe = (f"import sys, json\n{statement}\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({_HEAVY!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


@pytest.mark.parametrize("statement", [
    "import amem.kernel",
    "import amem.kernel.errors, amem.kernel.clock, amem.kernel.llm, amem.kernel.breaker, "
    "amem.kernel.text, amem.kernel.fusion, amem.kernel.lazy",
    "import lcm",
])
def test_importing_the_kernel_or_lcm_loads_no_store(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_the_public_names_still_load_on_first_use() -> None:
    # The lazy ``amem/__init__`` must not lose a name: each resolves to the real object.
    probe = ("import amem, sys\n"
             "from amem.store import MemoryStore\n"
             "assert amem.MemoryStore is MemoryStore\n"
             "from amem import AmemError, AmemConfig, Note, load_config\n"
             "assert set(amem.__all__) <= set(dir(amem))\n"
             "print(amem.__version__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import amem
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        getattr(amem, "nothing_here")


_ROOT = Path(__file__).resolve().parents[3]


def _imported_modules(path: Path) -> set[str]:
    """Every module an ``import`` names in ``path``, wherever it stands (TYPE_CHECKING, functions)."""
    names: set[str] = set()
    package = ".".join(path.relative_to(_ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
    return names


def test_lcm_takes_only_the_kernel_from_amem() -> None:
    offenders = {f"{path.relative_to(_ROOT)}: {name}"
                 for path in sorted((_ROOT / "lcm").rglob("*.py"))
                 for name in _imported_modules(path)
                 if (name == "amem" or name.startswith("amem.")) and not name.startswith("amem.kernel")}
    assert offenders == set()


def test_the_kernel_imports_only_itself_and_the_standard_library() -> None:
    for path in sorted((_ROOT / "amem" / "kernel").rglob("*.py")):
        for name in _imported_modules(path):
            top = name.split(".")[0]
            assert name.startswith("amem.kernel") or (top in sys.stdlib_module_names and top != "amem"), \
                f"{path.relative_to(_ROOT)} imports {name}"
