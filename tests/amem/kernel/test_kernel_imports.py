"""``import amem.kernel.*`` (and ``import lcm``) loads no store: the kernel is cheap to depend on."""

from __future__ import annotations

import json
import subprocess
import sys

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
    "amem.kernel.text, amem.kernel.fusion",
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
