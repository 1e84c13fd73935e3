"""A message larger than ``leafChunkTokens`` (a large-file reference) never blocks compaction."""

from __future__ import annotations

from collections.abc import Callable

from lcm import LcmStore

from .conftest import chat
from .test_compaction import reachable_message_ids

KEY = "agent:main:files"
BIG = "\n".join(f"line {i}: value={i * 7} status=ok path=/srv/app/module_{i}.py" for i in range(3000))


def test_a_reference_bigger_than_a_chunk_is_compacted_alone(make_store: Callable[..., LcmStore]) -> None:
    # The stored reference (~590 tokens) is bigger than a whole leaf chunk (200 tokens).
    store = make_store(leaf_chunk_tokens=200, large_file_threshold_tokens=1000, fresh_tail_count=8)
    store.ingest(KEY, chat(4))
    done = store.ingest(KEY, [{"role": "tool", "content": BIG, "name": "dump.txt"}])
    store.ingest(KEY, chat(20, start=4))
    conv = store.conversation(KEY)
    assert conv is not None and done.file_ids
    ref = store.db.query("SELECT id, token_count FROM messages WHERE file_id = ?", (done.file_ids[0],))[0]
    assert ref["token_count"] > 200
    res = store.compact(KEY, force=True)
    # Before the fix the planner skipped the whole run of messages around the reference:
    # ran=False, nothing compacted, on every later call too.
    assert res.ran and res.tokens_after < res.tokens_before
    alone = store.db.query(
        "SELECT summary_id FROM summary_messages GROUP BY summary_id HAVING count(*) = 1 AND max(message_id) = ?",
        (ref["id"],),
    )
    assert len(alone) == 1  # the oversized message got a leaf of its own
    content = store.db.query("SELECT content FROM summaries WHERE summary_id = ?", (alone[0]["summary_id"],))[0][0]
    assert done.file_ids[0] in content  # the summary still names the file to read back
    raw = {it.id for it in store.assemble(KEY, 100000).items if it.type == "message"}
    assert f"msg_{ref['id']}" not in raw
    all_ids = {r[0] for r in store.db.query("SELECT id FROM messages WHERE conversation_id = ?", (conv.id,))}
    assert reachable_message_ids(store, conv.id) == all_ids
    assert store.doctor().ok


def test_messages_that_never_fill_a_chunk_together_still_compact(make_store: Callable[..., LcmStore]) -> None:
    # Each pair overflows the chunk, so every chunk is one message below leafMinFanout.
    store = make_store(leaf_chunk_tokens=60, fresh_tail_count=2, max_sweep_iterations=100)
    store.ingest(KEY, [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 40}
                       for i in range(12)])  # fmt: skip
    res = store.compact(KEY, force=True)
    assert res.ran and len(res.leaf_summaries) >= 5
