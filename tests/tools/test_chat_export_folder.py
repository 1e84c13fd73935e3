"""A chat export as users hand it over unzipped: a folder of ``conversations.json`` (or its
shards) and the export's other files, read as one export the way its zip is, in-process."""

from __future__ import annotations

import json
import uuid
import zipfile
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.errors import ValidationError
from amem.importdir import import_dir
from lcm import LcmStore
from tools.chats import StreamError
from tools.chats.load import NoExportFound, load_export, sniff

from .chat_exports import chatgpt_chain, chatgpt_lisbon, claude_invoice


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def chatgpt_folder(root: Path) -> Path:
    """An unzipped ChatGPT export: its conversations, the web page of them, the account's other
    data, an upload and a generated image; and what a user's copy picks up besides."""
    write(root / "conversations.json", json.dumps([chatgpt_lisbon(), chatgpt_chain("c-2", 4)], indent=1))
    write(root / "chat.html", "<html>the same chats, for a browser</html>")
    for name in ("user.json", "message_feedback.json", "shared_conversations.json"):
        write(root / name, "[]")
    write(root / "file-Tram28-tram.jpg", b"\xff\xd8\xff\xe0 a photo")
    write(root / "dalle-generations" / "file-Map1-map.webp", b"RIFF a map")
    write(root / ".DS_Store", b"\x00\x00\x00\x01Bud1")
    write(root / "notes for later.txt", "buy milk")  # no file of an export: named
    return root


def test_an_unzipped_export_folder_loads_as_its_zip_does(tmp_path: Path) -> None:
    # each part loaded alone before, and a folder was "[Errno 21] Is a directory"
    folder = chatgpt_folder(tmp_path / "chatgpt-export")
    bundle = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())
    assert sniff(folder) == "chatgpt"
    with LcmStore(":memory:") as lcm:
        got = load_export(lcm, folder, "chatgpt", "alice")
        again = load_export(lcm, bundle, "chatgpt", "alice")  # the same export zipped: nothing new
    assert (got.conversations, got.conversations_stored, got.stored, got.invalid) == (2, 2, 16, 0)
    assert (again.stored, again.skipped_duplicates) == (0, 16)
    assert got.parts == [str(folder / "conversations.json")]
    # every other file is counted by what it is; one no export holds is named
    assert got.to_dict()["files_left_out"] == {"export_data": 3, "hidden": 1, "media": 2, "unknown": 1,
                                               "web_page": 1}
    assert got.warnings == [f"{folder / 'notes for later.txt'}: not a file of a ChatGPT or Claude export; not read"]
    assert again.to_dict()["files_left_out"] == got.to_dict()["files_left_out"]  # the zip says the same


def test_a_folder_of_shards_reads_them_in_order_and_names_what_it_leaves(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    write(folder / "conversations-010.json", json.dumps([chatgpt_chain("c-late", 2)]))
    write(folder / "conversations-000.json", json.dumps([chatgpt_lisbon()]))
    write(folder / "conversations-002.json", json.dumps([chatgpt_chain("c-mid", 2)]))
    write(folder / "export_manifest.json", json.dumps({"version": 1, "logical_files": {"conversations.json": {
        "files": ["conversations-000.json", "conversations-002.json", "conversations-010.json"], "sharded": True}}}))
    # a second export unzipped inside the first: not read with it, named
    write(folder / "old" / "conversations.json", json.dumps([chatgpt_chain("c-old", 2)]))
    with LcmStore(":memory:") as lcm:
        report = load_export(lcm, folder, "chatgpt", "alice")
        order = [str(c.session_key).rsplit(":", 1)[-1] for c in lcm.conversations() if ":branches" not in
                 str(c.session_key)]
    assert report.parts == [str(folder / f"conversations-{n}.json") for n in ("000", "002", "010")]
    assert order[1:] == ["c-mid", "c-late"] and report.conversations == 3
    assert report.warnings == [f"{folder / 'old' / 'conversations.json'}: another export's conversations (this "
                               f"export's are {folder / 'conversations-000.json'}, ...); not read: give it on its own"]
    assert report.files_left_out == {"export_data": 1, "other_export": 1}
    # a link to nothing named as the whole export is no part of it: named, the shards read
    (folder / "conversations.json").symlink_to(tmp_path / "gone.json")
    with LcmStore(":memory:") as lcm:
        linked = load_export(lcm, folder, "chatgpt", "alice")
    assert linked.parts == report.parts and linked.files_left_out["unknown"] == 1
    assert f"{folder / 'conversations.json'}: not a file of a ChatGPT or Claude export; not read" in linked.warnings
    # a part that is not JSON is named by its path; nothing stored (the check reads every part first)
    write(folder / "conversations-011.json", "<html>an error page saved as the part</html>")
    with LcmStore(":memory:") as lcm, pytest.raises(StreamError, match="conversations-011.json is not a JSON array"):
        load_export(lcm, folder, "chatgpt", "alice")


def test_a_claude_folder_loads_and_a_folder_without_conversations_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "data-2025-10-06-batch-0000"
    write(folder / "conversations.json", json.dumps([claude_invoice()]))
    for name in ("users.json", "projects.json", "memories.json"):
        write(folder / name, "[]")
    assert sniff(folder) == "claude"
    with LcmStore(":memory:") as lcm:
        report = load_export(lcm, folder, "claude", "alice")
    assert (report.conversations_stored, report.files_left_out, report.warnings) == (1, {"export_data": 3}, [])
    empty = tmp_path / "photos"
    write(empty / "IMG_0001.jpg", b"\xff\xd8")
    with pytest.raises(NoExportFound, match=rf"{empty} is a folder without a conversations.json \(nor its "
                                             r"shards, conversations-000.json, ...\)"):
        sniff(empty)


def test_amem_import_refuses_an_unzipped_export_naming_the_command_that_loads_it(
        tmp_path: Path, memory: MemoryStore) -> None:
    # it imported chat.html (every conversation, as one page) and any text file as notes, and
    # left conversations.json out as "a .json file"; as it refuses the file, it refuses the folder
    folder = chatgpt_folder(tmp_path / "chatgpt-export")
    agent = f"importer-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ValidationError) as refused:
        import_dir(memory, folder, agent_id=agent, enrich=False)
    assert str(refused.value).startswith(
        f"{folder} is an unzipped ChatGPT data export (its conversations.json): its conversations go into "
        f"conversation memory with `amem lcm ingest {folder}`")
    assert memory.search("milk", agent_id=agent) == []  # nothing imported
    # a folder of notes that holds some other conversations.json is imported as before
    notes = tmp_path / "vault"
    write(notes / "conversations.json", json.dumps([{"text": "a note"}]))
    write(notes / "ideas.md", "# Ideas\n\nbuy milk")
    assert import_dir(memory, notes, agent_id=agent, enrich=False).created == 1


def test_a_folder_whose_conversations_are_no_export_is_named_not_read_as_a_transcript(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was "[Errno 21] Is a directory" (exit 1): the folder went on to the transcript reader
    from tools.cli import main

    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"}
    empty = tmp_path / "empty-export"
    write(empty / "conversations.json", "[]")
    other = tmp_path / "other-app"
    write(other / "conversations.json", json.dumps([{"role": "user", "content": "hi"}]))
    for folder, why in ((empty, "holds no conversation"), (other, "is no ChatGPT or Claude export")):
        assert main(["lcm", "ingest", str(folder)], env=env) == 2
        err = capsys.readouterr().err
        assert f"{folder}: a folder is read as an unzipped ChatGPT or Claude export; its conversations.json {why}" \
            in err, err
        assert "Errno" not in err
    assert not (tmp_path / "home" / "lcm.db").exists()


def test_a_shard_the_manifest_lists_and_the_copy_lacks_is_named(tmp_path: Path) -> None:
    # a user copied some of the parts: the conversations of the others went missing unsaid
    folder = tmp_path / "export"
    manifest = {"version": 1, "manifest_file": "export_manifest.json", "logical_files": {"conversations.json": {
        "files": ["conversations-000.json", "conversations-001.json", "conversations-002.json"], "sharded": True}}}
    write(folder / "export_manifest.json", json.dumps(manifest))
    write(folder / "conversations-000.json", json.dumps([chatgpt_chain("c-0", 2)]))
    write(folder / "conversations-002.json", json.dumps([chatgpt_chain("c-2", 2)]))
    bundle = tmp_path / "export.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        for f in sorted(folder.iterdir()):
            z.write(f, f.name)
    with LcmStore(":memory:") as lcm:
        got = load_export(lcm, folder, "chatgpt", "alice")
        zipped = load_export(lcm, bundle, "chatgpt", "alice")
    assert (got.conversations_stored, got.parts_missing, zipped.parts_missing) == (2, 1, 1)
    assert got.warnings == [f"{folder / 'conversations-001.json'}: listed in export_manifest.json but not in the "
                            "folder: its conversations were not read (put it beside the others and load again; "
                            "nothing is stored twice)"]
    assert zipped.warnings == [f"{bundle}:conversations-001.json: listed in export_manifest.json but not in the zip: "
                               "its conversations were not read (put it beside the others and load again; nothing "
                               "is stored twice)"]
    # a manifest of a shape this reader does not know checks nothing, and says so
    write(folder / "export_manifest.json", json.dumps({"version": 9, "parts": ["a", "b"]}))
    with LcmStore(":memory:") as lcm:
        unknown = load_export(lcm, folder, "chatgpt", "alice")
    assert unknown.warnings == [f"{folder / 'export_manifest.json'}: no list of the conversations' parts where "
                                "this reader looks (logical_files, conversations.json, files); the parts found "
                                "were read, none checked against it"]


def test_amem_import_names_amem_lcm_ingest_for_a_wrapped_export_file(tmp_path: Path, memory: MemoryStore) -> None:
    # was "to import the list under 'conversations': jq '.conversations' FILE | amem import -",
    # whose output amem import refuses in turn as a chat export
    from amem.importer import import_file

    wrapped = write(tmp_path / "export.json", json.dumps({"conversations": [claude_invoice()]}))
    with pytest.raises(ValidationError, match=rf"{wrapped} is a Claude data export \(conversations.json\): its "
                                              rf"conversations go into conversation memory with `amem lcm ingest "
                                              rf"{wrapped}`"):
        import_file(memory, wrapped, enrich=False)
