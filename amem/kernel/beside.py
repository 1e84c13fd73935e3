"""Two steps at once: one on a shared worker thread, the other in the caller's.

A read often has a step that waits for nothing the other produces: amem's BM25 leg needs the
query's terms, not its vector; lcm's word leg, its count of items without a vector and its
scope's mean need neither. When one of the two lets go of the interpreter lock while it works
(onnxruntime while the model runs, SQLite while it steps, a database driver while it waits
for the server), running them side by side saves the shorter one's time on a second core.
Which of the two goes to the worker matters: a step that *holds* the lock (the Qdrant edge
binding keeps it for a whole query) must run here, or the worker cannot start until it ends
(``amem.search.beside`` measured both orders).

The workers are shared by every caller of the process, two of them, and made again in a
forked child, which inherits the pool's object but none of its threads. A background step must
never wait for a lock the caller may hold while it calls :func:`beside` (the caller waits for
the step: that would be a deadlock), and must not call :func:`beside` itself (two such steps
could fill the pool and wait for each other).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable, TypeVar

#: worker threads shared by every caller in the process
WORKERS = 2

A = TypeVar("A")
B = TypeVar("B")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0


def _workers() -> ThreadPoolExecutor:
    """The process's pool, made on first use and again after a fork."""
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="amem-beside")
            _pool_pid = os.getpid()
        return _pool


def beside(background: Callable[[], A], here: Callable[[], B]) -> tuple[A, B]:
    """``background()`` on a worker while ``here()`` runs in this thread; both results.

    An error of either is raised only after both have ended (``here``'s first when both
    fail), so no step outlives the call that started it: a store closed right after an error
    finds nothing of it still running.
    """
    job: Future[A] = _workers().submit(background)
    try:
        mine = here()
    except BaseException:
        wait([job])
        raise
    return job.result(), mine


__all__ = ["WORKERS", "beside"]
