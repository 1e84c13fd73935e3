"""Semantic recall (lcm.semantic): paraphrase search with e5, the embedding debt, resumable
embedding (also across a SIGKILL), a model change, tenancy, and the errors of a store without
an embedder."""

from __future__ import annotations

import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from amem.embed import E5Embedder
from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.errors import EmbedderMismatchError, EmbedderMissingError, LcmNotFoundError, LcmValidationError
from lcm.vectors import pack, top_k, unpack_scores
from tests.fakes.embedders import RecordingEmbedder

from .children import run_child

KEY = "agent:a:main"
OTHER = "agent:b:main"
TALK = [
    {"role": "user", "content": "My car broke down on the highway yesterday, the engine just died."},
    {"role": "assistant", "content": "We deployed the new database schema to production on Friday."},
    {"role": "user", "content": "I adopted a puppy named Biscuit last week."},
    {"role": "assistant", "content": "The quarterly budget review moved to Tuesday afternoon."},
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(threads=1)


def _store(embedder: object = None, path: str = ":memory:", *, switch: bool = False) -> LcmStore:
    return LcmStore(path, LcmConfig(log_file_enabled=False), clock=ManualClock(), embedder=embedder,  # type: ignore[arg-type]
                    switch_embedder=switch)


def test_a_paraphrase_finds_the_verbatim_message_where_full_text_does_not(e5: E5Embedder) -> None:
    with _store(e5) as store:
        store.ingest(KEY, TALK)
        assert store.embed_pending().embedded_messages == len(TALK)
        query = "automobile stopped working"
        words = store.grep(query, mode="full_text", session_key=KEY, sort="relevance")
        assert words.hits == []  # no word in common
        for mode in ("semantic", "hybrid"):
            res = store.grep(query, mode=mode, session_key=KEY, sort="relevance", limit=2)
            assert res.hits[0].id == "msg_1", (mode, res.hits)
            assert res.not_embedded == 0 and res.warnings == []
        pet = store.grep("new dog in the family", mode="semantic", session_key=KEY, sort="relevance")
        assert pet.hits[0].id == "msg_3"


def test_what_is_not_embedded_is_counted_and_hybrid_still_finds_it_by_its_words() -> None:
    with _store(HashingEmbedder(256)) as store:
        store.ingest(KEY, TALK)
        store.embed_pending()
        store.ingest(KEY, [{"role": "user", "content": "The zeppelin tickets arrived today."}])
        assert store.status().embedding is not None and store.status().embedding.debt == 1  # type: ignore[union-attr]
        sem = store.grep("zeppelin tickets", mode="semantic", session_key=KEY, sort="relevance")
        assert sem.not_embedded == 1 and "msg_5" not in [h.id for h in sem.hits]
        assert any("1 in-scope" in w and "did not see them" in w for w in sem.warnings)
        hyb = store.grep("zeppelin tickets", mode="hybrid", session_key=KEY, sort="relevance")
        assert "msg_5" in [h.id for h in hyb.hits] and hyb.not_embedded == 1
        assert any("full text still searched them" in w for w in hyb.warnings)


def test_embed_pending_resumes_and_never_embeds_a_stored_item_again() -> None:
    emb = RecordingEmbedder(256)
    with _store(emb) as store:
        store.ingest(KEY, [{"role": "user", "content": f"note number {i}"} for i in range(70)])
        first = store.embed_pending(limit=40)
        assert (first.embedded_messages, first.stopped, first.pending) == (40, "limit", 30)
        second = store.embed_pending()
        assert (second.embedded_messages, second.stopped, second.pending) == (30, None, 0)
        assert sorted(emb.passages) == sorted(f"note number {i}" for i in range(70))  # each once
        assert store.embed_pending().batches == 0


_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from amem.embed.hashing import HashingEmbedder
    from lcm import LcmConfig, LcmStore

    class SlowEmbedder(HashingEmbedder):
        def embed(self, texts, kind="passage"):
            time.sleep(0.05)
            return super().embed(texts, kind)

    store = LcmStore({db!r}, LcmConfig(log_file_enabled=False), embedder=SlowEmbedder(256))
    store.embed_pending(limit=32)  # one batch stored before the kill can land, whatever the load
    print("READY", flush=True)
    store.embed_pending()
    """
)


def test_a_killed_embedding_run_loses_nothing_and_the_next_run_embeds_only_the_rest(tmp_path: Path) -> None:
    db = str(tmp_path / "lcm.db")
    texts = [f"message {i} about topic {i % 7}" for i in range(2000)]
    with _store(HashingEmbedder(256), db) as store:
        store.ingest(KEY, [{"role": "user", "content": t} for t in texts])
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=str(Path(__file__).resolve().parents[2]), db=db))
    assert run_child(str(tmp_path), script, kill_after=0.3) == -9  # SIGKILL mid-run (the rest takes 3 s)
    emb = RecordingEmbedder(256)
    with _store(emb, db) as store:
        stored = store.status().embedding
        assert stored is not None and 0 < stored.vectors < len(texts)  # some batches committed
        store.embed_pending()
        assert len(emb.passages) == len(texts) - stored.vectors  # nothing stored is redone
        done = [r[0] for r in store.db.query("SELECT m.content FROM messages m JOIN message_vectors v "
                                             "ON v.message_id = m.id")]
        assert sorted(done) == sorted(texts)
        # the vectors the killed run stored are the ones a fresh embedder would make
        first = store.db.one("SELECT m.content, v.scale, v.vector FROM messages m JOIN message_vectors v "
                             "ON v.message_id = m.id WHERE m.id = 1")
        assert first is not None and first[0] not in emb.passages
        want = HashingEmbedder(256).embed([first[0]])[0]
        got = unpack_scores([first[2]], [first[1]], 256, want)[0]
        assert got > 0.99  # int8 rounding of a sparse hashing vector


def test_a_model_change_marks_every_vector_stale_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = str(tmp_path / "lcm.db")
    with _store(HashingEmbedder(256), db) as store:
        store.ingest(KEY, TALK)
        store.embed_pending()
    with _store(HashingEmbedder(128), db, switch=True) as store:
        st = store.status().embedding
        assert st is not None
        assert (st.model_id, st.previous_model_id) == ("hashing-v1-d128", "hashing-v1-d256")
        assert (st.vectors, st.stale_vectors, st.debt) == (0, len(TALK), len(TALK))
        res = store.grep("car engine", mode="semantic", session_key=KEY)
        assert res.hits == [] and res.not_embedded == len(TALK)  # old vectors are never compared
        store.embed_pending()
        st = store.status().embedding
        assert st is not None and (st.vectors, st.stale_vectors, st.debt) == (len(TALK), 0, 0)
    assert any("embedder changed from hashing-v1-d256 to hashing-v1-d128" in r.getMessage() for r in caplog.records)


def test_an_embedder_setting_that_alternates_never_re_embeds_the_store(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``embedder=A``, then ``B``, then ``A`` again (a flag given to one command and not the
    next): the store keeps A's vectors and says B is not its embedder, as the notes store
    refuses another embedder, instead of re-embedding every message at each change."""
    db = str(tmp_path / "lcm.db")
    with _store(HashingEmbedder(256), db) as store:
        store.ingest(KEY, TALK)
        store.embed_pending()
    other = RecordingEmbedder(128)
    with _store(other, db) as store:
        st = store.status().embedding
        assert st is not None
        assert (st.model_id, st.given_model_id, st.vectors, st.debt) == ("hashing-v1-d256", "hashing-v1-d128",
                                                                         len(TALK), 0)
        assert store.status().to_dict()["embedding"]["given_model_id"] == "hashing-v1-d128"
        for call in (store.embed_pending, lambda: store.grep("car engine", mode="semantic", session_key=KEY),
                     lambda: store.grep("car engine", mode="hybrid", session_key=KEY)):
            with pytest.raises(EmbedderMismatchError) as info:
                call()
            assert (info.value.stored, info.value.given) == ("hashing-v1-d256", "hashing-v1-d128")
            assert "switch_embedder=True" in str(info.value) and info.value.code == "embedder_mismatch"
        assert store.maintenance().failures.get("embedding", "").startswith("EmbedderMismatchError")
        # what needs no vector still works with the other embedder
        assert store.grep("engine", mode="full_text", session_key=KEY).hits
    assert other.passages == []  # nothing was embedded with B
    assert any("made by hashing-v1-d256, not by hashing-v1-d128" in r.getMessage() for r in caplog.records)
    back = RecordingEmbedder(256)
    with _store(back, db) as store:
        st = store.status().embedding
        assert st is not None and (st.given_model_id, st.vectors, st.debt) == (None, len(TALK), 0)
        assert store.embed_pending().embedded_messages == 0 and back.passages == []
        assert store.grep("car engine", mode="semantic", session_key=KEY).hits


def test_a_store_without_vectors_takes_the_new_embedder_without_asking(tmp_path: Path) -> None:
    """Nothing to lose: a store whose recorded model embedded nothing yet switches freely."""
    db = str(tmp_path / "lcm.db")
    with _store(HashingEmbedder(256), db) as store:
        store.ingest(KEY, TALK)
    with _store(HashingEmbedder(128), db) as store:
        st = store.status().embedding
        assert st is not None and (st.model_id, st.given_model_id) == ("hashing-v1-d128", None)
        assert store.embed_pending().embedded_messages == len(TALK)


def test_semantic_recall_stays_inside_the_callers_scope() -> None:
    with _store(HashingEmbedder(256)) as store:
        store.ingest(KEY, [{"role": "user", "content": "lunch plans for friday"}])
        other = store.ingest(OTHER, [{"role": "user", "content": "secret launch codes for friday"}])
        store.embed_pending()
        for mode in ("semantic", "hybrid"):
            res = store.grep("secret launch codes", mode=mode, session_key=KEY)
            assert [h.conversation_id for h in res.hits] == [1] and res.conversation_ids == [1]
            with pytest.raises(LcmNotFoundError):
                store.grep("secret", mode=mode, session_key=KEY, conversation_id=other.conversation_id)
            with pytest.raises(LcmValidationError):  # no scope named: refused, not "everything"
                store.grep("secret", mode=mode)
        both = store.grep("secret launch codes", mode="semantic", session_key=[KEY, OTHER], sort="relevance")
        assert both.hits[0].conversation_id == other.conversation_id


def test_without_an_embedder_semantic_modes_are_a_clear_error() -> None:
    with _store() as store:
        store.ingest(KEY, TALK)
        for mode in ("semantic", "hybrid"):
            with pytest.raises(EmbedderMissingError, match="needs an embedder"):
                store.grep("car", mode=mode, session_key=KEY)
        with pytest.raises(EmbedderMissingError):
            store.embed_pending()
        assert store.grep("car", mode="full_text", session_key=KEY).hits  # the other modes work
        st = store.status().embedding
        assert st is not None and (st.model_id, st.debt) == (None, 0)
    with _store(HashingEmbedder(64)) as store:
        with pytest.raises(LcmValidationError) as err:
            store.grep("car", mode="semantic", scope="files", session_key=KEY)
        assert err.value.field == "scope"
        with pytest.raises(LcmValidationError):
            store.embed_pending(limit=0)
        with pytest.raises(ValueError, match="embedder must have"):
            LcmStore(":memory:", embedder=object())  # type: ignore[arg-type]


def test_a_deleted_item_takes_its_vector_with_it_and_sort_orders_the_best_hits() -> None:
    clock = ManualClock()
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False), clock=clock, embedder=HashingEmbedder(256)) as store:
        for i, text in enumerate(["apple pie recipe", "apple tart recipe", "apple cake recipe"]):
            store.ingest(KEY, [{"role": "user", "content": text}])
            clock.advance(60)
        store.embed_pending()
        rel = store.grep("apple pie recipe", mode="semantic", session_key=KEY, sort="relevance", limit=2)
        new = store.grep("apple pie recipe", mode="semantic", session_key=KEY, sort="recency", limit=2)
        assert rel.hits[0].id == "msg_1" and {h.id for h in new.hits} == {h.id for h in rel.hits}
        assert [h.created_at for h in new.hits] == sorted((h.created_at for h in new.hits), reverse=True)
        with store.db.atomic() as c:
            c.execute("DELETE FROM messages WHERE id = 1")
        assert store.db.scalar("SELECT count(*) FROM message_vectors") == 2
        assert "msg_1" not in [h.id for h in store.grep("apple pie", mode="semantic", session_key=KEY).hits]


def test_int8_packing_keeps_cosines_and_top_k_is_ordered() -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(50, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    packed = [pack(v) for v in vecs]
    got = unpack_scores([b for _, b in packed], [s for s, _ in packed], 384, vecs[0])
    assert np.max(np.abs(got - vecs @ vecs[0])) < 0.01
    assert pack(np.zeros(4, dtype=np.float32)) == (0.0, bytes(4))
    with pytest.raises(ValueError, match="NaN"):
        pack(np.array([np.nan, 1.0], dtype=np.float32))
    ids, scores = top_k(np.array([5, 1, 9, 3]), np.array([0.2, 0.9, 0.9, 0.1], dtype=np.float32), 3)
    assert ids.tolist() == [1, 9, 5]


def test_the_nightly_maintenance_pays_the_embedding_debt() -> None:
    with _store(HashingEmbedder(64)) as store:
        store.ingest(KEY, TALK)
        result = store.maintenance()
        assert result.embedding is not None and result.embedding.embedded_messages == len(TALK)
        assert result.embedding.pending == 0 and not result.failures
    with _store() as store:  # no embedder: nothing to do, nothing failed
        store.ingest(KEY, TALK)
        assert store.maintenance().embedding is None


class _Poisoned(HashingEmbedder):
    """Fails on any batch holding a text with POISON; ``broken`` fails on everything."""

    def __init__(self, broken: bool = False) -> None:
        super().__init__(64)
        self.broken = broken

    def embed(self, texts: Any, kind: str = "passage") -> Any:
        if self.broken or any("POISON" in t for t in texts):
            raise RuntimeError("encoder crashed")
        return super().embed(texts, kind=kind)  # type: ignore[arg-type]


def test_a_text_the_embedder_fails_on_is_marked_and_holds_up_nothing_behind_it() -> None:
    with _store(_Poisoned()) as store:
        store.ingest(KEY, [{"role": "user", "content": "POISON pill" if i == 1 else f"fine text {i}"}
                           for i in range(5)])
        report = store.embed_pending()
        assert (report.embedded_messages, report.failed, report.pending) == (5, 1, 0)
        st = store.status().embedding
        assert st is not None and (st.vectors, st.failed, st.debt) == (4, 1, 0)
        res = store.grep("fine text", mode="semantic", session_key=KEY)
        assert res.not_embedded == 1 and "msg_2" not in [h.id for h in res.hits]
        assert store.embed_pending().batches == 0  # not retried with the same model
    with _store(_Poisoned(broken=True)) as store:  # a broken embedder marks nothing
        store.ingest(KEY, TALK)
        with pytest.raises(RuntimeError, match="encoder crashed"):
            store.embed_pending()
        st = store.status().embedding
        assert st is not None and (st.vectors, st.failed, st.debt) == (0, 0, len(TALK))


class _SlowRecording(RecordingEmbedder):
    def embed(self, texts: Any, kind: str = "passage") -> Any:
        time.sleep(0.005)  # long enough for a second thread to read the same pending batch
        return super().embed(texts, kind)


def test_two_runs_at_once_in_one_process_encode_each_item_once() -> None:
    emb = _SlowRecording(64)
    with _store(emb) as store:
        store.ingest(KEY, [{"role": "user", "content": f"item {i}"} for i in range(300)])
        threads = [threading.Thread(target=store.embed_pending) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(emb.passages) == sorted(f"item {i}" for i in range(300))


def test_summaries_are_embedded_and_found_by_meaning_too() -> None:
    from .conftest import chat

    cfg = LcmConfig(log_file_enabled=False, leaf_chunk_tokens=200, fresh_tail_count=8)
    with LcmStore(":memory:", cfg, clock=ManualClock(), embedder=HashingEmbedder(256)) as store:
        store.ingest(KEY, chat(60))
        assert store.compact(KEY, force=True).leaf_summaries
        report = store.embed_pending()
        summaries = int(store.db.scalar("SELECT count(*) FROM summaries"))
        assert report.embedded_summaries == summaries > 0 and report.pending == 0
        leaf = store.db.one("SELECT summary_id, content FROM summaries WHERE kind = 'leaf' ORDER BY pk LIMIT 1")
        assert leaf is not None
        res = store.grep(leaf["content"], mode="semantic", scope="summaries", session_key=KEY, sort="relevance")
        assert leaf["summary_id"] in [h.id for h in res.hits[:3]]  # a condensed parent may quote it
        kinds = {r[0]: (r[1], r[2]) for r in store.db.query("SELECT summary_id, kind, depth FROM summaries")}
        assert res.hits and all(h.kind == "summary" and (h.summary_kind, h.depth) == kinds[h.id] for h in res.hits)


def test_since_before_and_the_deadline_bound_a_semantic_grep() -> None:
    clock = ManualClock()
    with LcmStore(":memory:", LcmConfig(log_file_enabled=False, grep_regex_deadline_ms=1), clock=clock,
                  embedder=HashingEmbedder(64)) as store:
        store.ingest(KEY, [{"role": "user", "content": "old apple note"}])
        clock.advance(3600)
        store.ingest(KEY, [{"role": "user", "content": "new apple note"}])
        store.embed_pending()
        late = store.grep("apple note", mode="semantic", session_key=KEY, since=clock.now())
        assert [h.id for h in late.hits] == ["msg_2"] and not late.truncated
        early = store.grep("apple note", mode="semantic", session_key=KEY, before=clock.now())
        assert [h.id for h in early.hits] == ["msg_1"]
        # 3 scan batches of vectors and a 1 ms deadline: the answer says it stopped early
        rows = [(i, 1, "hashing-v1-d64", *pack(HashingEmbedder(64).embed(["apple"])[0])) for i in range(10, 12300)]
        with store.db.atomic() as c:
            c.executemany("INSERT INTO message_vectors VALUES (?, ?, ?, ?, ?)", rows)
        res = store.grep("apple", mode="semantic", session_key=KEY)
        assert res.truncated and any("deadline" in w for w in res.warnings) and res.scanned < len(rows) + 2
