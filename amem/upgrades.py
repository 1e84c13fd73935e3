"""One-time upgrades of a store written by an older version, run when it is opened.

Each is recorded in the store's metadata and runs once per store (but the tag keys' look, 5.,
which runs at every open: it reads nothing in a store that needs nothing):

1. **point ids** of format 1 (which two tenants could share) move to the current format
   (``amem.pointids``);
2. **event times**: notes written before event times get their ``event_ts`` index field, so
   ``since``/``before`` find them;
3. **subjects in ranking**: notes whose subjects bring words their text lacks, written before
   subjects reached ranking, get their BM25 vector now and are marked ``vector_stale``, so
   the next writes (``amem.refresh.REPAIR_LIMIT`` each) or the nightly job embed their
   "Subjects: ..." line (``amem.refresh``);
4. **subject keys**: notes written while subjects were compared as spelled get the keys the
   subject filter and the same-subject rules now compare (``amem.notefields.subject_key``);
5. **tag keys**: notes written while the tags filter compared tags as spelled get the keys it
   now compares (``amem.notefields.tag_key``: ``morning`` finds "Morning");
6. **BM25 terms** written by another tokenizer (a stemmer change) are rebuilt, and the corpus
   statistics recounted from every payload. Last: the recount is then the whole truth (the
   subjects upgrade before it adjusts the running total by the words it adds, which the
   recount, reading subjects too, would otherwise count twice).

Before them, **older writes** (:func:`heal_older_writes`): notes an older amem wrote after
the store was upgraded get the same treatment, point by point, since the upgrades above
never read a store twice.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from . import bm25
from .backends.base import Hit, IsEmpty, Point, Where
from .index import STALE_FIELD, NoteIndex
from .notefields import SUBJECT_KEYS, TAG_KEYS, epoch, index_fields, iso
from .notes import POINT_ID_FORMAT, Note, point_id
from .pointids import META_KEY as POINT_IDS
from .pointids import move_points
from .refresh import REPAIR_LIMIT
from .text import TOKENIZER_VERSION

log = logging.getLogger(__name__)

#: the store metadata key saying the event-time index fields were filled in
INDEXED_KEY = "event_time_index"
#: the store metadata key saying notes' subjects reach their BM25 and dense vectors
SUBJECTS_KEY = "subject_terms"
#: the store metadata key saying every note that names subjects carries their keys
KEYED_KEY = "subject_keys"
#: the store metadata key saying every point of the (edge) store carried its live key once
LIVE_KEYS_KEY = "live_keys"


def upgrade(index: NoteIndex) -> None:
    """Run every upgrade the store still needs, in order (each records itself)."""
    heal_older_writes(index)
    move_point_ids(index)
    index_old_notes(index)
    rank_subjects(index)
    key_subjects(index)
    key_tags(index)
    retokenize(index)


def retokenize(index: NoteIndex) -> None:
    """BM25 vectors written by another tokenizer (a stemmer change) are rebuilt, once."""
    if not bm25.terms_outdated(index.meta):
        return
    rebuilt, tokens = bm25.rebuild_sparse(index.backend, index.stats.avgdl, index.bm25_params)
    if rebuilt:
        log.warning("rebuilt the BM25 vectors of %d notes of %s for tokenizer version %d",
                    rebuilt, index.location, TOKENIZER_VERSION)
    # The running total counted the old tokenizer's terms (5% short on a store of
    # 2026-11-29): every later avgdl, hence every later BM25 weight, would inherit it.
    index.stats.tokens = tokens
    index.meta[bm25.TOKENIZER_KEY] = TOKENIZER_VERSION
    index.save_meta()  # with the statistics just counted


def move_point_ids(index: NoteIndex) -> None:
    """A store written with an older point-id format is moved to the current one, once."""
    if index.meta.get(POINT_IDS) == POINT_ID_FORMAT:
        return

    def moved_point(hit: Hit) -> Point:
        """A stored note under its current point id: its payload and vector as they were."""
        assert hit.dense is not None  # move_points reads with vectors and skips vectorless points
        point = index.make_point(Note.from_payload(hit.payload), hit.dense, count_stats=False,
                                 stale=bool(hit.payload.get(STALE_FIELD)))
        point.payload = dict(hit.payload)
        return point

    moved = move_points(index.backend, moved_point)
    if moved:
        log.warning("moved %d notes of %s to point-id format %d", moved, index.location,
                    POINT_ID_FORMAT)
    index.meta[POINT_IDS] = POINT_ID_FORMAT
    index.write_meta()


def index_old_notes(index: NoteIndex) -> int:
    """Give notes written before event times their ``event_ts`` (once per store); the count.

    Such a note's event time is its write time (``Note.from_payload`` reads it so), and the
    engine needs the number to find it by ``since``/``before``.
    """
    if index.meta.get(INDEXED_KEY):
        return 0
    done = 0
    for hit in list(index.backend.iterate(Where(must=(IsEmpty("event_ts"),)))):
        stamp = str(hit.payload.get("event_time") or hit.payload.get("timestamp") or "")
        if epoch(stamp) is None:
            continue
        fields = index_fields(stamp, str(hit.payload.get("expires_at") or ""),
                              hit.payload.get("metadata") or {})
        index.backend.set_payload(hit.id, {"event_time": iso_of(stamp), **fields})
        done += 1
    index.meta[INDEXED_KEY] = 1
    index.write_meta()
    if done:
        log.info("indexed the event time of %d notes written before event times", done)
    return done


def rank_subjects(index: NoteIndex) -> int:
    """Notes written before subjects reached ranking get them there (once per store); the count.

    Their BM25 vector is rebuilt at once (no encoder: cheap, and a query naming a subject
    finds them from now on); their dense vector, which embedded the text without its
    "Subjects: ..." line, is marked stale for the next write or the nightly job to re-embed
    (``amem.refresh``; ``amem doctor`` counts them meanwhile). A note whose subjects its text
    already holds keeps both vectors: they would not change. Only notes that name subjects
    are read (a payload-index filter), so a store without any pays one empty read.
    """
    if index.meta.get(SUBJECTS_KEY):
        return 0
    done = stale = 0
    for hit in list(index.backend.iterate(Where(must_not=(IsEmpty("subjects"),)))):
        note = Note.from_payload(hit.payload)
        plain = note.copy(subjects=[])
        before = bm25.note_terms(note.content, note.keywords, note.tags)
        after = bm25.note_terms(note.content, note.keywords, note.tags, note.subjects)
        restale = note.embed_text() != plain.embed_text()
        if len(after) == len(before) and not restale:
            continue
        changes = {STALE_FIELD: True} if restale else {}
        if index.update_note_fields(note.id, note.agent_id, changes, terms_of=note,
                                    terms_were=len(before), active_only=False):
            done, stale = done + 1, stale + restale
    index.meta[SUBJECTS_KEY] = 1
    index.save_meta()  # with the statistics the rebuilt vectors changed
    if done:
        log.warning("%s: %d notes written before subjects reached ranking got their subjects' "
                    "BM25 terms; %d are re-embedded by the next writes, %d each, or the nightly "
                    "job (marked vector_stale)",
                    index.location, done, stale, REPAIR_LIMIT)
    return done


def key_subjects(index: NoteIndex) -> int:
    """Notes naming subjects but not their keys get them (once per store); the count.

    Until then ``subject="alice"`` would miss a note about "Alice" written before subjects
    were compared by key, which is what this upgrade exists to prevent. Only notes that name
    subjects and lack keys are read; the keys are a field update (no vector changes).
    """
    if index.meta.get(KEYED_KEY):
        return 0
    done = _key_notes(index, "subjects", SUBJECT_KEYS)
    index.meta[KEYED_KEY] = 1
    index.write_meta()
    if done:
        log.info("%s: %d notes got their subjects' keys (subjects now match whatever their case)",
                 index.location, done)
    return done


def key_tags(index: NoteIndex) -> int:
    """Notes holding tags but not their keys get them, at every open; the count.

    Until then ``tags=["morning"]`` would miss a note tagged "morning": the filter reads
    nothing but ``tag_keys``. Such a note was written before keys, or after this store's
    upgrade by a version before them that already wrote live keys (which
    ``heal_older_writes`` cannot tell apart), so this is not recorded as done: the look is
    two indexed conditions (``tags`` and ``tag_keys`` are both keyword-indexed, their null
    indexes answer ``IsEmpty``) and reads nothing in a store whose notes all have keys. The
    keys are a field update (no vector, no BM25 term changes).
    """
    done = _key_notes(index, "tags", TAG_KEYS)
    if done:
        log.info("%s: %d notes got their tags' keys (the tags filter now matches any case)",
                 index.location, done)
    return done



def _key_notes(index: NoteIndex, field: str, keys_field: str) -> int:
    """Notes holding ``field`` (subjects, tags) but not its derived keys get them written
    (the note's own field written back, which derives the keys; no vector, no BM25 change);
    the count."""
    done = 0
    todo = Where(must_not=(IsEmpty(field),), must=(IsEmpty(keys_field),))
    for hit in list(index.backend.iterate(todo)):
        note = Note.from_payload(hit.payload)
        done += index.update_note_fields(note.id, note.agent_id, {field: getattr(note, field)},
                                         active_only=False)
    return done

def heal_older_writes(index: NoteIndex) -> int:
    """Notes an older amem wrote into this store since it was upgraded are upgraded too; the count.

    Such a version writes no live key, so the edge engine's open keys those points
    (``EdgeBackend.keyed_at_open``). Once a store was wholly keyed (recorded here as
    ``live_keys``), a point keyed at a later open came from such a writer, and the upgrades
    of this module, recorded as done, would never read it: at a point id of format 1 it was
    found by search but not by ``get``, ``update`` or ``delete``; without subject or tag keys
    the subject or tags filter missed it. Each such note is moved to its point id and given
    its subject and tag keys, event-time fields and BM25 terms; a note whose subjects add words to its embedded
    text is marked ``vector_stale`` (the writer may have embedded its text alone). Too many
    points to name (a store's first keying) run every upgrade again instead.
    """
    from .backends._edge_keys import KEYED_IDS_MAX
    from .backends.edge import EdgeBackend

    backend = index.backend
    if not isinstance(backend, EdgeBackend):  # another engine keeps no live key to tell by
        return 0
    if not index.meta.get(LIVE_KEYS_KEY):  # a store keyed by this open or never: nothing to tell
        if backend.store_facts().keyed:
            index.meta[LIVE_KEYS_KEY] = 1
            index.write_meta()
        return 0
    ids = backend.keyed_at_open
    if len(ids) >= KEYED_IDS_MAX:
        for key in (POINT_IDS, INDEXED_KEY, SUBJECTS_KEY, KEYED_KEY):
            index.meta.pop(key, None)
        log.warning("%s: %d or more notes were written by an older amem since this store was "
                    "upgraded; every upgrade runs again", index.location, KEYED_IDS_MAX)
        return 0
    healed = moved = 0
    for hit in backend.retrieve(ids, with_vectors=True):
        agent, note_id = hit.payload.get("agent_id"), hit.payload.get("id")
        if not isinstance(agent, str) or not isinstance(note_id, str) or hit.dense is None:
            continue
        note = Note.from_payload(hit.payload)
        if point_id(agent, note_id) != hit.id:  # the copy first, as move_points does
            point = index.make_point(note, hit.dense, count_stats=False,
                                     stale=bool(hit.payload.get(STALE_FIELD)))
            point.payload = dict(hit.payload)
            backend.upsert([point])
            backend.delete([hit.id])
            moved += 1
        # and so their keys: the subject and tags filters read nothing else
        changes: dict[str, Any] = {"subjects": note.subjects, "tags": note.tags}
        stamp = str(hit.payload.get("event_time") or hit.payload.get("timestamp") or "")
        if hit.payload.get("event_ts") is None and epoch(stamp) is not None:
            changes.update({"event_time": iso_of(stamp), **index_fields(
                stamp, str(hit.payload.get("expires_at") or ""), hit.payload.get("metadata") or {})})
        if note.embed_text() != note.copy(subjects=[]).embed_text():
            changes[STALE_FIELD] = True
        healed += index.update_note_fields(note_id, agent, changes, terms_of=note,
                                           active_only=False)
    if moved:  # a copy at its format-1 id beside the current point counted as a document
        index.stats = index.stats.resized(backend.count(None))
        index.save_meta()
    if healed:
        log.warning("%s: %d notes written by an older amem since this store was upgraded were "
                    "brought up to date (point ids, subject and tag keys, event times, BM25 "
                    "terms)",
                    index.location, healed)
    return healed


def iso_of(stamp: str) -> str:
    """A stored time in the UTC form event times use."""
    when = epoch(stamp)
    assert when is not None  # the caller checked it parses
    return iso(datetime.fromtimestamp(when, tz=timezone.utc))


__all__ = ["INDEXED_KEY", "KEYED_KEY", "LIVE_KEYS_KEY", "SUBJECTS_KEY", "heal_older_writes", "index_old_notes", "key_subjects", "key_tags", "move_point_ids", "rank_subjects", "retokenize", "upgrade"]
