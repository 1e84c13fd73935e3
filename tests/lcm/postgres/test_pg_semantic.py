"""Semantic recall on PostgreSQL (lcm.pg.semantic): paraphrases with e5, the same answers as
SQLite, resumable embedding and its debt, one run at a time across stores, vectors gone with
their conversation or their text."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from amem.embed import E5Embedder
from amem.embed.hashing import HashingEmbedder
from lcm import LcmConfig, LcmStore, ManualClock
from lcm.pg.store import PORTED
from tests.fakes.embedders import RecordingEmbedder
from tests.lcm.test_semantic import KEY, OTHER, TALK  # the same conversation as on SQLite

MORE = [f"note {i}: the {w} report about {v} is due" for i, (w, v) in
        enumerate([(w, v) for w in ("budget", "engine", "puppy", "schema") for v in ("Friday", "taxes", "travel")])]


def _open(url: str, clock: ManualClock, embedder: object, **cfg: Any) -> LcmStore:
    return LcmStore(url, LcmConfig(log_file_enabled=False, **cfg), clock=clock, embedder=embedder)  # type: ignore[arg-type]


def test_embed_pending_is_ported() -> None:
    assert "embed_pending" in PORTED


def test_a_paraphrase_is_found_by_meaning_on_postgres(pg_clean_url: str, clock: ManualClock) -> None:
    with _open(pg_clean_url, clock, E5Embedder(threads=1)) as store:
        store.ingest(KEY, TALK)
        assert store.embed_pending().embedded_messages == len(TALK)
        query = "automobile stopped working"
        assert store.grep(query, mode="full_text", session_key=KEY, sort="relevance").hits == []
        for mode in ("semantic", "hybrid"):
            res = store.grep(query, mode=mode, session_key=KEY, sort="relevance", limit=2)
            assert res.hits[0].id == "msg_1" and res.not_embedded == 0 and res.warnings == [], (mode, res)
        assert store.grep("new dog in the family", mode="semantic", session_key=KEY).hits[0].id == "msg_3"


def _fill(store: LcmStore, clock: ManualClock) -> None:
    store.ingest(KEY, TALK)
    for i, text in enumerate(MORE):
        clock.advance(60)
        store.ingest(KEY if i % 3 else OTHER, [{"role": "user" if i % 2 else "assistant", "content": text}])


def test_semantic_answers_are_the_same_ids_in_the_same_order_as_sqlite(pg_clean_url: str, clock: ManualClock) -> None:
    start = clock.now()
    answers: list[list[list[tuple[str, float]]]] = []
    for where in (":memory:", pg_clean_url):
        clock.set(start)
        with _open(where, clock, HashingEmbedder(256)) as store:
            _fill(store, clock)
            store.embed_pending(limit=5)
            store.embed_pending()
            got = []
            for query, key, scope, sort in [("engine report due Friday", KEY, "both", "relevance"),
                                            ("budget taxes", None, "messages", "relevance"),
                                            ("puppy travel", OTHER, "both", "recency"),
                                            ("schema deployed", KEY, "messages", "hybrid")]:  # fmt: skip
                res = store.grep(query, mode="semantic", scope=scope, session_key=key, all_conversations=key is None,
                                 sort=sort, limit=6)  # fmt: skip
                got.append([(h.id, h.score) for h in res.hits])
            answers.append(got)
    assert answers[0] == answers[1] and all(answers[0])


def test_embed_pending_resumes_and_status_shows_the_debt(pg_clean_url: str, clock: ManualClock) -> None:
    emb = RecordingEmbedder()
    with _open(pg_clean_url, clock, emb) as store:
        store.ingest(KEY, TALK)
        status = store.status()
        assert status.embedding is not None and status.embedding.debt == 4 and status.embedding.model_id == emb.model_id
        assert status.debt is not None and status.debt.embedding == 4
        first = store.embed_pending(limit=3)
        assert (first.embedded_messages, first.pending, first.stopped) == (3, 1, "limit")
        second = store.embed_pending()
        assert (second.embedded_messages, second.pending) == (1, 0)
        assert sorted(emb.passages) == sorted(m["content"] for m in TALK)  # nothing encoded twice
        store.ingest(KEY, [{"role": "user", "content": "The zeppelin tickets arrived today."}])
        assert store.status().embedding.debt == 1  # type: ignore[union-attr]
        # hybrid's word leg (any of the words, OR-ed) still finds what has no vector yet
        hyb = store.grep("zeppelin tickets lost", mode="hybrid", session_key=KEY, sort="relevance")
        assert "msg_5" in [h.id for h in hyb.hits] and hyb.not_embedded == 1
        sem = store.grep("zeppelin tickets lost", mode="semantic", session_key=KEY, sort="relevance")
        assert "msg_5" not in [h.id for h in sem.hits] and sem.not_embedded == 1
    with _open(pg_clean_url, clock, RecordingEmbedder()) as again:  # another host: the same debt
        assert again.embed_pending().embedded_messages == 1 and again.status().embedding.debt == 0  # type: ignore[union-attr]


class _SlowEmbedder(RecordingEmbedder):
    """Slow enough that two unguarded runs would both read the same pending batch."""

    def embed(self, texts: Sequence[str], kind: str = "passage") -> Any:
        if kind == "passage":
            time.sleep(0.3)
        return super().embed(texts, kind=kind)


def test_two_stores_embedding_at_once_encode_each_item_once(pg_clean_url: str, clock: ManualClock) -> None:
    # two stores on one server stand for two hosts: only the advisory lock is shared
    a, b = _SlowEmbedder(), _SlowEmbedder()
    with _open(pg_clean_url, clock, a) as one, _open(pg_clean_url, clock, b) as two:
        one.ingest(KEY, TALK)
        runs: list[Callable[[], object]] = [one.embed_pending, two.embed_pending]
        threads = [threading.Thread(target=run) for run in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(a.passages + b.passages) == sorted(m["content"] for m in TALK)
        assert one.status().embedding.debt == 0  # type: ignore[union-attr]


def test_vectors_go_with_their_conversation_and_with_a_changed_text(pg_clean_url: str, clock: ManualClock) -> None:
    with _open(pg_clean_url, clock, HashingEmbedder(256), retention_archived_max_age_days=1) as store:
        store.ingest(KEY, TALK)
        store.ingest(OTHER, [{"role": "user", "content": "apple pie recipe"}])
        store.embed_pending()
        assert store.db.scalar("SELECT count(*) FROM message_vectors") == 5
        with store.db.atomic() as c:  # a changed text is pending again (no stale vector)
            c.execute("UPDATE messages SET content = 'apple tart recipe' WHERE id = 5")
        assert store.db.scalar("SELECT count(*) FROM message_vectors") == 4
        assert store.status().embedding.debt == 1  # type: ignore[union-attr]
        store.reset(KEY)
        clock.advance(3 * 86400)
        assert store.apply_retention().deleted_conversations == [1]
        assert store.db.scalar("SELECT count(*) FROM message_vectors") == 0
        assert store.status().embedding.debt == 1  # type: ignore[union-attr]
        assert [h.id for h in store.grep("car engine", mode="semantic", all_conversations=True).hits] == []


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_without_an_embedder_the_modes_say_so(mode: str, make_pg_store: Callable[..., LcmStore]) -> None:
    from lcm.errors import EmbedderMissingError

    store = make_pg_store()
    store.ingest(KEY, TALK)
    with pytest.raises(EmbedderMissingError):
        store.grep("car", mode=mode, session_key=KEY)
    assert store.status().embedding is not None and store.status().embedding.model_id is None  # type: ignore[union-attr]


def test_hybrid_reads_a_turns_date_on_postgres_too(pg_clean_url: str, clock: ManualClock) -> None:
    # lcm.hybrid ranks the candidates of both engines' word legs the same way: the day a turn
    # was said counts as its words, so a question naming the month finds it among equal turns
    same = "we decided to ship the parser rewrite"
    turns = [{"role": "user", "content": same, "created_at": when}
             for when in ("2024-01-05T10:00:00Z", "2024-03-10T10:00:00Z", "2024-07-22T10:00:00Z")]
    with _open(pg_clean_url, clock, HashingEmbedder(256)) as store:
        store.ingest(KEY, turns)
        store.embed_pending()
        res = store.grep("What did we decide in March 2024?", mode="hybrid", session_key=KEY,
                         sort="relevance", limit=3)
    assert res.hits[0].created_at.startswith("2024-03-10"), res.hits
    assert res.hits[0].score > res.hits[1].score


def test_a_grep_inside_a_read_group_reads_on_its_own_connection(pg_clean_url: str, clock: ManualClock) -> None:
    """Outside a read group a grep's word leg is read on a worker's pooled connection while the
    question is embedded; inside one (``held``) every read stays on the caller's connection,
    so it sees that transaction, and finds the same."""
    with _open(pg_clean_url, clock, HashingEmbedder(64)) as store:
        _fill(store, clock)
        store.embed_pending()
        assert not store.db.held()
        alone = store.grep("budget report due Friday", mode="hybrid", session_key=KEY, limit=5)
        with store.db.reading():
            assert store.db.held()
            inside = store.grep("budget report due Friday", mode="hybrid", session_key=KEY, limit=5)
        assert not store.db.held()
    assert alone.hits and [(h.id, h.score) for h in inside.hits] == [(h.id, h.score) for h in alone.hits]
