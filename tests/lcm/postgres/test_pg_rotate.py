"""Rotate on PostgreSQL while the host keeps ingesting: its turns commit beside the rotation, nothing is lost."""

from __future__ import annotations

from pathlib import Path

from lcm import LcmConfig, LcmStore, ManualClock
from lcm.operator.rotate import apply_rotate, plan_rotate
from lcm.operator.snapshot import verify_snapshot
from tests.lcm.conftest import ScriptedLLM, chat
from tests.lcm.kit_helpers import DAG_CONFIG, KEY


def test_a_turn_ingested_during_a_rotation_is_kept(pg_url: str, tmp_path: Path) -> None:
    cfg = LcmConfig(**{**DAG_CONFIG, "rotate_backup_dir": str(tmp_path / "b"), "large_files_dir": str(tmp_path / "f")})
    with LcmStore(pg_url, cfg, clock=ManualClock()) as host:
        host.ingest(KEY, chat(40))
        turned: list[int] = []

        def summarize(system: str, user: str) -> str:
            if not turned:  # the host's next turn arrives while the rotation summarizes
                turned.append(host.ingest(KEY, chat(2, start=500)).stored)
            return "what happened, in short"

        with LcmStore(pg_url, cfg, llm=ScriptedLLM(default=summarize), clock=ManualClock()) as operator:
            done = apply_rotate(operator, plan_rotate(operator, KEY))
        assert turned == [2] and done.applied and done.summaries_made > 0 and done.backup is not None
        assert verify_snapshot(done.backup.path).counts["messages"] == 40  # the backup is the state it rotated
        conv = host.conversation(KEY)
        assert conv is not None and conv.id == done.conversation_id
        assert host.db.scalar("SELECT count(*) FROM messages WHERE conversation_id = ?", (conv.id,)) == 42
        newest = [r[0] for r in host.db.query(
            "SELECT m.content FROM context_items ci JOIN messages m ON m.id = ci.message_id "
            "WHERE ci.conversation_id = ? ORDER BY ci.ordinal DESC LIMIT 2", (conv.id,))]  # fmt: skip
        assert all(t.startswith("msg 50") for t in newest)  # the new turn is in the context, last
        assert host.doctor().ok
