"""Rotate (lcm.operator.rotate): a checked rolling backup, then the live context compacted to its fresh tail."""

from __future__ import annotations

import gzip
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lcm import LcmStore
from lcm.errors import ConcurrentChangeError, LcmNotFoundError, LcmValidationError
from lcm.operator import browse
from lcm.operator.rotate import apply_restore, apply_rotate, plan_restore, plan_rotate
from lcm.operator.snapshot import verify_snapshot
from tests.lcm.conftest import ScriptedLLM, chat
from tests.lcm.kit_helpers import DAG_CONFIG, KEY


class Interrupted(BaseException):
    """Stands for a crash in the middle of the compaction (the summarizer catches Exception)."""


def rotating_store(make_store: Callable[..., LcmStore], tmp_path: Path, n: int = 40, **overrides: Any) -> LcmStore:
    store = make_store(**{**DAG_CONFIG, "rotate_backup_dir": str(tmp_path / "backups"), **overrides})
    store.ingest(KEY, chat(n))
    return store


def context_shape(store: LcmStore, conv: int) -> list[tuple[str, str, int]]:
    return [(str(r[0]), str(r[1] if r[0] == "message" else r[2]), int(r[3])) for r in store.db.query(
        "SELECT ci.item_type, ci.message_id, ci.summary_id, coalesce(m.token_count, s.token_count, 0) "
        "FROM context_items ci LEFT JOIN messages m ON m.id = ci.message_id "
        "LEFT JOIN summaries s ON s.summary_id = ci.summary_id WHERE ci.conversation_id = ? ORDER BY ci.ordinal",
        (conv,))]  # fmt: skip


def test_rotate_dry_run_shows_the_impact_and_writes_nothing(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path)
    conv = store.conversation(KEY)
    assert conv is not None
    before = context_shape(store, conv.id)
    plan = plan_rotate(store, KEY)
    assert (plan.conversation_id, plan.context_items, plan.tail_items, plan.compactable_messages) == (conv.id, 40, 4, 36)
    assert plan.context_tokens_before == sum(t for _, _, t in before)
    assert plan.compactable_tokens + plan.tail_tokens == plan.context_tokens_before
    assert plan.to_dict()["token_delta"] == 0 and "items" not in plan.to_dict()
    assert context_shape(store, conv.id) == before
    assert not (tmp_path / "backups").exists()


def test_rotate_backs_up_then_compacts_to_the_fresh_tail(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path)
    conv = store.conversation(KEY)
    assert conv is not None
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert done.applied and done.summaries_made > 0 and done.backup is not None
    # the backup: owner-only, read back whole, the conversation as it was before the compaction
    path = Path(done.backup.path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    info = verify_snapshot(path)
    assert info.counts["messages"] == 40 and info.counts["context_items"] == 40 and info.counts["summaries"] == 0
    # the same conversation, the same key, every message kept; the context is summaries + the raw tail
    assert store.conversation(KEY) == conv
    assert store.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv.id,)) == 40
    shape = context_shape(store, conv.id)
    assert [t for t, _, _ in shape[-4:]] == ["message"] * 4
    assert all(t == "summary" for t, _, _ in shape[:-4])
    assert done.context_tokens_after == sum(t for _, _, t in shape) < done.context_tokens_before
    assert done.to_dict()["token_delta"] < 0
    hits = store.grep("module_2.py", mode="full_text", session_key=KEY).hits
    assert any("msg 2:" in h.snippet or "module_2" in h.snippet for h in hits)
    assert store.doctor().ok


def test_rotate_keeps_the_newest_backups(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path, rotate_keep_backups=2)
    made = []
    for i in range(3):
        done = apply_rotate(store, plan_rotate(store, KEY))
        assert done.backup is not None
        made.append(done.backup.path)
        store.ingest(KEY, chat(10, start=100 + 10 * i))
    left = sorted(str(p) for p in (tmp_path / "backups").iterdir())
    assert left == sorted(made[1:]) and done.pruned_backups == [made[0]]


def test_a_rotation_that_dies_midway_leaves_the_conversation_as_it_was(make_store: Callable[..., LcmStore],
                                                                        tmp_path: Path) -> None:  # fmt: skip
    # the third summary call dies: the two summaries made before it never reach the store
    llm = ScriptedLLM(["Summary one. Expand for details about: module", "Summary two. Expand for details about: bug",
                       Interrupted("killed")], default="late")  # fmt: skip
    store = rotating_store(make_store, tmp_path, llm=llm)
    conv = store.conversation(KEY)
    assert conv is not None
    before = context_shape(store, conv.id)
    with pytest.raises(Interrupted):
        apply_rotate(store, plan_rotate(store, KEY))
    assert len(llm.calls) >= 3
    assert context_shape(store, conv.id) == before
    assert store.db.scalar("SELECT count(*) FROM summaries") == 0
    # the backup was written and checked before the compaction began: it stays, whole
    backups = list((tmp_path / "backups").iterdir())
    assert len(backups) == 1 and verify_snapshot(backups[0]).counts["messages"] == 40


def test_rotate_refuses_a_context_that_changed_since_the_plan(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path)
    plan = plan_rotate(store, KEY)
    store.ingest(KEY, chat(2, start=500))
    with pytest.raises(ConcurrentChangeError):
        apply_rotate(store, plan)
    assert store.db.scalar("SELECT count(*) FROM summaries") == 0
    assert not (tmp_path / "backups").exists() or not list((tmp_path / "backups").iterdir())
    done = apply_rotate(store, plan_rotate(store, KEY))
    with pytest.raises(LcmValidationError, match="applied already"):
        apply_rotate(store, done)


def test_rotate_refuses_bad_input(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path, stateless_session_patterns=["agent:*:ro"])
    with pytest.raises(LcmValidationError, match="session_key"):
        plan_rotate(store, " ")
    with pytest.raises(LcmNotFoundError):
        plan_rotate(store, "agent:kit:nobody")
    with pytest.raises(LcmValidationError, match="statelessSessionPatterns"):
        plan_rotate(store, "agent:kit:ro")
    (tmp_path / "a-file").write_text("not a directory")
    blocked = make_store(**{**DAG_CONFIG, "rotate_backup_dir": str(tmp_path / "a-file" / "backups")})
    blocked.ingest(KEY, chat(10))
    with pytest.raises(LcmValidationError, match="cannot write the backup") as unwritable:
        apply_rotate(blocked, plan_rotate(blocked, KEY))
    assert unwritable.value.field == "rotateBackupDir"
    assert blocked.db.scalar("SELECT count(*) FROM summaries") == 0
    bare = make_store()  # in memory (or a server): no data directory to keep backups in
    bare.ingest(KEY, chat(4))
    with pytest.raises(LcmValidationError) as no_dir:
        plan_rotate(bare, KEY)
    assert no_dir.value.field == "rotateBackupDir"


def test_restore_brings_a_backup_back_as_a_new_conversation(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path)
    store.compact(KEY, force=True)  # a DAG before the rotation: the backup holds summaries and edges
    conv = store.conversation(KEY)
    assert conv is not None
    before = context_shape(store, conv.id)
    summaries = store.db.scalar("SELECT count(*) FROM summaries WHERE conversation_id = ?", (conv.id,))
    assert summaries > 0
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert done.backup is not None
    plan = plan_restore(store, done.backup.path)
    assert plan.source_conversation_id == conv.id and plan.session_key.startswith(f"restore:{conv.id}:")
    assert store.conversation(plan.session_key) is None  # the plan wrote nothing
    restored = apply_restore(store, plan)
    new = restored.conversation_id
    assert restored.applied and new is not None and new != conv.id and not restored.warnings
    # the context as it was before the rotation: the same kinds and tokens, under new ids
    assert [(t, n) for t, _, n in context_shape(store, new)] == [(t, n) for t, _, n in before]
    assert store.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ?", (new,)) == 40
    assert store.db.scalar("SELECT count(*) FROM summaries WHERE conversation_id = ?", (new,)) == summaries
    tree = browse.summary_tree(store.db, new)
    assert tree.roots
    found = store.grep("module_2.py", mode="full_text", conversation_id=new).hits
    assert found and all(h.conversation_id == new for h in found)
    assert store.doctor().ok
    with pytest.raises(LcmValidationError, match="already has an active conversation"):
        plan_restore(store, done.backup.path, session_key=plan.session_key)


def test_restore_refuses_a_damaged_backup(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    store = rotating_store(make_store, tmp_path)
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert done.backup is not None
    good = Path(done.backup.path)
    lines = gzip.decompress(good.read_bytes()).splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b"".join(lines[:-1])))  # no trailer
    with pytest.raises(LcmValidationError, match="cut short"):
        plan_restore(store, cut)
    changed = tmp_path / "changed.jsonl.gz"
    changed.write_bytes(gzip.compress(b"".join(lines).replace(b"module_2.py", b"module_X.py")))
    with pytest.raises(LcmValidationError, match="digest"):
        plan_restore(store, changed)
    half = tmp_path / "half.jsonl.gz"
    half.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(LcmValidationError, match="damaged or cut short"):
        plan_restore(store, half)
    with pytest.raises(LcmValidationError, match="no backup file"):
        plan_restore(store, tmp_path / "missing.jsonl.gz")
    assert len(store.conversations()) == 1


def test_restore_keeps_large_file_references_and_says_when_a_file_is_gone(make_store: Callable[..., LcmStore],
                                                                          tmp_path: Path) -> None:  # fmt: skip
    store = rotating_store(make_store, tmp_path, n=6, large_file_threshold_tokens=1000)
    big = "\n".join(f"line {i}: value={i * 7} status=ok" for i in range(800))
    stored = store.ingest(KEY, [{"role": "tool", "content": big}])
    (file_id,) = stored.file_ids
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert done.backup is not None and done.backup.counts["large_files"] == 1
    # the file's record is still stored: the restored message shares it, nothing to warn about
    first = apply_restore(store, plan_restore(store, done.backup.path, session_key="restored:1"))
    assert not first.warnings
    assert store.db.scalar("SELECT count(*) FROM large_files WHERE file_id = ?", (file_id,)) == 1
    assert store.describe(file_id).to_dict()["id"] == file_id
    # the record gone, the content still on disk: the restored conversation records it again
    path = store.db.scalar("SELECT storage_path FROM large_files WHERE file_id = ?", (file_id,))
    with store.db.atomic() as c:
        c.execute("DELETE FROM large_files WHERE file_id = ?", (file_id,))
    second = apply_restore(store, plan_restore(store, done.backup.path, session_key="restored:2"))
    assert not second.warnings
    assert store.db.scalar("SELECT conversation_id FROM large_files WHERE file_id = ?", (file_id,)) == second.conversation_id
    # record and content gone: said, and the message keeps its reference text
    with store.db.atomic() as c:
        c.execute("DELETE FROM large_files WHERE file_id = ?", (file_id,))
    store.files.resolve(str(path)).unlink()
    third = apply_restore(store, plan_restore(store, done.backup.path, session_key="restored:3"))
    assert len(third.warnings) == 1 and file_id in third.warnings[0] and "no longer stored" in third.warnings[0]
    assert store.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ? AND file_id = ?",
                           (third.conversation_id, file_id)) == 1  # fmt: skip


def test_the_host_goes_on_while_a_rotation_summarizes(make_store: Callable[..., LcmStore], tmp_path: Path) -> None:
    """The model's calls run on a private copy: another thread's ingest (this session's next
    turn, another session's) and assemble do not wait for them, and the turn is kept."""
    waited: list[float] = []

    def host_turn() -> None:
        import time

        start = time.monotonic()
        store.ingest(KEY, chat(2, start=500))
        store.ingest("agent:kit:other", chat(2))
        store.assemble("agent:kit:other", 5000)
        waited.append(time.monotonic() - start)

    def summarize(system: str, user: str) -> str:
        if not waited:
            worker = threading.Thread(target=host_turn)
            worker.start()
            worker.join(timeout=10)  # a store lock held by the rotation would keep the worker waiting
            assert not worker.is_alive(), "the host's turn waited for the rotation"
        return "what happened, in short"

    store = rotating_store(make_store, tmp_path, llm=ScriptedLLM(default=summarize))
    conv = store.conversation(KEY)
    assert conv is not None
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert waited and done.summaries_made > 0
    assert done.backup is not None and done.backup.counts["messages"] == 40
    shape = context_shape(store, conv.id)
    # the planned fresh tail, then the turn ingested during the rotation, both raw
    assert [t for t, _, _ in shape[-6:]] == ["message"] * 6 and all(t == "summary" for t, _, _ in shape[:-6])
    assert store.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv.id,)) == 42
    assert store.doctor().ok


def test_a_summary_the_model_failed_is_recorded_on_the_live_conversation(make_store: Callable[..., LcmStore],
                                                                         tmp_path: Path) -> None:  # fmt: skip
    store = rotating_store(make_store, tmp_path, llm=ScriptedLLM(default=RuntimeError("model down")))
    conv = store.conversation(KEY)
    assert conv is not None
    done = apply_rotate(store, plan_rotate(store, KEY))
    assert done.summaries_made > 0
    statuses = {str(r[0]) for r in store.db.query("SELECT status FROM summaries WHERE conversation_id = ?", (conv.id,))}
    assert statuses == {"fallback"}  # repair finds them, as after any compaction
    reasons = [str(r[0]) for r in store.db.query("SELECT reason FROM lcm_failures WHERE conversation_id = ?", (conv.id,))]
    assert reasons and all("fell back to extractive" in r for r in reasons)
