"""Semantic recall: a vector per message and summary, embedded off the ingest path, scanned with numpy.

1. ``bind``: record the embedder's model. A different model is recorded only when the store
   holds no vector of the recorded one, or when the caller asks to switch (``switch_embedder``):
   then every vector is stale (logged, and shown by ``status`` until the debt is paid).
   Otherwise the store keeps its model and refuses semantic recall and embedding with
   ``EmbedderMismatchError`` (logged at open, ``status().embedding.given_model_id``): a setting
   that alternates between two embedders must not re-embed every message at each change.
2. ``embed_pending``: the items without a vector of the current model, in id order and in
   batches: read a batch under the lock, encode it without the lock, store it in one
   transaction. A killed process loses at most the batch it was encoding, and nothing
   stored is encoded again: what is pending is always read from the tables.
3. ``search``: the query's vector against the scope's vectors, ``SCAN_BATCH`` rows at a time
   (the database lock is released between batches), keeping the running top k.
4. ``grep``: ``semantic`` ranks by cosine; ``hybrid`` takes candidates from the vectors and
   from the full-text index read with the question's words OR-ed (function words left out;
   full_text mode ANDs them: a question verbatim, whose every word is rarely in the one turn
   that answers it, finds nothing there), and ranks them by :mod:`lcm.hybrid`: amem's BM25
   over each candidate's date and text, z-score fused with its cosine. Text not embedded yet
   is still found by its words. Both modes rank by the question moved off the scope's mean
   vector (``queryCentering``; ``_scope_mean``): in a chat every turn carries a speaker's
   name, and so does the question; semantic hits show the question's own cosines. What needs
   no vector (the word leg, the count of items without one, the scope's mean) is read on a
   worker while the question is embedded (``amem.kernel.beside``).

The exact scan costs about 1.3-3.5 microseconds per vector in scope, 70% of it SQLite handing
over the rows (RESULTS.md, "LCM semantic recall"): well under a second up to about 100k items,
seconds at 1M, where vectors stored in blocks or an approximate index would be the next step.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcm.config import LcmConfig
from lcm.conn import Handle
from lcm.db import sqlite_only
from lcm.errors import EmbedderMismatchError, EmbedderMissingError, LcmValidationError
from lcm.hybrid import CANDIDATES, candidate_bm25, date_label, fuse, index_words
from lcm.models import EmbeddingStatus, EmbedReport, GrepHit, GrepResult
from amem.kernel.beside import beside
from amem.kernel.fusion import rrf
from lcm.newest import SOURCES
from lcm.pg.url import is_postgres_url
from lcm.search import _scope_sql, build_fts_query
from lcm.tokens import is_cjk_text
from lcm.trigram import indexed_upto, like_pattern
from lcm.vectors import TextEmbedder, mean_of, off_mean, pack, top_k, unpack_scores

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

__all__ = ["SemanticIndex", "recorded_model", "ScanCut", "SCAN_BATCH", "EMBED_TEXT_CHARS", "NIGHTLY_EMBED_SECONDS"]

#: vectors read per turn of the database lock (384-dim int8: 1.5 MB, a few ms of numpy)
SCAN_BATCH = 4096
#: characters of an item that are embedded: e5 reads 512 tokens, the rest only costs tokenizing
EMBED_TEXT_CHARS = 2000
#: texts per encoder call in embed_pending (and per committed transaction)
EMBED_BATCH = 32
#: how long the nightly job embeds before leaving the rest for the next night (or amem lcm embed)
NIGHTLY_EMBED_SECONDS = 900.0
#: candidates each list contributes to a fusion, per hit asked for
_POOL = 4
#: characters of a candidate hybrid's BM25 reads: what the embedder reads of it too, so both
#: legs judge the same text. Tokenising costs ~0.6 ms per 2,000 characters: the worst grep
#: (limit 200, messages and summaries, every candidate that long: 3,200) stays near 2 s.
SCORED_TEXT_CHARS = EMBED_TEXT_CHARS


class ScanCut(Exception):
    """Raised by an engine's :meth:`SemanticIndex._scan` when its deadline stopped a fetch:
    rows were left unread, so the search reports itself late."""


@dataclass(frozen=True)
class _Src:
    table: str
    rowid: str
    vectors: str
    key: str


_SRC = {
    "message": _Src("messages", "id", "message_vectors", "message_id"),
    "summary": _Src("summaries", "pk", "summary_vectors", "summary_pk"),
}
_KINDS = {"messages": ("message",), "summaries": ("summary",), "both": ("message", "summary")}
#: a semantic or hybrid grep moves its question off the mean of the scope's first vectors by
#: id (a conversation's first 1,000 turns; amem's step 1b reads the same kind of sample) ...
CENTROID_SAMPLE = 1000
#: ... when the scope holds at least this many: fewer have no mean worth moving off
CENTROID_MIN = 50
#: scopes whose mean is kept (a conversation's, a session's window...), oldest out first
MEANS_KEPT = 256


def recorded_model(database: str | Path) -> str | None:
    """The embedder a SQLite conversation store records (``lcm_embedder``), read-only: None for
    no such file, a store that records none, a file that is no readable store (opening it
    says why), or a server URL (a host sharing a PostgreSQL store names its embedder).

    A caller choosing no embedder opens the store with this one, as the notes store opens with
    the one its ``meta.json`` names: else each read would record another model (``bind``) and
    owe a re-embed of every message.
    """
    text = str(database)
    if is_postgres_url(text) or text == ":memory:":
        return None
    path = Path(text).expanduser()
    if not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as c:
            row = c.execute("SELECT model_id FROM lcm_embedder WHERE id = 1").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row is not None and row[0] else None


class SemanticIndex:
    """The vectors of one store, for one embedder (or none: then only ``status`` works)."""

    def __init__(self, db: Handle, cfg: LcmConfig, embedder: TextEmbedder | None) -> None:
        self.db, self.cfg, self.embedder = db, cfg, embedder
        # One embedding run at a time per store: the server's worker and the nightly job would
        # otherwise both encode the same pending batch (correct, but twice the CPU).
        self._run_lock = threading.Lock()
        #: each scope's mean vector with what it was read from (``_scope_mean``), under its lock
        #: (greps of a server's threads share it)
        self._means: dict[tuple[Any, ...], tuple[tuple[Any, ...], np.ndarray]] = {}
        self._means_lock = threading.Lock()
        #: (recorded model, given model) when the store's vectors are another embedder's and
        #: the caller did not ask to switch (``bind``); None when the embedder is the store's
        self.mismatch: tuple[str, str] | None = None

    def _need(self) -> TextEmbedder:
        if self.embedder is None:
            raise EmbedderMissingError(
                "semantic recall needs an embedder and this conversation store has none "
                "(LcmStore(embedder=...); amem hands it the note store's embedder)")
        if self.mismatch is not None:
            stored, given = self.mismatch
            raise EmbedderMismatchError(
                f"this conversation store's vectors were made by {stored!r}, not by {given!r} given "
                f"here: open it with {stored!r} (amem: --embedder / AMEM_EMBEDDER), or switch it to "
                f"{given!r} with LcmStore(..., switch_embedder=True) (amem: `amem lcm embed "
                "--switch-embedder`), which re-embeds every message and summary", stored=stored, given=given)
        return self.embedder

    def need(self, scope: str) -> None:
        """Refuse a semantic or hybrid grep this store cannot run, before it reads anything."""
        self._need()
        if scope not in _KINDS:
            raise LcmValidationError("modes semantic and hybrid search messages and summaries; "
                                     f"scope must be one of {list(_KINDS)}", field="scope")

    # 1 -------------------------------------------------------------------------------------------
    def bind(self, now: str, *, switch: bool = False) -> str | None:
        """Record the embedder's model; returns the previous model when it changed.

        A store whose vectors another model made keeps that model unless ``switch``: it is
        marked mismatched instead (``self.mismatch``), which refuses semantic recall and
        embedding and says why, rather than owing a re-embed of every message.
        """
        self.mismatch = None
        if self.embedder is None:
            return None
        model, dim = str(self.embedder.model_id), int(self.embedder.dim)
        with self.db.atomic() as c:
            row = c.execute("SELECT model_id, dim FROM lcm_embedder WHERE id = 1").fetchone()
            if row is not None and (row["model_id"], row["dim"]) == (model, dim):
                return None
            previous = None if row is None else str(row["model_id"])
            if previous is not None and not switch:
                held = sum(int(c.execute(f"SELECT count(*) FROM {src.vectors} WHERE model_id = ?",
                                         (previous,)).fetchone()[0]) for src in _SRC.values())
                if held:
                    self.mismatch = (previous, model)
                    log.warning("lcm: this conversation store's %d vectors were made by %s, not by %s "
                                "given here: semantic recall and embedding are refused and nothing is "
                                "re-embedded; open it with %s, or pass switch_embedder=True to "
                                "re-embed every message with %s", held, previous, model, previous, model)
                    return None
            # an upsert both engines speak (PostgreSQL has no INSERT OR REPLACE)
            c.execute("INSERT INTO lcm_embedder(id, model_id, dim, previous_model_id, changed_at) "
                      "VALUES (1, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET model_id = excluded.model_id, "
                      "dim = excluded.dim, previous_model_id = excluded.previous_model_id, "
                      "changed_at = excluded.changed_at", (model, dim, previous, now))
        if previous is not None:
            log.warning("lcm: the embedder changed from %s to %s: every message and summary is "
                        "re-embedded (amem lcm embed, or the nightly job); until then semantic "
                        "recall sees only what has been", previous, model)
        return previous

    def status(self) -> EmbeddingStatus:
        with self.db.reading() as c:
            row = c.execute("SELECT * FROM lcm_embedder WHERE id = 1").fetchone()
            model = None if row is None else str(row["model_id"])
            have, stale, failed, pending = 0, 0, 0, {}
            for kind, src in _SRC.items():
                total = int(c.execute(f"SELECT count(*) FROM {src.table}").fetchone()[0])
                mine = int(c.execute(f"SELECT count(*) FROM {src.vectors} WHERE model_id = ?", (model,)).fetchone()[0])
                bad = int(c.execute(f"SELECT count(*) FROM {src.vectors} WHERE model_id = ? AND length(vector) = 0",
                                    (model,)).fetchone()[0])
                stale += int(c.execute(f"SELECT count(*) FROM {src.vectors}").fetchone()[0]) - mine
                have += mine - bad
                failed += bad
                pending[kind] = total - mine if model is not None else 0
        return EmbeddingStatus(model, None if row is None else int(row["dim"]), have, pending["message"],
                               pending["summary"], pending["message"] + pending["summary"], stale,
                               None if row is None else row["previous_model_id"], failed,
                               given_model_id=None if self.mismatch is None else self.mismatch[1])

    # 2 -------------------------------------------------------------------------------------------
    def embed_pending(self, *, limit: int | None = None, deadline_s: float | None = None,
                      batch_size: int = EMBED_BATCH) -> EmbedReport:
        """Embed items that have no vector of the current model: messages first, oldest first.

        Stops after ``limit`` items or once ``deadline_s`` seconds have passed (checked between
        batches); the next call carries on where this one stopped.
        """
        emb = self._need()
        for name, value in (("limit", limit), ("batch_size", batch_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise LcmValidationError(f"{name} must be a positive integer", field=name)
        if deadline_s is not None and (isinstance(deadline_s, bool) or not deadline_s > 0):
            raise LcmValidationError("deadline_s must be a positive number of seconds", field="deadline_s")
        with self._run_lock:
            return self._embed(emb, limit, deadline_s, batch_size)

    def _embed(self, emb: TextEmbedder, limit: int | None, deadline_s: float | None, batch_size: int) -> EmbedReport:
        model = str(emb.model_id)
        started = time.monotonic()
        done = {"message": 0, "summary": 0}
        batches, failed, stopped = 0, 0, None
        for kind, src in _SRC.items():
            after = 0
            while stopped is None:
                left = None if limit is None else limit - done["message"] - done["summary"]
                if left == 0:
                    stopped = "limit"
                elif deadline_s is not None and time.monotonic() - started >= deadline_s:
                    stopped = "deadline"
                if stopped is not None:
                    break
                rows = self.db.query(
                    f"SELECT t.{src.rowid}, substr(t.content, 1, ?) FROM {src.table} t WHERE t.{src.rowid} > ? "
                    f"AND NOT EXISTS (SELECT 1 FROM {src.vectors} v WHERE v.{src.key} = t.{src.rowid} "
                    f"AND v.model_id = ?) ORDER BY t.{src.rowid} LIMIT ?",
                    (EMBED_TEXT_CHARS, after, model, batch_size if left is None else min(batch_size, left)))
                if not rows:
                    break
                texts = [str(r[1]) for r in rows]
                packed = self._encode(emb, texts)  # outside the lock: readers go on
                with self.db.atomic() as c:
                    for r, text, one in zip(rows, texts, packed):
                        # An item the embedder failed on alone gets an empty vector: searches skip
                        # it (wrong length) and it no longer holds up the queue behind it.
                        scale, blob = one if one is not None else (0.0, b"")
                        failed += one is None
                        # Only if the item still exists with the text that was embedded.
                        c.execute(f"INSERT INTO {src.vectors}({src.key}, conversation_id, model_id, "
                                  f"scale, vector) SELECT {src.rowid}, conversation_id, ?, ?, ? FROM {src.table} "
                                  f"WHERE {src.rowid} = ? AND substr(content, 1, ?) = ? ON CONFLICT({src.key}) "
                                  "DO UPDATE SET conversation_id = excluded.conversation_id, model_id = "
                                  "excluded.model_id, scale = excluded.scale, vector = excluded.vector",
                                  (model, scale, blob, r[0], EMBED_TEXT_CHARS, text))
                done[kind] += len(rows)
                batches += 1
                after = int(rows[-1][0])
        left_total = self.status().debt
        return EmbedReport(model, done["message"], done["summary"], batches,
                           round(time.monotonic() - started, 3), left_total, stopped, failed)

    def _encode(self, emb: TextEmbedder, texts: list[str]) -> list[tuple[float, bytes] | None]:
        """Packed vectors of ``texts``; after a failed batch, each text alone (None: it failed).

        If every text fails alone too, the embedder itself is broken: the first error is raised
        and nothing is marked, so the items stay pending for a working embedder.
        """
        try:
            return [pack(v) for v in _checked(emb, emb.embed(texts, kind="passage"), len(texts))]
        except Exception as exc:  # any encoder failure: find out whether one text causes it
            if len(texts) == 1:
                raise
            out: list[tuple[float, bytes] | None] = []
            for text in texts:
                try:
                    out.append(pack(_checked(emb, emb.embed([text], kind="passage"), 1)[0]))
                except Exception as one:  # this text only: marked, logged, counted
                    log.warning("lcm: the embedder failed on one text (%d chars): %s", len(text), one)
                    out.append(None)
            if all(o is None for o in out):
                raise exc
            return out

    # 3 -------------------------------------------------------------------------------------------
    def _filter(self, kind: str, conv_ids: list[int] | None, since: str | None,
                before: str | None, conv: str = "t") -> tuple[str, str, list[object]]:
        """The join and WHERE clause that put an item in scope: grep's own scope rule
        (``lcm.search._scope_sql``) on ``t``, the item. A scan of the vectors (``conv="v"``)
        without a time window reads the conversation from the vector row and needs no join."""
        if conv == "v" and not (since or before):
            where, params = _scope_sql("v", conv_ids, None, None, kind)
            return "", where, params
        where, params = _scope_sql("t", conv_ids, since, before, kind)
        src = _SRC[kind]
        join = "" if conv == "t" else f" JOIN {src.table} t ON t.{src.rowid} = v.{src.key}"
        return join, where, params

    def search(self, kind: str, query: np.ndarray, conv_ids: list[int] | None, since: str | None,
               before: str | None, k: int, deadline: float) -> tuple[list[tuple[int, float]], int, bool]:
        """The ``k`` nearest items of one kind as (rowid, cosine), rows scanned, stopped at deadline."""
        import numpy as np

        emb = self._need()
        src, dim = _SRC[kind], int(emb.dim)
        join, where, params = self._filter(kind, conv_ids, since, before, conv="v")
        sql = (f"SELECT v.{src.key}, v.scale, v.vector FROM {src.vectors} v{join} WHERE v.model_id = ? "
               f"AND length(v.vector) = ? AND {where}")
        best_ids, best = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scanned, late = 0, False
        batches = self._scan(sql, [str(emb.model_id), dim, *params], deadline)
        try:
            for rows in batches:
                if scanned and time.monotonic() > deadline:  # rows left unread: say so
                    late = True
                    break
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                scores = unpack_scores([r[2] for r in rows], [r[1] for r in rows], dim, query)
                best_ids, best = top_k(np.concatenate([best_ids, ids]), np.concatenate([best, scores]), k)
                scanned += len(rows)
        except ScanCut:  # the engine's own deadline stopped a fetch (PostgreSQL's statement_timeout)
            late = True
        finally:
            batches.close()
        return [(int(i), float(s)) for i, s in zip(best_ids, best)], scanned, late

    def _scan(self, sql: str, params: list[object], deadline: float) -> Generator[list[Any], None, None]:
        """The rows of the vector scan ``sql``, ``SCAN_BATCH`` at a time (the engine's part of
        :meth:`search`): SQLite's cursor steps under the database lock, released between batches."""
        with self.db.reading() as c:
            cursor = c.execute(sql, params)
        try:
            while True:
                with self.db.reading():
                    rows = cursor.fetchmany(SCAN_BATCH)
                if not rows:
                    return
                yield rows
        finally:
            with self.db.reading():
                cursor.close()

    def not_embedded(self, kinds: tuple[str, ...], conv_ids: list[int] | None, since: str | None,
                     before: str | None) -> int:
        """In-scope items without a vector of the current model (semantic search cannot see them)."""
        model = str(self._need().model_id)
        n = 0
        for kind in kinds:
            src = _SRC[kind]
            _, where, params = self._filter(kind, conv_ids, since, before)
            n += int(self.db.scalar(
                f"SELECT count(*) FROM {src.table} t WHERE {where} AND NOT EXISTS (SELECT 1 FROM "
                f"{src.vectors} v WHERE v.{src.key} = t.{src.rowid} AND v.model_id = ? AND length(v.vector) > 0)",
                [*params, model]))
        return n

    # 4 -------------------------------------------------------------------------------------------
    def grep(self, pattern: str, *, mode: str, scope: str, conv_ids: list[int] | None, since: str | None,
             before: str | None, limit: int, sort: str) -> GrepResult:
        emb = self._need()
        kinds = _KINDS[scope]
        # the scan and the word search stop at one deadline, counted from here
        deadline = time.monotonic() + self.cfg.grep_regex_deadline_ms / 1000
        pool = limit * _POOL if (mode == "hybrid" or sort == "hybrid") else limit
        if mode == "hybrid":  # the fusion standardises scores over the candidates: not too few
            pool = max(pool, CANDIDATES)

        def unranked() -> tuple[np.ndarray | None, int, list[tuple[str, int, float]], bool]:
            """What needs no vector: the scope's mean, its items without one, the word leg."""
            mean = (self._scope_mean(kinds, conv_ids, since, before)
                    if self.cfg.query_centering > 0 else None)
            missing = self.not_embedded(kinds, conv_ids, since, before)
            lexical, cut = (self._word_leg(pattern, kinds, conv_ids, since, before, pool, deadline)
                            if mode == "hybrid" else ([], False))
            return mean, missing, lexical, cut

        def embed() -> np.ndarray:
            vector: np.ndarray = emb.embed([pattern], kind="query")[0]
            return vector

        # These reads run on a worker while the question is embedded here (amem.kernel.beside):
        # onnxruntime lets go of the interpreter lock while the model runs, so the reads cost
        # no time of their own (measured: LoCoMo, hybrid p50 0.89x). Not when this thread is
        # inside a read group or transaction of the store: the worker's reads would wait for
        # it (SQLite) or not see it (PostgreSQL), so they run here, after the embedding.
        if self.db.held():
            asked, (mean, missing, lexical, words_cut) = embed(), unranked()
        else:
            (mean, missing, lexical, words_cut), asked = beside(unranked, embed)
        # ranking reads the moved vector; semantic mode shows the question's own cosines
        query = asked if mean is None else off_mean(asked, mean, self.cfg.query_centering)
        found: list[tuple[str, int, float]] = []
        scanned, warnings, late = 0, [], False
        for kind in kinds:
            near, n, late = self.search(kind, query, conv_ids, since, before, pool, deadline)
            found += [(kind, rowid, score) for rowid, score in near]
            scanned += n
            if late:
                warnings.append("semantic scan stopped at its deadline (grepRegexDeadlineMs); "
                                "narrow with since/before or a conversation")
                break
        found.sort(key=lambda f: (-f[2], f[0], f[1]))
        if mode != "hybrid" and query is not asked:  # ranked by the moved vector, shown by its own
            shown = self._cosines([(k, r) for k, r, _ in found[:pool]], asked)
            found[:pool] = [(k, r, shown.get((k, r), s)) for k, r, s in found[:pool]]
        if mode == "hybrid":
            if words_cut:
                late = True
                warnings.append("the word search of hybrid stopped at its deadline (grepRegexDeadlineMs); "
                                "narrow with since/before or a conversation")
            # only the hits the order returns are built, unless it reads every candidate's time
            hits = self._hybrid(pattern, query, found[:pool], lexical[:pool],
                                None if sort == "hybrid" else limit)
        else:
            hits = self._hits(found[:pool])
        if missing:
            what = "full text still searched them" if mode == "hybrid" else "semantic search did not see them"
            warnings.append(f"{missing} in-scope messages/summaries have no vector of {emb.model_id} (not "
                            "embedded yet, or the embedder failed on them): "
                            f"{what} (`amem lcm embed` embeds them; so does the nightly job)")
        hits = _order(hits, sort, limit)
        return GrepResult(pattern, mode, scope, sort, hits, late, scanned, conv_ids, warnings, not_embedded=missing)

    def _word_leg(self, pattern: str, kinds: tuple[str, ...], conv_ids: list[int] | None, since: str | None,
                  before: str | None, pool: int, deadline: float) -> tuple[list[tuple[str, int, float]], bool]:
        """Hybrid's word leg over ``kinds``, best first; True when the deadline cut it."""
        lexical: list[tuple[str, int, float]] = []
        words, cut = index_words(pattern), False
        for kind in kinds:
            rows, cut = self._lexical(kind, words, conv_ids, since, before, pool, deadline)
            lexical += [(kind, rowid, score) for rowid, score in rows]
            if cut:
                break
        lexical.sort(key=lambda f: (-f[2], f[0], f[1]))
        return lexical, cut

    def _scope_mean(self, kinds: tuple[str, ...], conv_ids: list[int] | None, since: str | None,
                    before: str | None) -> np.ndarray | None:
        """The mean of the scope's first ``CENTROID_SAMPLE`` vectors of the current model, in
        id order per kind (the same rows on both engines, so the same mean); None below
        ``CENTROID_MIN``.

        Kept per scope while the ids of the scope's first ``CENTROID_SAMPLE`` vectors of the
        model keep their count and their largest: reading the sample again at every grep cost
        a hybrid grep 1.4 ms of its ~6 (LoCoMo, 400-660 turns). That check reads at most
        ``CENTROID_SAMPLE`` entries of the ``(model_id, conversation_id)`` index (with a time
        window, the items too); counting the whole scope's non-empty vectors took 33 ms at
        100k vectors in scope and 295 ms at 1M, a tenth of the scan. New items take larger
        ids, so a sample that gains or loses a vector changes its count or its largest id. A
        vector replaced in place between two greps (an edited item embedded again, one the
        embedder failed on embedded at last) changes neither: the kept mean is then off by
        one vector of at least 50 until the sample's next change."""
        emb = self._need()
        dim, model = int(emb.dim), str(emb.model_id)
        scopes = [(kind, *self._filter(kind, conv_ids, since, before, conv="v")) for kind in kinds]
        state = tuple(tuple(self.db.one(
            f"SELECT count(*), max(k) FROM (SELECT v.{_SRC[kind].key} AS k FROM "
            f"{_SRC[kind].vectors} v{join} WHERE v.model_id = ? AND {where} "
            f"ORDER BY v.{_SRC[kind].key} LIMIT ?) AS sample",
            [model, *params, CENTROID_SAMPLE]) or ()) for kind, join, where, params in scopes)
        key = (model, kinds, None if conv_ids is None else tuple(conv_ids), since, before)
        with self._means_lock:
            kept = self._means.get(key)
        if kept is not None and kept[0] == state:
            return kept[1]
        blobs: list[bytes] = []
        scales: list[float] = []
        for kind, join, where, params in scopes:
            src = _SRC[kind]
            rows = self.db.query(
                f"SELECT v.scale, v.vector FROM {src.vectors} v{join} WHERE v.model_id = ? "
                f"AND length(v.vector) = ? AND {where} ORDER BY v.{src.key} LIMIT ?",
                [model, dim, *params, CENTROID_SAMPLE])
            scales += [float(r[0]) for r in rows]
            blobs += [bytes(r[1]) for r in rows]
        if len(blobs) < CENTROID_MIN:
            return None
        mean = mean_of(blobs, scales, dim)
        with self._means_lock:
            if key not in self._means and len(self._means) >= MEANS_KEPT:  # the oldest out
                self._means.pop(next(iter(self._means)))
            self._means[key] = (state, mean)
        return mean

    def _lexical(self, kind: str, pattern: str, conv_ids: list[int] | None, since: str | None,
                 before: str | None, k: int, deadline: float) -> tuple[list[tuple[int, float]], bool]:
        """The ``k`` best items by BM25 over any of the pattern's words (CJK: its trigram
        terms), as (rowid, -bm25); True when the deadline stopped the query."""
        q = build_fts_query(pattern)
        words = [t for t in q.terms if not is_cjk_text(t) and re.search(r"\w", t)]
        grams = [t for t in q.terms if is_cjk_text(t) and len(t) >= 3]
        src = SOURCES[kind]
        index, terms = (src.fts, words) if words else (src.tri, grams)
        if not terms:
            return [], False
        expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        _, where, params = self._filter(kind, conv_ids, since, before)
        sql = (f"SELECT t.{src.rowid}, bm25({index}) FROM {index} JOIN {src.table} t ON t.{src.rowid} = "
               f"{index}.rowid WHERE {index} MATCH ? AND {where} ORDER BY bm25({index}), t.{src.rowid} LIMIT ?")
        # FTS5 and a progress handler: the SQLite engine's part (lcm.pg.semantic overrides it)
        with sqlite_only(self.db, "hybrid grep's word leg over FTS5").reading() as c:
            c.set_progress_handler(lambda: time.monotonic() > deadline, 5000)
            try:
                rows = c.execute(sql, [expr, *params, k]).fetchall()
                if index == "messages_tri":  # messages still owed to the trigram index (lcm.trigram)
                    upto = indexed_upto(c)
                    any_gram = " OR ".join("t.content LIKE ? ESCAPE '\\'" for _ in grams)
                    tail = c.execute(f"SELECT t.id, 0.0 FROM messages t WHERE t.id > ? AND ({any_gram}) AND {where} "
                                     "ORDER BY t.id DESC LIMIT ?", [upto, *map(like_pattern, grams), *params, k])
                    rows += tail.fetchall()  # ranked after every indexed match (no BM25 for them yet)
            except sqlite3.OperationalError as exc:
                if "interrupted" not in str(exc):
                    raise
                return [], True
            finally:
                c.set_progress_handler(None, 0)
        return [(int(r[0]), -float(r[1])) for r in rows], False

    def _rows(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], sqlite3.Row]:
        """The rows of ``(kind, rowid)`` keys that still exist (one query per kind)."""
        rows: dict[tuple[str, int], sqlite3.Row] = {}
        for kind in _SRC:
            ids = [rowid for k, rowid in keys if k == kind]
            if ids:
                src = _SRC[kind]
                for r in self.db.query(f"SELECT * FROM {src.table} WHERE {src.rowid} IN "
                                       f"({','.join('?' * len(ids))})", ids):
                    rows[(kind, int(r[src.rowid]))] = r
        return rows

    def _hits(self, found: list[tuple[str, int, float]]) -> list[GrepHit]:
        rows = self._rows([(kind, rowid) for kind, rowid, _ in found])
        out = []
        for kind, rowid, score in found:
            row = rows.get((kind, rowid))
            if row is not None:  # else deleted since the scan
                out.append(_hit(kind, row, round(score, 6)))
        return out

    def _cosines(self, keys: list[tuple[str, int]], query: np.ndarray) -> dict[tuple[str, int], float]:
        """The stored vectors' cosines with ``query`` for ``keys`` (those not embedded are absent)."""
        emb = self._need()
        out: dict[tuple[str, int], float] = {}
        for kind, src in _SRC.items():
            ids = [rowid for k, rowid in keys if k == kind]
            if not ids:
                continue
            rows = self.db.query(f"SELECT {src.key}, scale, vector FROM {src.vectors} WHERE model_id = ? AND "
                                 f"length(vector) = ? AND {src.key} IN ({','.join('?' * len(ids))})",
                                 [str(emb.model_id), int(emb.dim), *ids])
            if rows:
                scores = unpack_scores([r[2] for r in rows], [r[1] for r in rows], int(emb.dim), query)
                out.update(((kind, int(r[0])), float(s)) for r, s in zip(rows, scores))
        return out

    def _hybrid(self, pattern: str, query: np.ndarray, near: list[tuple[str, int, float]],
                lexical: list[tuple[str, int, float]], keep: int | None = None) -> list[GrepHit]:
        """Both legs' candidates ranked by :mod:`lcm.hybrid`: BM25 over amem's terms of each
        candidate's date and text, z-score fused with its cosine (read for the word leg's own).
        The first ``keep`` as hits (all with None): a hit's snippet is built for nothing when
        the grep returns 10 of ~80 candidates."""
        keys = list(dict.fromkeys([(k, r) for k, r, _ in near] + [(k, r) for k, r, _ in lexical]))
        rows = self._rows(keys)
        keys = [key for key in keys if key in rows]  # else deleted since the legs ran
        cosines = {(k, r): s for k, r, s in near if (k, r) in rows}
        cosines.update(self._cosines([key for key in keys if key not in cosines], query))
        texts = []
        for kind, rowid in keys:
            row = rows[(kind, rowid)]
            when = row["created_at"] if kind == "message" else row["latest_at"]
            texts.append(f"{date_label(when, self.cfg.timezone)} {row['content'][:SCORED_TEXT_CHARS]}")
        words = dict(zip(keys, candidate_bm25(pattern, texts)))
        return [_hit(kind, rows[(kind, rowid)], round(score, 6))
                for (kind, rowid), score in fuse(keys, words, cosines)[:keep]]


def _checked(emb: TextEmbedder, vectors: np.ndarray, n: int) -> np.ndarray:
    if getattr(vectors, "shape", None) != (n, int(emb.dim)):
        raise ValueError(f"embedder {emb.model_id} returned shape {getattr(vectors, 'shape', None)} "
                         f"for {n} texts of dim {emb.dim}")
    return vectors


def _snippet(text: str, width: int = 160) -> str:
    flat = " ".join(text[: width * 2].split())
    return flat[:width] + ("…" if len(text) > width else "")


def _hit(kind: str, r: sqlite3.Row, score: float) -> GrepHit:
    if kind == "message":
        return GrepHit("message", f"msg_{r['id']}", r["conversation_id"], r["created_at"],
                       _snippet(r["content"]), score, role=r["role"], name=r["name"])
    return GrepHit("summary", r["summary_id"], r["conversation_id"], r["latest_at"],
                   _snippet(r["content"]), score, depth=r["depth"], summary_kind=r["kind"])


def _order(hits: list[GrepHit], sort: str, limit: int) -> list[GrepHit]:
    """``relevance``: as ranked; ``recency``: the ``limit`` best, newest first; ``hybrid``: RRF
    of the relevance order and the time order of the candidates."""
    if sort == "relevance":
        return hits[:limit]
    if sort == "recency":
        return sorted(hits[:limit], key=lambda h: h.created_at, reverse=True)
    newest = sorted(hits, key=lambda h: h.created_at, reverse=True)
    by_id = {h.id: h for h in hits}
    return [by_id[i] for i, _ in rrf([[h.id for h in hits], [h.id for h in newest]])[:limit]]
