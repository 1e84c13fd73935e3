"""Paying lcm's embedding debt: ``amem lcm embed`` and the server's background worker (which
also pays the trigram index debt, ``lcm.trigram``).

Ingest never embeds (it stays fast and works without a model); semantic recall sees a
message once it has a vector. Three things embed the pending ones: this command, the nightly
maintenance (``LcmStore.maintenance``), and, in ``amem serve``, :class:`EmbedWorker`.
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

#: items per ``embed_pending`` call: a progress step, and how long the worker holds a turn
CHUNK = 256
#: messages per trigram payment (one transaction: how long the worker holds the write lock)
TRIGRAM_CHUNK = 2000


def add_embed_command(cmd: Callable[..., argparse.ArgumentParser], lsub: Any) -> None:
    """Register ``lcm embed`` under ``amem lcm``."""
    p = cmd("embed", cmd_lcm_embed, "embed the messages and summaries semantic recall cannot see "
            "yet (the debt in `amem lcm status`)", into=lsub)
    p.add_argument("--limit", type=int, help="embed at most this many items")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop after this many seconds (a later run carries on)")


def _positive(value: float | None, flag: str) -> None:
    from .cli import CliError

    if value is not None and not value > 0:
        raise CliError(f"{flag} must be a positive number; got {value}", code="invalid_argument",
                       exit_code=2, field=flag.lstrip("-"))


def cmd_lcm_embed(args: argparse.Namespace) -> int:
    from .cli import CliError, _progress, _settings, emit, kv_text
    from .runtime import open_lcm

    _positive(args.limit, "--limit")
    _positive(args.deadline, "--deadline")
    store = open_lcm(_settings(args), required=True)
    started = time.monotonic()
    done = {"embedded_messages": 0, "embedded_summaries": 0, "batches": 0}
    try:
        embedding = store.status().embedding
        if embedding is None:  # a store without semantic recall (lcm on PostgreSQL, for now)
            raise CliError("semantic recall is not available on this conversation store (PostgreSQL): "
                           "nothing to embed", code="unsupported_on_engine")
        total = embedding.debt
        if args.limit:
            total = min(total, args.limit)
        report = None
        with _progress(args, "embed") as bar:
            while True:
                left = None if args.limit is None else args.limit - done["embedded_messages"] - done["embedded_summaries"]
                remaining = None if args.deadline is None else args.deadline - (time.monotonic() - started)
                if left == 0 or (remaining is not None and remaining <= 0):
                    break
                report = store.embed_pending(limit=min(CHUNK, left or CHUNK), deadline_s=remaining)
                for key in done:
                    done[key] += getattr(report, key)
                bar(done["embedded_messages"] + done["embedded_summaries"], total)
                if report.stopped is None or report.stopped == "deadline":
                    break
        embedding = store.status().embedding
    finally:
        store.close()
    seconds = time.monotonic() - started
    count = done["embedded_messages"] + done["embedded_summaries"]
    data = {**done, "model_id": embedding.model_id, "seconds": round(seconds, 2),
            "per_second": round(count / seconds, 1) if seconds > 0 and count else 0.0,
            "pending": embedding.debt,
            "stopped": None if embedding.debt == 0 else ("limit" if args.limit else "deadline")}
    emit(args, data, lambda: kv_text(data))
    return 0


class EmbedWorker:
    """A daemon thread that embeds what ingest left pending, while the server runs.

    It wakes every ``interval`` seconds, indexes the messages ingest left out of the trigram
    index (``lcm.trigram``, ``TRIGRAM_CHUNK`` per transaction), then, when the store has an
    embedder, embeds ``CHUNK`` items at a time while any are pending; it logs (never raises) a
    failure, trying again at the next wake-up.
    """

    def __init__(self, store: Any, interval: float = 30.0) -> None:
        self.store = store
        self.interval = interval
        self.embeds = getattr(getattr(store, "semantic", None), "embedder", None) is not None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lcm-embed", daemon=True)

    def start(self) -> EmbedWorker:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                while not self._stop.is_set() and self.store.index_trigrams(limit=TRIGRAM_CHUNK) == TRIGRAM_CHUNK:
                    pass
            except Exception as exc:  # grep reads the pending tail meanwhile; status shows the debt
                log.warning("lcm: background trigram indexing failed (%s); retrying in %.0f s", exc, self.interval)
            try:
                while self.embeds and not self._stop.is_set():
                    report = self.store.embed_pending(limit=CHUNK)
                    if report.stopped is None:
                        break
            except Exception as exc:  # the server goes on; semantic recall reports the debt
                log.warning("lcm: background embedding failed (%s); retrying in %.0f s", exc, self.interval)
            self._stop.wait(self.interval)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop after the batch in hand (it is stored, or redone by the next run)."""
        self._stop.set()
        self._thread.join(timeout)


def start_embed_worker(store: Any) -> EmbedWorker | None:
    """The worker for ``amem serve`` (trigram debt always, embedding debt with an embedder), or
    None without a conversation store."""
    if store is None:
        return None
    return EmbedWorker(store).start()
