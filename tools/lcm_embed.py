"""Paying lcm's embedding debt in ``amem serve``: :class:`EmbedWorker` (which also pays the
trigram index debt, ``lcm.trigram``).

Ingest never embeds (it stays fast and works without a model); semantic recall sees a
message once it has a vector. Three things embed the pending ones: ``amem lcm embed``
(``tools.cli.lcm_embed``), the nightly maintenance (``LcmStore.maintenance``), and this worker.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lcm import LcmStore

log = logging.getLogger(__name__)

#: items per ``embed_pending`` call: a progress step, and how long the worker holds a turn
CHUNK = 256
#: messages per trigram payment (one transaction: how long the worker holds the write lock)
TRIGRAM_CHUNK = 2000


class EmbedWorker:
    """A daemon thread that embeds what ingest left pending, while the server runs.

    It wakes every ``interval`` seconds, indexes the messages ingest left out of the trigram
    index (``lcm.trigram``, ``TRIGRAM_CHUNK`` per transaction), then, when the store has an
    embedder, embeds ``CHUNK`` items at a time while any are pending; it logs (never raises) a
    failure, trying again at the next wake-up.
    """

    def __init__(self, store: LcmStore, interval: float = 30.0) -> None:
        self.store = store
        self.interval = interval
        semantic = getattr(store, "semantic", None)
        # a store whose vectors another embedder made refuses to embed (said once, at open):
        # retrying every interval would only repeat the warning
        self.embeds = (getattr(semantic, "embedder", None) is not None
                       and getattr(semantic, "mismatch", None) is None)
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


def start_embed_worker(store: LcmStore | None) -> EmbedWorker | None:
    """The worker for ``amem serve`` (trigram debt always, embedding debt with an embedder), or
    None without a conversation store."""
    if store is None:
        return None
    return EmbedWorker(store).start()
