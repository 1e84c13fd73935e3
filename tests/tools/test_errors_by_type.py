"""The facade and the CLI recognise an error raised on purpose by its type (the kernel root),
not by the package or module it came from."""

from __future__ import annotations

from tools import ToolFacade
from tools.cli.main import as_cli_error as _as_cli_error
from tools.errors import is_error

from amem.kernel.errors import MemoryToolError


class _ShelfFull(MemoryToolError):
    """An error of the root that is neither amem's nor lcm's (as a plugin's would be)."""

    code = "shelf_full"


class _FullStore:
    """A real object standing in for a store whose every call refuses on purpose."""

    def __getattr__(self, name: str) -> object:
        raise _ShelfFull("the shelf is full")


def test_the_facade_keeps_the_code_of_any_error_of_the_root() -> None:
    facade = ToolFacade(_FullStore(), None, agent_id="alice")  # type: ignore[arg-type]
    out = facade.call("memory_list", {})
    assert is_error(out)
    assert out["error"]["code"] == "shelf_full" and out["error"]["message"] == "the shelf is full"


def test_the_cli_keeps_the_code_of_any_error_of_the_root() -> None:
    err = _as_cli_error(_ShelfFull("the shelf is full"))
    assert err.code == "shelf_full" and str(err) == "the shelf is full"
    assert _as_cli_error(RuntimeError("boom")).code == "internal"
