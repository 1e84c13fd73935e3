"""``amem lcm embed``: pay lcm's embedding debt now, in the foreground (``amem serve`` pays it
in the background: ``tools.lcm_embed.EmbedWorker``)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from ..lcm_embed import CHUNK
from .common import Cmd, positive, progress, runtime
from .output import CliError, emit, kv_text

if TYPE_CHECKING:
    from .common import Subparsers


def register(cmd: Cmd, lsub: Subparsers) -> None:
    """Register ``lcm embed`` under ``amem lcm``."""
    p = cmd("embed", cmd_lcm_embed, "embed the messages and summaries semantic recall cannot see "
            "yet (the debt in `amem lcm status`)", into=lsub)
    p.add_argument("--limit", type=int, help="embed at most this many items")
    p.add_argument("--deadline", type=float, metavar="SECONDS",
                   help="stop after this many seconds (a later run carries on)")
    p.add_argument("--switch-embedder", action="store_true",
                   help="the store's vectors were made by another embedder: make this command's "
                        "the store's own and embed every message and summary again")


def cmd_lcm_embed(args: argparse.Namespace) -> int:
    positive(args.limit, "--limit")
    positive(args.deadline, "--deadline")
    done = {"embedded_messages": 0, "embedded_summaries": 0, "batches": 0}
    with runtime(args) as rt:
        store = rt.switch_lcm_embedder() if args.switch_embedder else rt.lcm
        started = time.monotonic()
        embedding = store.status().embedding
        if embedding is None:  # a store without semantic recall (lcm on PostgreSQL, for now)
            raise CliError("semantic recall is not available on this conversation store (PostgreSQL): "
                           "nothing to embed", code="unsupported_on_engine")
        total = embedding.debt
        if args.limit:
            total = min(total, args.limit)
        with progress(args, "embed") as bar:
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
        assert embedding is not None  # it was there before the run
    seconds = time.monotonic() - started
    count = done["embedded_messages"] + done["embedded_summaries"]
    data = {**done, "model_id": embedding.model_id, "seconds": round(seconds, 2),
            "per_second": round(count / seconds, 1) if seconds > 0 and count else 0.0,
            "pending": embedding.debt,
            "stopped": None if embedding.debt == 0 else ("limit" if args.limit else "deadline")}
    emit(args, data, lambda: kv_text(data))
    return 0
