"""``tools.chats.load`` on a real in-memory conversation store: progress, streaming, the library path."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from lcm import IngestResult, LcmStore
from lcm.errors import StoreUnavailableError
from lcm.reorder import Placed
from tools.chats import StreamError
from tools.chats.load import (MAX_SAID, ExportLimits, ExportRejected, PartlyStored, UnsafeExport, load_export,
                              session_key)

from .chat_exports import chatgpt_chain, chatgpt_lisbon


def test_progress_counts_the_check_then_the_store(tmp_path: Path) -> None:
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_lisbon(), chatgpt_chain("c-2", 4), chatgpt_chain("c-3", 2)]),
                   encoding="utf-8")
    seen: list[tuple[str, int, int | None]] = []
    with LcmStore(":memory:") as lcm:
        report = load_export(lcm, src, "chatgpt", "alice", progress=lambda *a: seen.append(a))
        assert report.stored == 18 and report.conversations_stored == 3
        title = lcm.conversation(session_key("alice", "chatgpt", "c-2"))
        assert title is not None and title.title == "A long chat"
    assert seen == [("check", 1, None), ("check", 2, None), ("check", 3, None),
                    ("store", 1, 3), ("store", 2, 3), ("store", 3, 3)]


def test_a_file_of_many_bad_conversations_names_the_first_hundred_and_counts_all(tmp_path: Path) -> None:
    bad = [{"title": f"broken {i}", "id": f"c-{i}", "mapping": {"a": {"parent": "gone"}}} for i in range(130)]
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([*bad, chatgpt_chain("c-ok", 2)]), encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(ExportRejected) as refused:
            load_export(lcm, src, "chatgpt", "alice")
        assert "130 of 131 conversations cannot be read; nothing was stored" in str(refused.value)
        assert str(refused.value).endswith("... and 110 more")
        report = load_export(lcm, src, "chatgpt", "alice", skip_invalid=True)
    assert (report.invalid, len(report.errors), report.stored) == (130, MAX_SAID, 2)
    assert report.errors[0].endswith("conversation 1 ('broken 0', id c-0): node 'a' names the parent 'gone', which "
                                     "is not in the conversation (a broken tree)")


class GoesAway:
    """A conversation store whose server goes away after ``calls`` ingests (the IngestTarget seam)."""

    def __init__(self, store: LcmStore, calls: int) -> None:
        self.store, self.calls = store, calls

    def ingest(self, session_key: str | None, messages: Sequence[Mapping[str, Any]], *,
               session_id: str | None = None, title: str | None = None) -> IngestResult:
        if self.calls == 0:
            raise StoreUnavailableError("the server closed the connection")
        self.calls -= 1
        return self.store.ingest(session_key, messages, session_id=session_id, title=title)

    def place_before(self, session_key: str, placements: Mapping[str, str]) -> Placed:
        return self.store.place_before(session_key, placements)


def test_a_store_that_goes_away_stops_the_load_saying_what_is_kept(tmp_path: Path) -> None:
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_chain(f"c-{i}", 4) for i in range(3)]), encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(PartlyStored) as stopped:
            load_export(GoesAway(lcm, 2), src, "chatgpt", "alice")
        said = str(stopped.value)
        assert said.startswith(f"{src}:") and "the server closed the connection" in said
        assert "The 2 conversations stored before it are kept (8 messages); importing the file again" in said
        assert isinstance(stopped.value.cause, StoreUnavailableError)
        again = load_export(lcm, src, "chatgpt", "alice")  # the server is back: the rest, nothing twice
        assert (again.stored, again.skipped_duplicates) == (4, 8)


@pytest.mark.slow  # ~5 s: a 10 MB file, read under tracemalloc
def test_a_large_export_is_never_held_whole(tmp_path: Path) -> None:
    # 300 conversations of 40 turns, ~10 MB: the reader holds one conversation and a chunk of
    # 1 Mi characters (with its copies while it is cut and joined), ~5 MB whatever the file's size
    src = tmp_path / "conversations.json"
    with src.open("w", encoding="utf-8") as out:
        out.write("[")
        for i in range(300):
            conv = chatgpt_chain(f"c-{i}", 40)
            for node in conv["mapping"].values():
                if node["message"]:
                    node["message"]["content"]["parts"][0] += " and the ledger says so" * 12
            out.write(("," if i else "") + json.dumps(conv, indent=1))
        out.write("]")
    size = src.stat().st_size
    assert size > 9_000_000
    with LcmStore(":memory:") as lcm:
        tracemalloc.start()
        try:
            report = load_export(lcm, src, "chatgpt", "alice")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert report.stored == 12_000
    # json.load alone would hold the text and its parsed tree: several times the file
    assert peak < size * 0.75, (peak, size)


# -- hostile files: each refused with a clear error before anything is stored ----------------------
def zipped(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def stored(lcm: LcmStore) -> int:
    return int(lcm.db.scalar("SELECT count(*) FROM messages"))


def test_a_zip_with_a_member_outside_the_archive_is_refused(tmp_path: Path) -> None:
    # read as a stream, never unpacked, so nothing could be written there; but no app writes
    # such a zip: it was made to be unpacked somewhere it should not
    good = json.dumps([chatgpt_chain("c-1", 2)])
    with LcmStore(":memory:") as lcm:
        for name in ("../conversations.json", "/etc/conversations.json", "export/../../conversations.json",
                     "..\\..\\conversations.json", "C:/Users/x/conversations.json"):
            bundle = zipped(tmp_path / "export.zip", {name: good})
            with pytest.raises(UnsafeExport, match="outside the archive") as refused:
                load_export(lcm, bundle, "chatgpt", "alice")
            assert repr(name)[1:-1] in str(refused.value) and "nothing was stored" in str(refused.value)
        # beside a good conversations.json too: the zip is not the one the app sent
        bundle = zipped(tmp_path / "export.zip", {"conversations.json": good, "../../.bashrc": "rm -rf ~"})
        with pytest.raises(UnsafeExport, match="'../../.bashrc'"):
            load_export(lcm, bundle, "chatgpt", "alice", skip_invalid=True)
        assert stored(lcm) == 0


def test_a_zip_bomb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # 20 MiB of blanks between two conversations deflate to ~20 KiB: a ratio no export has
    bundle = tmp_path / "export.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z, z.open("conversations.json", "w") as out:
        out.write(b"[" + json.dumps(chatgpt_chain("c-1", 2)).encode() + b",")
        for _ in range(20):
            out.write(b" " * (1 << 20))
        out.write(json.dumps(chatgpt_chain("c-2", 2)).encode() + b"]")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(UnsafeExport, match=r"unpacks to 20\.0 MiB from \d+ KiB .* a zip bomb") as refused:
            load_export(lcm, bundle, "chatgpt", "alice", skip_invalid=True)
        assert "nothing was stored" in str(refused.value)
        # the same declared size an honest zip may have: the limits say how much is read at all
        with pytest.raises(UnsafeExport, match=r"unpacks to 20\.0 MiB; the limit is 16\.0 MiB"):
            load_export(lcm, bundle, "chatgpt", "alice", limits=ExportLimits(max_unzipped=16 << 20))
        assert stored(lcm) == 0


def test_a_zip_that_unpacks_to_more_than_it_declares_is_refused(tmp_path: Path) -> None:
    # the sizes in its headers say 1 KiB; the data inflates to 8 MiB: read no further than
    # declared (zipfile stops there), and the checksum says the member is not what it claims
    text = json.dumps([chatgpt_chain(f"c-{i}", 2) for i in range(3)]).encode()
    bundle = tmp_path / "export.zip"
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as z, z.open("conversations.json", "w") as out:
        out.write(text[:-1] + b" " * (8 << 20) + b"]")
    raw = bytearray(bundle.read_bytes())
    local, central = raw.find(b"PK\x03\x04"), raw.find(b"PK\x01\x02")
    struct.pack_into("<I", raw, local + 22, 1024)  # the local header's uncompressed size
    struct.pack_into("<I", raw, central + 24, 1024)  # the central directory's
    bundle.write_bytes(bytes(raw))
    with LcmStore(":memory:") as lcm:
        with pytest.raises((StreamError, zipfile.BadZipFile)):
            load_export(lcm, bundle, "chatgpt", "alice")
        assert stored(lcm) == 0


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_json_is_refused_and_nothing_stored(tmp_path: Path, depth: int) -> None:
    # a tool call's input nested 100 deep parses (under Python's recursion limit) but is refused
    # by the rule for untrusted JSON (64 levels); 100,000 deep cannot be parsed at all
    nested = chatgpt_chain("c-deep", 2)
    node = nested["mapping"]["m1"]["message"]
    node["metadata"] = {"deep": "NEST"}
    text = json.dumps([chatgpt_chain("c-ok", 2), nested]).replace('"NEST"', "[" * depth + "]" * depth)
    src = tmp_path / "conversations.json"
    src.write_text(text, encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        if depth < 1000:
            with pytest.raises(ExportRejected, match=r"conversation 2 \('A long chat', id c-deep\): it nests "
                                                     r"deeper than 64 levels .* \(at mapping\.m1\.message"):
                load_export(lcm, src, "chatgpt", "alice")
        else:
            with pytest.raises(StreamError, match="item 2 nests too deep to read"):
                load_export(lcm, src, "chatgpt", "alice")
        assert stored(lcm) == 0


def test_a_conversation_larger_than_the_limit_is_refused_not_held(tmp_path: Path) -> None:
    # a conversation that never closes (a bomb's payload, or a file cut and padded) would be
    # read into memory whole, doubling the buffer; past the limit it is refused instead
    src = tmp_path / "conversations.json"
    src.write_text("[" + json.dumps(chatgpt_chain("c-ok", 2)) + ', {"title": "' + "x" * (3 << 20),
                   encoding="utf-8")
    with LcmStore(":memory:") as lcm:
        with pytest.raises(StreamError, match=r"item 2 is over 1048576 characters"):
            load_export(lcm, src, "chatgpt", "alice", limits=ExportLimits(max_conversation_chars=1 << 20))
        assert stored(lcm) == 0


def _order(lcm: LcmStore, key: str) -> tuple[list[str], list[str]]:
    """A conversation's event ids by ``seq`` (browsing) and its context's (what the model is given)."""
    with lcm.db.reading() as c:
        (conv,) = c.execute("SELECT id FROM conversations WHERE session_key = ?", (key,)).fetchone()
        seq = [r[0] for r in c.execute("SELECT stable_event_key FROM messages WHERE conversation_id = ? "
                                       "ORDER BY seq", (conv,))]
        context = [r[0] for r in c.execute(
            "SELECT m.stable_event_key FROM context_items ci JOIN messages m ON m.id = ci.message_id "
            "WHERE ci.conversation_id = ? ORDER BY ci.ordinal", (conv,))]
    return seq, context


def test_markers_new_to_a_store_that_held_the_branches_land_before_them(tmp_path: Path) -> None:
    """A store that imported the export before fork markers existed got them on the next
    import after the branches' messages (new messages went last); now each stands where a
    first import puts it, before its branch's first message, in browsing and in the context."""
    from tools.chats import chatgpt

    from .chat_exports import LISBON_ID, T0, gpt_node

    export = chatgpt_lisbon()  # with a fork inside a branch too: the edited prompt's answer regenerated
    export["mapping"]["u-2a"]["children"].append("a-2a2")
    export["mapping"]["a-2a2"] = gpt_node("a-2a2", "u-2a", [], "assistant", ["Porto: the Alfa Pendular."], T0 + 120)
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([export]), encoding="utf-8")
    key = session_key("alice", "chatgpt", LISBON_ID) + ":branches"
    with LcmStore(":memory:") as fresh:
        assert load_export(fresh, src, "chatgpt", "alice").fork_points_placed == 0  # in place as stored
        want = _order(fresh, key)
    assert want[0] == want[1] == [f"event:{i}" for i in ("fork:u-2a", "u-2a", "a-2a", "fork:a-2a2", "a-2a2",
                                                         "fork:a-2b", "a-2b")]
    conv = chatgpt.convert(1, export)
    with LcmStore(":memory:") as before:  # what a version without markers stored
        before.ingest(key.removesuffix(":branches"), conv.messages, title=conv.title)
        before.ingest(key, [m for m in conv.branches if not m["event_id"].startswith("fork:")])
        report = load_export(before, src, "chatgpt", "alice")
        assert (report.stored, report.fork_points_placed) == (3, 3)
        assert _order(before, key) == want  # was each marker last, after its branch
        again = load_export(before, src, "chatgpt", "alice")
        assert (again.stored, again.fork_points_placed) == (0, 0) and _order(before, key) == want


def test_markers_a_reimport_stored_last_are_moved_by_the_next_import(tmp_path: Path) -> None:
    # a store that re-imported with the version before this one holds the markers last
    from tools.chats import chatgpt

    from .chat_exports import LISBON_ID

    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([chatgpt_lisbon()]), encoding="utf-8")
    key = session_key("alice", "chatgpt", LISBON_ID) + ":branches"
    conv = chatgpt.convert(1, chatgpt_lisbon())
    with LcmStore(":memory:") as lcm:
        lcm.ingest(key, [m for m in conv.branches if not m["event_id"].startswith("fork:")])
        lcm.ingest(key, [m for m in conv.branches if m["event_id"].startswith("fork:")])
        assert _order(lcm, key)[0][-2:] == ["event:fork:u-2a", "event:fork:a-2b"]
        report = load_export(lcm, src, "chatgpt", "alice")
        assert (report.stored, report.fork_points_placed) == (7, 2)  # the main line; no branch message
        from tools.cli.lcm_chats import _text

        said = _text({**report.to_dict(), "format": "chatgpt", "session_key_prefix": "agent:alice:chatgpt:"})
        assert "2 fork markers moved into place, each before the branch it opens" in said
        assert _order(lcm, key)[0] == [f"event:{i}" for i in ("fork:u-2a", "u-2a", "a-2a", "fork:a-2b", "a-2b")]


def test_a_zip_without_a_conversations_json_is_named_as_such(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # another app's zip, or the export's photos alone: was "unexpected NotAnArray" (exit 1), the
    # sniff's second look at the zip raising what its first look had caught
    from tools.cli import main

    bundle = zipped(tmp_path / "export.zip", {"chat.html": "<html></html>", "user.json": "{}"})
    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"}
    assert main(["lcm", "ingest", str(bundle)], env=env) == 2
    err = capsys.readouterr().err
    assert f"{bundle} is a zip without a conversations.json" in err and "unexpected" not in err
    assert not (tmp_path / "home" / "lcm.db").exists()


class OneSummary:
    """A summarizer (lcm's ``TextLLM`` seam) that always gives the same words."""

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        return "the invoices disputed in the branch"


def test_a_marker_whose_branch_opening_is_summarized_is_said_to_follow_the_summary(tmp_path: Path) -> None:
    """A store that held a branch before markers existed and compacted its opening into a
    summary: the new marker goes before the branch's first message when browsing, but in the
    context (what the model is given) a summary is one item, so the marker follows it. That
    cannot be undone without rewriting the summary; it is said (a report count and a warning)."""
    from lcm import LcmConfig
    from tools.chats import chatgpt

    from .chat_exports import T0, gpt_node

    export = chatgpt_chain("c-fork", 6)
    export["mapping"]["m1"]["children"].append("b0")
    for i in range(10):  # a branch of ten off the second message
        export["mapping"][f"b{i}"] = gpt_node(f"b{i}", "m1" if i == 0 else f"b{i - 1}", [f"b{i + 1}"] if i < 9 else [],
                                              "user" if i % 2 == 0 else "assistant",
                                              [f"branch turn {i}: invoice {20_000 + i} was disputed"], T0 + 100 + i)
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([export]), encoding="utf-8")
    key = session_key("alice", "chatgpt", "c-fork") + ":branches"
    conv = chatgpt.convert(1, export)
    with LcmStore(":memory:", LcmConfig(fresh_tail_count=2, leaf_min_fanout=2), llm=OneSummary()) as lcm:
        lcm.ingest(key, [m for m in conv.branches if not m["event_id"].startswith("fork:")])  # before markers
        assert lcm.compact(key, force=True).leaf_summaries  # b0 ... b7 folded into one summary
        report = load_export(lcm, src, "chatgpt", "alice")
        seq, context = _order(lcm, key)
    assert seq[:2] == ["event:fork:b0", "event:b0"]  # browsing: before the branch
    assert context == ["event:fork:b0", "event:b8", "event:b9"]  # the context: after the summary (not listed)
    assert (report.fork_points_placed, report.fork_points_after_summary) == (1, 1)
    assert report.warnings == [f"conversation 'A long chat' (id c-fork): 1 fork marker (fork:b0) stands after the "
                               "summary that holds its branch's first message in the context (browsing has it "
                               "before that message); its text names that message"]
    from tools.cli.lcm_chats import _text

    said = _text({**report.to_dict(), "format": "chatgpt", "session_key_prefix": "agent:alice:chatgpt:"})
    assert "1 of them after the summary that holds its branch's opening (named in the warnings)" in said
