"""The deferred trigram index (lcm.trigram): grep finds what ingest left pending, the debt is
shown and paid, other writers keep the watermark rule, and a killed payment leaves it exact."""

from __future__ import annotations

import signal
import sqlite3
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from lcm import LcmConfig, LcmStore
from lcm.trigram import MAX_PENDING, indexed_upto

from .children import run_child
from .conftest import chat

KEY = "agent:main:chat"
CJK = [{"role": "user", "content": "数据库迁移在周一完成"}, {"role": "assistant", "content": "好的，数据库迁移已记录"}]


def tri_ids(store: LcmStore) -> list[int]:
    return [int(r[0]) for r in store.db.query("SELECT id FROM messages_tri_docsize ORDER BY id")]


def exact(store: LcmStore) -> None:
    """The rule: the index holds exactly the messages up to the watermark, and FTS5 agrees."""
    with store.db.atomic() as c:
        upto = indexed_upto(c)
        below = [int(r[0]) for r in c.execute("SELECT id FROM messages WHERE id <= ? ORDER BY id", (upto,))]
        pending = c.execute("SELECT 1 FROM messages WHERE id > ?", (upto,)).fetchone()
        c.execute("INSERT INTO messages_tri(messages_tri, rank) VALUES ('integrity-check', ?)", (0 if pending else 1,))
    assert tri_ids(store) == below


def greps(store: LcmStore) -> dict[str, list[str]]:
    """Every grep path that reads the trigram index, in every order."""
    out: dict[str, list[str]] = {}
    for sort in ("recency", "relevance", "hybrid"):
        out[f"cjk-{sort}"] = [h.id for h in store.grep("数据库迁移", mode="full_text", sort=sort, session_key=KEY).hits]
        out[f"words+cjk-{sort}"] = [h.id for h in store.grep("好的 数据库迁移", mode="full_text", sort=sort,
                                                             session_key=KEY).hits]
        out[f"regex-{sort}"] = [h.id for h in store.grep(r"module_1\d+\.py", sort=sort, session_key=KEY).hits]
    return out


def test_grep_finds_pending_messages_before_the_debt_is_paid(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, chat(40))
    store.index_trigrams()
    res = store.ingest(KEY, chat(20, start=100) + CJK)  # the new ones: not paid
    assert store.status().debt.trigram == len(res.message_ids) == 22  # type: ignore[union-attr]
    assert tri_ids(store) == list(range(1, 41))  # nothing of the new batch is in the index
    before = greps(store)
    cjk_ids = {f"msg_{i}" for i in res.message_ids[-2:]}
    assert set(before["cjk-recency"]) == cjk_ids and set(before["cjk-relevance"]) == cjk_ids
    assert set(before["words+cjk-recency"]) == {f"msg_{res.message_ids[-1]}"}
    # module_100..module_118 (even i: user messages) are all in the pending batch, plus module_10..18 before
    assert len(before["regex-recency"]) == 10 + 5 and before["regex-recency"][0] == f"msg_{res.message_ids[18]}"
    assert store.doctor().ok  # a pending tail is debt, not damage
    assert store.index_trigrams() == 22
    assert store.status().debt.trigram == 0  # type: ignore[union-attr]
    exact(store)
    after = greps(store)
    for name, ids in after.items():
        assert sorted(ids) == sorted(before[name]), name
        if name.endswith("recency"):
            assert ids == before[name], name  # newest first either way


def test_out_of_time_order_tail_keeps_newest_first(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, [{"role": "user", "content": "数据库迁移 new", "created_at": "2026-03-01T00:00:00Z"}])
    store.index_trigrams()
    old = store.ingest(KEY, [{"role": "user", "content": "数据库迁移 old", "created_at": "2025-01-01T00:00:00Z"}])
    hits = store.grep("数据库迁移", mode="full_text", session_key=KEY).hits
    assert [h.id for h in hits] == ["msg_1", f"msg_{old.message_ids[0]}"]
    assert [h.id for h in store.grep("数据库迁移 (new|old)", session_key=KEY).hits] == [h.id for h in hits]


def test_ingest_pays_inline_past_the_bound(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, chat(10))
    assert store.status().debt.trigram == 10  # type: ignore[union-attr]
    from lcm.ingest import store_messages
    from lcm.normalize import normalize_messages

    now = store._now()
    with store.db.atomic() as c:  # the old inline path: a bound of 0 pays the whole tail
        store_messages(c, 1, normalize_messages(chat(3, start=50), now), store.config, store.files, now,
                       trigram_max_pending=0)
    assert store.status().debt.trigram == 0 and MAX_PENDING > 0  # type: ignore[union-attr]
    exact(store)


def test_other_writers_keep_the_rule(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    conv = store.ingest(KEY, chat(4)).conversation_id
    store.index_trigrams()

    def write(content: str, seq: int) -> None:
        with store.db.atomic() as c:
            c.execute("INSERT INTO messages(conversation_id, seq, role, content, token_count, identity_hash, "
                      "created_at) VALUES (?, ?, 'user', ?, 5, 'h', '2026-01-01T00:00:00.000Z')", (conv, seq, content))

    write("by hand: walrus-lantern", 190)  # nothing pending: indexed at once, the mark moves
    assert store.status().debt.trigram == 0  # type: ignore[union-attr]
    store.ingest(KEY, chat(2, start=10))
    write("by hand: otter-lantern", 290)  # something pending below: it waits its turn
    assert store.status().debt.trigram == 3  # type: ignore[union-attr]
    exact(store)
    with store.db.atomic() as c:  # an edit and a delete of pending rows touch no index entry
        c.execute("UPDATE messages SET content = 'edited: heron-lantern' WHERE content LIKE '%otter%'")
        c.execute("DELETE FROM messages WHERE id = (SELECT max(id) - 1 FROM messages)")
        c.execute("UPDATE messages SET content = 'edited: crane-lantern' WHERE content LIKE '%walrus%'")
    exact(store)
    assert [h.snippet for h in store.grep("lantern", session_key=KEY).hits] == ["edited: heron-lantern",
                                                                                 "edited: crane-lantern"]
    store.index_trigrams()
    exact(store)
    with store.db.atomic() as c:  # the newest rows deleted, their ids reused: indexed at once
        c.execute("DELETE FROM messages WHERE id > 3")
    reused = store.ingest(KEY, chat(2, start=30)).message_ids
    assert reused == [4, 5] and tri_ids(store) == [1, 2, 3, 4, 5]
    exact(store)
    assert store.status().debt.trigram == 0  # type: ignore[union-attr]


def test_after_turn_and_maintenance_pay(make_store: Callable[..., LcmStore]) -> None:
    store = make_store()
    store.ingest(KEY, chat(6))
    assert store.after_turn(KEY) is None
    assert store.status().debt.trigram == 0  # type: ignore[union-attr]
    store.ingest(KEY, chat(6, start=20))
    store.maintenance()
    assert store.status().debt.trigram == 0  # type: ignore[union-attr]
    exact(store)


_CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from lcm import LcmConfig, LcmStore
    from lcm.trigram import index_pending
    store = LcmStore({path!r}, LcmConfig(log_file_enabled=False))
    print("READY", flush=True)
    index_pending(store.db, chunk=50)
    print("DONE", flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_killed_payment_leaves_the_index_exact(tmp_path: Path, make_store: Callable[..., LcmStore]) -> None:
    path = str(tmp_path / "lcm.db")
    store = make_store(path, log_file_enabled=False)
    for b in range(20):
        store.ingest(f"{KEY}{b}", chat(1000, start=b * 1000))
    total = store.status().messages
    store.close()
    script = tmp_path / "child.py"
    script.write_text(_CHILD.format(root=str(Path(__file__).parents[2]), path=path))
    code = run_child(str(tmp_path), script, kill_after=0.15)
    again = make_store(path, log_file_enabled=False)
    left = again.status().debt.trigram  # type: ignore[union-attr]
    assert code == -signal.SIGKILL and 0 < left < total  # the kill landed part-way through
    exact(again)
    assert again.index_trigrams() == left
    exact(again)
    assert tri_ids(again) == list(range(1, total + 1))
    with pytest.raises(sqlite3.IntegrityError):  # a row indexed twice would be refused, not doubled
        with again.db.atomic() as c:
            c.execute("INSERT INTO messages_tri_docsize(id, sz) VALUES (1, x'00')")
    matched = again.db.scalar("SELECT count(*) FROM messages_tri WHERE messages_tri MATCH '\"bug #17\"'")
    assert matched == again.db.scalar("SELECT count(*) FROM messages WHERE content LIKE '%bug #17%'") == 555


def test_hybrid_lexical_leg_sees_pending_cjk() -> None:
    from amem.embed.hashing import HashingEmbedder

    with LcmStore(":memory:", LcmConfig(log_file_enabled=False), embedder=HashingEmbedder(64)) as store:
        store.ingest(KEY, chat(4))
        store.index_trigrams()
        new = store.ingest(KEY, CJK).message_ids  # neither indexed nor embedded
        hits = store.grep("数据库迁移", mode="hybrid", session_key=KEY).hits
        assert {h.id for h in hits} >= {f"msg_{i}" for i in new}
