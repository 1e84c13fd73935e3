"""Child processes that die with their parent: the engine's build and optimize children.

An index build or an optimize runs in a child process (the engine holds the GIL for minutes).
When the parent was killed (``kill -9``, the OOM killer), such a child used to run on for
seconds to minutes with parent 1, on the live ``shard/`` or on ``shard.build/``: every command
meanwhile found the store busy with no owner to name, and a new build could meet the orphan
still writing its copy.

:func:`child_argv` starts a ``python -c`` child whose first act is :func:`die_with_parent`:
on Linux it asks the kernel to SIGKILL it when the parent dies (``PR_SET_PDEATHSIG``); a
parent that died before that call is caught by comparing ``os.getppid()`` with the pid the
parent passed. Elsewhere only the comparison is left, which the child repeats between its
steps (:func:`exit_if_orphaned`). A killed engine child loses only its own work: the build
on a copy is dropped and ``recover`` cleans it; an optimize of the live shard is the engine's
own crash-safe segment swap.

Standard library only (a kernel module): the child imports it before anything heavy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["ORPHAN_EXIT", "child_argv", "die_with_parent", "exit_if_orphaned"]

#: the exit code of a child that found its parent gone (distinct from the engine's errors)
ORPHAN_EXIT = 75
#: ``<linux/prctl.h>``: deliver a signal to this process when its parent thread exits
_PR_SET_PDEATHSIG = 1

_GUARD = ("import sys\n"
          "from amem.kernel.children import die_with_parent\n"
          "die_with_parent(int(sys.argv.pop(1)))\n")


def child_argv(code: str, *args: str) -> list[str]:
    """The argv of a ``python -c code args...`` child that dies with this process.

    The child's ``sys.argv`` is ``['-c', *args]`` as usual: the parent's pid, passed between
    them, is taken out by the guard before ``code`` runs. The child must import this
    ``amem`` (give it the parent's import path).
    """
    return [sys.executable, "-c", _GUARD + code, str(os.getpid()), *args]


def die_with_parent(parent: int) -> None:
    """Be killed when ``parent`` (this process's parent) dies; exit now if it already has.

    The kernel's parent-death signal is tied to the thread that started the child: the
    parent's thread waits for the child, so it outlives it unless the whole process dies.
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no libc symbol: the pid comparison still runs
            pass
    exit_if_orphaned(parent)


def exit_if_orphaned(parent: int) -> None:
    """Exit at once (``ORPHAN_EXIT``) when this process's parent is no longer ``parent``.

    ``os._exit``: nothing of the child's half-done work is worth a clean shutdown, and the
    engine's own close could block on files the next owner already uses.
    """
    if os.getppid() != parent:
        os._exit(ORPHAN_EXIT)
