"""What a message says about itself beyond role and text, kept (shared by the SQLite and the
PostgreSQL tests): the host's ``name`` (the speaker of a chat of several people, a tool's name)
and the role as the host spelled it. Ingest dropped both: "alice: see you then" came back as
"user: see you then", and a developer message as a system one."""

from __future__ import annotations

from lcm import LcmStore

KEY = "agent:a1:speakers"
CHAT = [
    {"role": "developer", "content": "Answer briefly."},
    {"role": "user", "name": "alice", "content": "Shall we meet at the Blue Door cafe on Friday?"},
    {"role": "user", "name": "bob", "content": "Friday works, see you at noon."},
    {"role": "user", "content": "(no speaker named here)"},
    {"role": "function", "name": "calendar_add", "content": "event created"},
]


def check_speakers_are_kept(store: LcmStore) -> None:
    store.ingest(KEY, CHAT)
    items = store.assemble(KEY, 10_000).items
    got = [(it.role, it.name, it.source_role) for it in items]
    assert got == [("system", None, "developer"), ("user", "alice", None), ("user", "bob", None),
                   ("user", None, None), ("tool", "calendar_add", "function")]
    shown = [it.to_dict() for it in items]
    assert "name" not in shown[0] and shown[0]["source_role"] == "developer"
    assert shown[1]["name"] == "alice" and "source_role" not in shown[1]
    assert "name" not in shown[3] and "source_role" not in shown[3]  # no nulls padded in
    first = items[1].id
    described = store.describe(first, session_key=KEY)
    assert (described.name, described.source_role) == ("alice", None)  # type: ignore[union-attr]


def check_summaries_say_who_spoke(store: LcmStore) -> None:
    turns = [{**m, "content": f"{m['content']} (turn {i})",
              "created_at": f"2025-01-01T{i // 60:02d}:{i % 60:02d}:00Z"}
             for i, m in enumerate(CHAT * 30)]
    store.ingest(KEY, turns)
    result = store.compact(KEY, force=True)
    assert result.ran and result.leaf_summaries
    text = " ".join(r[0] for r in store.db.query("SELECT content FROM summaries"))
    assert "alice:" in text or "bob:" in text, text[:500]
    expanded = store.expand([result.leaf_summaries[0]], session_key=KEY, token_cap=100_000)
    named = {m.name for m in expanded.messages if m.name}
    assert named <= {"alice", "bob", "calendar_add"} and named
