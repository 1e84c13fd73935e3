"""Congruence: the same data in SQLite and PostgreSQL gives the same grep answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from lcm import LcmConfig, LcmStore, ManualClock

from ..conftest import chat

KEY = "agent:main:s"
OTHER = "agent:other:s"
TEXTS = [
    "the deploy of v4.1 failed with OOM",
    "deploy later; OR maybe NOT today",
    "failed deploy again, error code E1234 in /var/log/app.log: timeout, retry",
    "数据库迁移在周三失败了，错误码 E1234",
    "明日の会議でデプロイ手順を確認します",
    "Café résumé: naïve cooking notes 100% done",
    "ERROR: connection refused (errno=111) while deploying",
]
FULL_TEXT = ['"deploy of" failed', "OR NOT", "v4.1", "deploys", "deploy", "数据库迁移", "失败", "デプロイ",
             "迁移 E1234", "cafe", "100%", "error", "errno=111", "pytest", "module_8.py", "src/module_4.py",
             "case_7", "bug #12", "/var/log/app.log", "passed pytest"]  # fmt: skip
REGEX = [r"E\d{4}", r"module_1\d\.py", "error.*timeout.*retry", "(?i)deploy", r"bug #\d+", "数据库", "[Cc]af[ée]",
         r"\d{3}\)", "(a+)+$", "nothing matches this"]  # fmt: skip


@pytest.fixture
def pair(make_pg_store: Callable[..., LcmStore], make_store: Callable[..., LcmStore], clock: ManualClock) -> tuple[LcmStore, LcmStore]:
    return _fill(make_store(), make_pg_store(), clock)


def _fill(lite: LcmStore, pg: LcmStore, clock: ManualClock) -> tuple[LcmStore, LcmStore]:
    clock.set(datetime(2026, 1, 1, tzinfo=timezone.utc))
    batches = [(KEY, [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(TEXTS)]),
               (KEY, chat(30)), (OTHER, chat(10, prefix="other")),
               (KEY, [{"role": "user", "content": "an old one: deploy failed", "created_at": "2020-05-05T00:00:00Z"}])]  # fmt: skip
    for key, batch in batches:
        for store in (lite, pg):
            store.ingest(key, batch)
        clock.advance(5)
    return lite, pg


def _answer(store: LcmStore, pattern: str, **kw: object) -> list[tuple[str, int]]:
    return [(h.id, h.conversation_id) for h in store.grep(pattern, session_key=KEY, **kw).hits]  # type: ignore[arg-type]


def test_full_text_recency_answers_agree(pair: tuple[LcmStore, LcmStore]) -> None:
    lite, pg = pair
    for pattern in FULL_TEXT:
        want = _answer(lite, pattern, mode="full_text", limit=20)
        assert want, pattern  # real answers are compared, not two agreeing empty lists
        assert _answer(pg, pattern, mode="full_text", limit=20) == want, pattern


def test_full_text_relevance_finds_the_same_set(pair: tuple[LcmStore, LcmStore]) -> None:
    # every pattern, CJK and punctuation terms included (those are not BM25-scored on PostgreSQL)
    lite, pg = pair
    for pattern in FULL_TEXT:
        want = sorted(_answer(lite, pattern, mode="full_text", sort="relevance", limit=200))
        assert sorted(_answer(pg, pattern, mode="full_text", sort="relevance", limit=200)) == want, pattern


@pytest.mark.parametrize("sort", ["recency", "relevance", "hybrid"])
def test_regex_answers_agree(pair: tuple[LcmStore, LcmStore], sort: str) -> None:
    lite, pg = pair
    for pattern in REGEX:
        a, b = lite.grep(pattern, session_key=KEY, sort=sort, limit=10), pg.grep(pattern, session_key=KEY, sort=sort, limit=10)
        assert [(h.id, h.score, h.snippet) for h in b.hits] == [(h.id, h.score, h.snippet) for h in a.hits], pattern
        assert b.truncated == a.truncated
    assert _answer(pg, r"module_1\d\.py", mode="regex")  # not all empty


def test_scope_and_time_bounds_agree(pair: tuple[LcmStore, LcmStore]) -> None:
    lite, pg = pair
    for kw in ({"all_conversations": True}, {"since": "2026-01-01T00:00:00Z"}, {"before": "2021-01-01T00:00:00Z"}):
        for pattern, mode in (("deploy", "full_text"), ("deploy|msg 1", "regex")):
            a = [h.id for h in lite.grep(pattern, mode=mode, session_key=KEY, **kw).hits]
            b = [h.id for h in pg.grep(pattern, mode=mode, session_key=KEY, **kw).hits]
            assert a == b and a, (pattern, kw)
    assert [h.id for h in pg.grep("other", mode="full_text", session_key=KEY).hits] == []  # tenancy: another family


# Relevance is FTS5's BM25 on both engines (lcm.pg.bm25): the same ids in the same order, the
# same scores. Patterns with word terms only, English and mixed (digits, paths, accents, a
# phrase, a word in most rows so its idf is FTS5's 1e-6 floor, CJK next to a word).
RELEVANCE = ['"deploy of" failed', "deploy", "deploys", "failed deploy", "error", "cafe", "E1234", "v4.1",
             "errno=111", "pytest", "passed pytest", "module_8.py", "src/module_4.py", "bug #12", "msg",
             "/var/log/app.log", "OR NOT", "迁移 E1234", "the"]  # fmt: skip


def _scored(store: LcmStore, pattern: str, scope: str = "messages") -> list[tuple[str, float]]:
    hits = store.grep(pattern, mode="full_text", sort="relevance", scope=scope, session_key=KEY, limit=200).hits
    return [(h.id, h.score) for h in hits]


def _same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]], pattern: str) -> None:
    assert [i for i, _ in b] == [i for i, _ in a], pattern
    for (i, x), (_, y) in zip(a, b):
        assert y == pytest.approx(x, rel=1e-6), (pattern, i)


def test_full_text_relevance_is_the_same_bm25(pair: tuple[LcmStore, LcmStore]) -> None:
    lite, pg = pair
    for pattern in RELEVANCE:
        want = _scored(lite, pattern)
        assert want and all(s > 0 for _, s in want), pattern  # real scores, not two lists of zeros
        _same_ranking(want, _scored(pg, pattern), pattern)
    # scores differ between hits, so the order is the scores' and not a tie break's
    assert len({s for _, s in _scored(lite, "deploy")}) > 2



def test_summary_relevance_is_the_same_bm25(make_pg_store: Callable[..., LcmStore],
                                            make_store: Callable[..., LcmStore], clock: ManualClock) -> None:  # fmt: skip
    cfg = {"fresh_tail_count": 4, "leaf_chunk_tokens": 120}
    lite, pg = _fill(make_store(**cfg), make_pg_store(**cfg), clock)
    for store in (lite, pg):  # no LLM here: deterministic fallback summaries, the same on both
        assert len(store.compact(KEY, force=True).leaf_summaries) > 2

    def by_text(store: LcmStore, pattern: str) -> list[tuple[str, float]]:
        # summary ids are random: a summary is named by its text (they are all distinct)
        text = {h.id: h.snippet for h in store.grep(pattern, mode="full_text", scope="summaries", session_key=KEY,
                                                    limit=200).hits}  # fmt: skip
        return [(text[i], s) for i, s in _scored(store, pattern, "summaries")]

    sizes: list[int] = []
    for pattern in ("deploy", "pytest", "module_8.py", "passed pytest", "E1234", "msg", "cafe", "数据库迁移", "デプロイ"):
        want = by_text(lite, pattern)
        assert want and all(s > 0 for _, s in want), pattern
        _same_ranking(want, by_text(pg, pattern), pattern)
        sizes.append(len({s for _, s in want}))
    assert max(sizes) > 2  # an order of several scores was compared, not single hits


def test_relevance_differs_only_where_the_tokenisers_do(make_pg_store: Callable[..., LcmStore],
                                                         make_store: Callable[..., LcmStore]) -> None:  # fmt: skip
    # A tsvector keeps at most 256 positions of a lexeme: a word said 300 times counts 256 times
    # on PostgreSQL (FTS5 counts 300), so that row scores a little lower. Same ids, same order
    # here; the other rows (accents, apostrophes, underscores, emoji, Thai) score the same.
    texts = ["deploy " * 300, "cafe\u0301 deploy fine", "don't deploy", "deploy_now deploy", "deploy \U0001f680 now",
             "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 deploy", "deploy once more"]  # fmt: skip
    lite, pg = make_store(), make_pg_store()
    for store in (lite, pg):
        store.ingest(KEY, [{"role": "user", "content": t} for t in texts])
    want, got = _scored(lite, "deploy"), _scored(pg, "deploy")
    assert [i for i, _ in got] == [i for i, _ in want]
    assert got[0][0] == "msg_1" and got[0][1] < want[0][1] * (1 - 1e-6)  # the capped row
    _same_ranking(want[1:], got[1:], "deploy")


def test_word_totals_follow_inserts_edits_and_deletes(make_pg_store: Callable[..., LcmStore]) -> None:
    # BM25's N and average lengths (words, trigrams) come from lcm_word_totals, kept by statement triggers: after
    # every kind of write they equal a count over the table (a wrong total would skew every score)
    pg = make_pg_store()
    pg.ingest(KEY, [{"role": "user", "content": t} for t in TEXTS])
    pg.ingest(OTHER, chat(6))

    def check() -> None:
        for table in ("messages", "summaries"):
            want = pg.db.query(f"SELECT count(*), coalesce(sum(n_words), 0), "
                               f"coalesce(sum(greatest(char_length(content) - 2, 0)), 0) FROM {table}")[0]
            got = pg.db.query("SELECT coalesce(sum(n_rows), 0), coalesce(sum(n_words), 0), coalesce(sum(n_grams), 0) "
                              "FROM lcm_word_totals WHERE tbl = ?", (table,))[0]  # fmt: skip
            assert tuple(got) == tuple(want), table

    check()
    with pg.db.atomic() as c:
        c.execute("UPDATE messages SET content = content || ' and three more words' WHERE id IN (1, 2)")
        c.execute("DELETE FROM messages WHERE id = 3")
    check()
    assert pg.db.query("SELECT sum(n_rows) FROM lcm_word_totals WHERE tbl = 'messages'")[0][0] == len(TEXTS) + 5


# CJK-only queries: FTS5 ranks them by BM25 over its trigram index (once ingest's trigram debt
# is paid, SQLite's steady state); PostgreSQL scores the same BM25 over substrings (lcm.pg.bm25).
# Lengths, repeats (overlapping ones: 哈哈哈 in 哈哈哈哈哈) and case (ÉCOLE) vary the scores.
CJK_TEXTS = ["数据库迁移在周三失败了，错误码 E1234", "数据库数据库，还是数据库迁移", "哈哈哈哈哈 数据库",
             "一条很长很长的消息：" + "无关的内容" * 20 + "数据库迁移", "明日の会議でデプロイ手順を確認します",
             "デプロイ手順 デプロイ手順 デプロイ", "ÉCOLE 数据库 école", "只有迁移", "数据库迁移 数据库迁移 数据库迁移", "数据库的デプロイ手順"]
CJK_RELEVANCE = ["数据库", "数据库迁移", "哈哈哈", "デプロイ手順", "数据库 迁移", "\"école 数据库\"", "数据库 デプロイ"]


def test_cjk_relevance_is_the_same_trigram_bm25(make_pg_store: Callable[..., LcmStore],
                                                 make_store: Callable[..., LcmStore], clock: ManualClock) -> None:  # fmt: skip
    lite, pg = make_store(), make_pg_store()
    for store in (lite, pg):
        store.ingest(KEY, [{"role": "user", "content": t} for t in CJK_TEXTS])
        store.ingest(KEY, chat(12))
    assert lite.index_trigrams() == len(CJK_TEXTS) + 12  # SQLite ranks by trigrams once they are indexed
    for pattern in CJK_RELEVANCE:
        want = _scored(lite, pattern)
        assert want and all(s > 0 for _, s in want), pattern  # real BM25 scores, not newest-first zeros
        _same_ranking(want, _scored(pg, pattern), pattern)
        for sort in ("recency", "hybrid"):
            a = [h.id for h in lite.grep(pattern, mode="full_text", sort=sort, session_key=KEY, limit=5).hits]
            assert [h.id for h in pg.grep(pattern, mode="full_text", sort=sort, session_key=KEY, limit=5).hits] == a
    assert len({s for _, s in _scored(lite, "数据库")}) > 3  # an order of several scores, not a tie break's


# Hybrid's word leg (lcm.semantic._lexical): the k best by BM25 over any of the pattern's words
# OR-ed (else any of its CJK terms), on both engines, equal scores by row id ("deploy alpha",
# "deploy gamma"). Those candidates (and the nearest vectors) are then ranked by lcm.hybrid,
# the same code on both engines: nothing embedded, by the word scores alone; all embedded, by
# the z-score fusion with the cosines. Either way a different candidate set would show here.
HYBRID = ["deploy failed", "deploy", "error timeout retry", "module_8.py pytest", "数据库迁移 失败了", "デプロイ手順",
          "nothing-here deploy"]  # fmt: skip


def test_hybrid_word_leg_is_the_same_bm25(pg_clean_url: str, clock: ManualClock) -> None:
    from amem.embed.hashing import HashingEmbedder

    answers: list[list[list[tuple[str, float]]]] = []
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for where in (":memory:", pg_clean_url):
        clock.set(start)
        with LcmStore(where, LcmConfig(log_file_enabled=False), clock=clock, embedder=HashingEmbedder(64)) as store:
            for key, batch in [(KEY, [{"role": "user", "content": t} for t in [*TEXTS, *CJK_TEXTS]]), (KEY, chat(30)),
                               (KEY, [{"role": "user", "content": t} for t in ("deploy deploy deploy failed",
                                                                               "deploy alpha", "deploy gamma")])]:  # fmt: skip
                store.ingest(key, batch)
            store.index_trigrams()  # SQLite's steady state: its CJK terms ranked by the trigram index
            got = [[(h.id, h.score) for h in store.grep(p, mode="hybrid", session_key=KEY, limit=8).hits] for p in HYBRID]
            store.embed_pending()
            got += [[(h.id, h.score) for h in store.grep(p, mode="hybrid", session_key=KEY, limit=8).hits] for p in HYBRID]
            answers.append(got)
    lite, pg = answers
    assert all(lite) and len({s for _, s in lite[1]}) > 3  # real answers of several scores
    for pattern, a, b in zip(HYBRID * 2, lite, pg):
        assert [i for i, _ in b] == [i for i, _ in a], pattern
        assert [s for _, s in b] == pytest.approx([s for _, s in a], rel=1e-6), pattern


def test_hybrid_reads_the_cosine_of_a_word_candidate_beyond_the_nearest_the_same_way(pg_clean_url: str,
                                                                                     clock: ManualClock) -> None:
    # 120 turns and limit 2 (50 candidates a leg): the word leg brings turns the vector leg did
    # not, whose stored cosines lcm.semantic reads before fusing; both engines, one answer.
    from amem.embed.hashing import HashingEmbedder

    answers: list[list[tuple[str, float]]] = []
    for where in (":memory:", pg_clean_url):
        clock.set(datetime(2026, 1, 1, tzinfo=timezone.utc))
        with LcmStore(where, LcmConfig(log_file_enabled=False), clock=clock, embedder=HashingEmbedder(64)) as store:
            store.ingest(KEY, chat(120))
            store.embed_pending()
            res = store.grep("fixed pytest passed case_7", mode="hybrid", session_key=KEY, limit=2, sort="relevance")
            answers.append([(h.id, h.score) for h in res.hits])
    lite, pg = answers
    assert lite and [i for i, _ in pg] == [i for i, _ in lite]
    assert [s for _, s in pg] == pytest.approx([s for _, s in lite], rel=1e-6)
