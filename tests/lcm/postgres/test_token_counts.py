"""A message's token count (BM25's D) on PostgreSQL: sent by ingest for ASCII texts, the server's own count everywhere."""

from __future__ import annotations

from lcm import LcmConfig, LcmStore
from lcm.pg.bm25 import ascii_token_count

KEY = "agent:main:s"
# ASCII edge cases (underscores, paths, digits, runs of punctuation, empty, only spaces) and texts
# the server counts itself (accents, a combining mark, CJK, emoji, Thai, a non-breaking space)
TEXTS = ["deploy_now deploy", "src/module_2.py: E1234 timeout after 5s (#17)", "", "   \t\n ", "don't -- stop!!",
         "a_b__c___d", "x" * 300, "v4.1.2-rc3+build.7", "cafe\u0301 d\u00e9ploy fine", "\u90e8\u7f72\u5931\u8d25\uff0c\u8bf7\u91cd\u8bd5 ok",
         "deploy \U0001f680 now", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 deploy", "one\u00a0two"]  # fmt: skip


def _mismatches(store: LcmStore) -> list[tuple[object, ...]]:
    return [tuple(r) for r in store.db.query(
        "SELECT id, content, n_words, lcm_ntok(content) FROM messages WHERE n_words IS DISTINCT FROM lcm_ntok(content)")]  # fmt: skip


def _totals_exact(store: LcmStore) -> bool:
    want = store.db.query("SELECT count(*), coalesce(sum(n_words), 0) FROM messages")[0]
    got = store.db.query("SELECT coalesce(sum(n_rows), 0), coalesce(sum(n_words), 0) FROM lcm_word_totals "
                         "WHERE tbl = 'messages'")[0]  # fmt: skip
    return tuple(got) == tuple(want)


def test_ascii_count_is_the_servers_for_every_ascii_character(pg_clean_url: str) -> None:
    # every ASCII character but NUL between letters, doubled, at both ends and next to a digit
    texts = [f"{ch}a{ch}b{ch}{ch}9{ch}" for ch in map(chr, range(1, 128))]
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        server = [int(r[0]) for r in store.db.query("SELECT lcm_ntok(t) FROM unnest(?::text[]) t", (texts,))]
    assert [ascii_token_count(t) for t in texts] == server
    assert ascii_token_count("d\u00e9ploy") is None  # outside ASCII the server's locale decides


def test_ingested_counts_equal_the_servers_and_totals_stay_exact(pg_clean_url: str) -> None:
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        store.ingest(KEY, [{"role": "user", "content": t} for t in TEXTS])
        assert _mismatches(store) == []
        assert store.db.query("SELECT n_words FROM messages ORDER BY id LIMIT 2") == [(3,), (9,)]
        assert _totals_exact(store)


def test_other_writers_get_the_servers_count(pg_clean_url: str) -> None:
    # a row inserted without a count (lcm.pg.copy's way), an edited text, and a count set by hand
    with LcmStore(pg_clean_url, LcmConfig(log_file_enabled=False)) as store:
        store.ingest(KEY, [{"role": "user", "content": "first message"}])
        with store.db.atomic() as c:
            c.execute("INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, created_at) "
                      "SELECT conversation_id, 2, 'user', 'three more words', 3, 'h', created_at FROM messages")  # fmt: skip
            c.execute("UPDATE messages SET content = 'now it has five words' WHERE seq = 1")
        assert _mismatches(store) == [] and _totals_exact(store)
        with store.db.atomic() as c:
            c.execute("UPDATE messages SET n_words = 99 WHERE seq = 2")
        assert _mismatches(store) == [] and _totals_exact(store)
        assert [r[0] for r in store.db.query("SELECT n_words FROM messages ORDER BY seq")] == [5, 3]
