"""Congruence: the same data in SQLite and PostgreSQL gives the same grep answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from lcm import LcmStore, ManualClock

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
    lite, pg = make_store(), make_pg_store()
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
    # ts_rank_cd and BM25 may order ties and near-ties differently; the match set is the same
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
