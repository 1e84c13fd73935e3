"""grep: full-text with literal quoting and CJK, RE2 regex, scopes, time bounds, sorting, limits."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from lcm import LcmStore, ManualClock
from lcm.errors import LcmNotFoundError, LcmValidationError, RegexRefusedError

from .conftest import chat

KEY = "agent:main:s"


def test_full_text_quotes_operators_and_keeps_phrases(store: LcmStore) -> None:
    store.ingest(KEY, [
        {"role": "user", "content": "the deploy of v4.1 failed with OOM"},
        {"role": "assistant", "content": "deploy later; OR maybe NOT today"},
        {"role": "user", "content": "failed deploy again"},
    ])  # fmt: skip
    hits = store.grep('"deploy of" failed', mode="full_text", session_key=KEY).hits
    assert [h.id for h in hits] == ["msg_1"]
    # FTS5 operators and punctuation in user text are literals, not syntax errors.
    assert [h.id for h in store.grep("OR NOT", mode="full_text", session_key=KEY).hits] == ["msg_2"]
    assert [h.id for h in store.grep("v4.1", mode="full_text", session_key=KEY).hits] == ["msg_1"]
    assert store.grep("deploys", mode="full_text", session_key=KEY).hits  # porter stemming


def test_cjk_full_text(store: LcmStore) -> None:
    store.ingest(KEY, [
        {"role": "user", "content": "数据库迁移在周三失败了，错误码 E1234"},
        {"role": "assistant", "content": "明日の会議でデプロイ手順を確認します"},
        {"role": "user", "content": "无关的内容"},
    ])  # fmt: skip
    assert [h.id for h in store.grep("数据库迁移", mode="full_text", session_key=KEY).hits] == ["msg_1"]
    assert [h.id for h in store.grep("失败", mode="full_text", session_key=KEY).hits] == ["msg_1"]  # 2 chars
    assert [h.id for h in store.grep("デプロイ", mode="full_text", session_key=KEY).hits] == ["msg_2"]
    assert [h.id for h in store.grep("迁移 E1234", mode="full_text", session_key=KEY).hits] == ["msg_1"]  # mixed


def test_regex_mode_on_re2(store: LcmStore) -> None:
    store.ingest(KEY, [{"role": "user", "content": "error code E1234 in /var/log/app.log: timeout, retry"}, *chat(20)])
    hits = store.grep(r"E\d{4}", session_key=KEY).hits
    assert [h.id for h in hits] == ["msg_1"] and "E1234" in hits[0].snippet
    assert len(store.grep(r"module_1\d\.py", session_key=KEY, sort="relevance").hits) == 5
    # Patterns a backtracking engine could not run safely are ordinary for RE2.
    assert [h.id for h in store.grep("error.*timeout.*retry", session_key=KEY).hits] == ["msg_1"]
    assert store.grep("(a+)+$", session_key=KEY).hits == []
    start = time.monotonic()
    with pytest.raises(RegexRefusedError, match="backreference"):
        store.grep(r"(\w+) \1", session_key=KEY)
    assert time.monotonic() - start < 0.5  # refused up front, never run


def test_regex_scan_is_bounded(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(grep_regex_max_rows=10)
    store.ingest(KEY, chat(50))
    res = store.grep(r"q\d+x", session_key=KEY)
    assert res.truncated and res.scanned == 10 and res.warnings


def test_scope_family_conversation_and_all(store: LcmStore) -> None:
    store.ingest(KEY, [{"role": "user", "content": "alpha token"}])
    store.reset(KEY)
    store.ingest(KEY, [{"role": "user", "content": "alpha again"}])
    other = store.ingest("agent:other", [{"role": "user", "content": "alpha elsewhere"}])
    assert len(store.grep("alpha", session_key=KEY).hits) == 2
    assert len(store.grep("alpha", all_conversations=True).hits) == 3
    assert len(store.grep("alpha", conversation_id=other.conversation_id).hits) == 1
    with pytest.raises(LcmValidationError):
        store.grep("alpha")
    with pytest.raises(LcmNotFoundError):
        store.grep("alpha", conversation_id=999)
    assert store.grep("alpha", session_key="agent:unknown").hits == []


def test_since_before_and_sorting(store: LcmStore, clock: ManualClock) -> None:
    for i in range(5):
        store.ingest(KEY, [{"role": "user", "content": f"report {i} " + "deploy " * (5 - i)}])
        clock.advance(3600)
    newest = store.grep("deploy", mode="full_text", session_key=KEY, sort="recency").hits
    assert [h.id for h in newest] == ["msg_5", "msg_4", "msg_3", "msg_2", "msg_1"]
    best = store.grep("deploy", mode="full_text", session_key=KEY, sort="relevance").hits
    assert best[0].id == "msg_1"
    assert {h.id for h in store.grep("deploy", mode="full_text", session_key=KEY, sort="hybrid").hits} == {h.id for h in newest}
    window = store.grep("deploy", mode="full_text", session_key=KEY, since="2025-01-01T01:00:00Z",
                        before="2025-01-01T03:00:00+00:00").hits  # fmt: skip
    assert [h.id for h in window] == ["msg_3", "msg_2"]


def test_summaries_are_searchable(make_store: Callable[..., LcmStore]) -> None:
    store = make_store(fresh_tail_count=4)
    store.ingest(KEY, chat(40))
    store.compact(KEY, force=True)
    res = store.grep("module_2.py", mode="full_text", scope="summaries", session_key=KEY)
    assert res.hits and res.hits[0].kind == "summary" and res.hits[0].depth == 0
    both = store.grep("module_2.py", mode="full_text", scope="both", session_key=KEY)
    assert {h.kind for h in both.hits} == {"message", "summary"}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"mode": "fuzzy"}, "mode"),
        ({"scope": "attachments"}, "scope"), ({"sort": "random"}, "sort"), ({"since": "last week"}, "since"),
    ],
)  # fmt: skip
def test_bad_grep_arguments(store: LcmStore, kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(LcmValidationError) as err:
        store.grep("x", session_key=KEY, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field
    with pytest.raises(LcmValidationError):
        store.grep("  ", session_key=KEY)
    with pytest.raises(LcmValidationError):
        store.grep('""', mode="full_text", session_key=KEY)


def _stamp(day: int, second: int) -> str:
    return f"2026-01-{day:02d}T00:{second // 60:02d}:{second % 60:02d}+00:00"


def _newest_reference(store: LcmStore, needle: str, conv_ids: set[int] | None, limit: int) -> list[str]:
    rows = store.db.conn.execute("SELECT id, conversation_id, content, created_at FROM messages").fetchall()
    kept = [r for r in rows if needle in r[2].split() and (conv_ids is None or r[1] in conv_ids)]
    kept.sort(key=lambda r: (r[3], r[0]), reverse=True)
    return [f"msg_{r[0]}" for r in kept[:limit]]


def test_newest_first_is_right_after_an_import_of_older_messages(store: LcmStore) -> None:
    # A live conversation first, then an archive of older messages: row ids no longer follow time.
    store.ingest("agent:main:live", [
        {"role": "user", "content": f"deploy live {i}", "created_at": _stamp(20, i)} for i in range(30)
    ])  # fmt: skip
    assert store.db.conn.execute("SELECT count(*) FROM lcm_time_order").fetchone()[0] == 0
    store.ingest("agent:main:archive", [
        {"role": "user", "content": f"deploy archive {i}", "created_at": _stamp(1, i)} for i in range(300)
    ])  # fmt: skip
    assert [r[0] for r in store.db.conn.execute("SELECT name FROM lcm_time_order")] == ["messages"]
    for mode in ("full_text", "regex"):
        hits = store.grep("deploy", mode=mode, all_conversations=True, scope="messages", limit=5).hits
        assert [h.created_at[:10] for h in hits] == ["2026-01-20"] * 5, mode
        assert [h.id for h in hits] == _newest_reference(store, "deploy", None, 5)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_newest_first_matches_a_reference_in_any_time_order(store: LcmStore, seed: int) -> None:
    import random

    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta"]
    for batch in range(12):
        day = rng.randint(1, 28)  # batches arrive in random time order
        store.ingest(f"agent:main:c{batch % 3}", [
            {"role": "user", "content": " ".join(rng.choices(words, k=3)), "created_at": _stamp(day, i)}
            for i in range(rng.randint(5, 60))
        ])  # fmt: skip
    conv_ids = {c.id for c in store.conversations("agent:main:c1")}
    for word in words:
        for limit in (1, 3, 10):
            hits = store.grep(word, mode="full_text", all_conversations=True, scope="messages", limit=limit).hits
            assert [h.id for h in hits] == _newest_reference(store, word, None, limit)
            scoped = store.grep(word, mode="full_text", session_key="agent:main:c1", scope="messages", limit=limit)
            assert [h.id for h in scoped.hits] == _newest_reference(store, word, conv_ids, limit)
            regex = store.grep(rf"\b{word}\b", mode="regex", all_conversations=True, scope="messages", limit=limit)
            assert [h.id for h in regex.hits] == _newest_reference(store, word, None, limit)


@pytest.mark.parametrize("small_set", [0, 10**6])
def test_newest_first_sql_reads_large_and_small_match_sets_in_time_order(store: LcmStore, small_set: int) -> None:
    """Out of time order both strategies (time-index walk, sorted set) give the reference order."""
    import random

    from lcm.newest import SOURCES, newest_first_sql, newest_in_window

    rng = random.Random(5)
    for batch in range(10):
        day = rng.randint(1, 28)
        store.ingest(f"agent:main:c{batch % 2}", [
            {"role": "user", "content": rng.choice(["red fox", "blue fox", "red hen"]), "created_at": _stamp(day, i)}
            for i in range(40)
        ])  # fmt: skip
    c, src = store.db.conn, SOURCES["message"]
    sql, args = newest_first_sql(c, src, src.fts, '"red"', "1", [], small_set=small_set)
    assert ("INDEXED BY messages_created" in sql) == (small_set == 0)
    got = [f"msg_{r['id']}" for r in c.execute(f"{sql} LIMIT ?", [*args, 25])]
    assert got == _newest_reference(store, "red", None, 25)
    # the window shortcut either agrees with the reference or declines
    answered = 0
    for per_row in (1, 2, 50):
        rows = newest_in_window(c, src, src.fts, '"fox"', "1", [], 7, per_row=per_row)
        if rows is not None:
            answered += 1
            assert [f"msg_{r['id']}" for r in rows] == _newest_reference(store, "fox", None, 7)
    assert answered >= 1  # per_row=50 holds every match
