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


#: a group chat exported with minute stamps: four people answer "ok" in the same minute
GROUP_OK = [{"role": "user", "name": who, "content": "ok", "created_at": "2025-03-01T09:15:00Z"}
            for who in ("alice", "bob", "carol", "dave")]


def check_speakers_tell_equal_messages_apart(store: LcmStore) -> None:
    """The same words from two people at the same time are two messages: ingest dropped all
    but alice's "ok" as re-sent copies of it, and four of them read as a replay flood that
    refused the whole batch."""
    result = store.ingest(KEY, GROUP_OK)
    assert result.stored == 4, result
    said = [(it.name, it.content) for it in store.assemble(KEY, 10_000).items]
    assert said == [("alice", "ok"), ("bob", "ok"), ("carol", "ok"), ("dave", "ok")]
    # The same batch again is still a re-send, speaker for speaker, and one speaker's copies
    # are still one message.
    assert store.ingest(KEY, GROUP_OK).stored == 0
    assert store.ingest(KEY, [GROUP_OK[1], GROUP_OK[1]]).stored == 0
    # Eve's "ok" at that minute is new; alice's, sent again without her name, is not.
    late = [{**GROUP_OK[0], "name": "eve"}, {k: v for k, v in GROUP_OK[0].items() if k != "name"}]
    assert store.ingest(KEY, late).stored == 1
    # Four "ok" from one speaker in one second is still a flood.
    flood = [{"role": "user", "name": "mallory", "content": "ok"}] * 4
    try:
        store.ingest(KEY, flood)
    except Exception as exc:  # noqa: BLE001 - the type is checked below
        assert type(exc).__name__ == "ReplayFloodError", exc
    else:
        raise AssertionError("four identical messages of one speaker in one second were taken")


def check_grown_window_respects_speakers(store: LcmStore) -> None:
    """A host's window sent again is dropped only where the speakers line up too: bob and
    alice saying "ok" in the other order is not the stored tail."""
    assert store.ingest(KEY, [{"role": "user", "name": "alice", "content": "ok"},
                              {"role": "user", "name": "bob", "content": "ok"}]).stored == 2
    swapped = [{"role": "user", "name": "bob", "content": "ok"},
               {"role": "user", "name": "alice", "content": "ok"},
               {"role": "user", "name": "carol", "content": "lunch?"}]
    assert store.ingest(KEY, swapped).stored == 3
    again = [{"role": "user", "name": "alice", "content": "ok"},
             {"role": "user", "name": "carol", "content": "lunch?"},
             {"role": "user", "name": "dave", "content": "yes"}]
    assert store.ingest(KEY, again).stored == 1  # the window re-sent, one new message


def check_grep_hits_name_the_speaker(store: LcmStore) -> None:
    """A grep hit on a message says who said it (the same ``name`` assemble returns): in a
    chat of several people "see you at noon" alone does not say whose promise it was."""
    store.ingest(KEY, CHAT)
    store.embed_pending()
    for mode in ("full_text", "regex", "semantic", "hybrid"):
        hits = store.grep("noon", mode=mode, session_key=KEY, limit=5).hits  # type: ignore[arg-type]
        shown = [h.to_dict() for h in hits if h.kind == "message"]
        assert shown and shown[0]["name"] == "bob", (mode, shown)
    hits = store.grep("speaker", mode="full_text", session_key=KEY, limit=5).hits
    assert hits and "name" not in hits[0].to_dict()  # no null padded in for an unnamed message
