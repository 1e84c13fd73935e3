"""``amem import`` of files as users bring them, through the installed script: a file name
that is not UTF-8, text in UTF-16 or a legacy encoding, YAML front matter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem
from .test_import_checks_cli import env, stored  # noqa: F401 - env is a fixture


def test_a_file_name_that_is_not_utf8_is_its_title_as_a_file_manager_shows_it(
        env: dict[str, str], tmp_path: Path) -> None:
    # a name from a Windows zip or an old Latin-1 disk: Python holds its byte as a lone
    # surrogate, and the title derived from it crashed the import (UnicodeEncodeError)
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xe9sum\xe9.txt")
    Path(name).write_bytes(b"Plain paragraph about herons, no heading.\n")
    done = amem(env, "import", name, "--no-enrich")
    assert "created 1" in done.stdout
    assert stored(env) == {"Plain paragraph about herons, no heading.": ["r\ufffdsum\ufffd"]}


def test_utf16_with_its_mark_is_read_and_a_legacy_byte_is_named_at_its_line(
        env: dict[str, str], tmp_path: Path) -> None:
    # Notepad's "Unicode" and PowerShell's `>` write UTF-16 with a byte-order mark: read as such
    doc = tmp_path / "notepad.md"
    doc.write_bytes("# Eulen\r\n\r\nÜberblick über Eulen.\r\n".encode("utf-16"))
    amem(env, "import", str(doc), "--no-enrich")
    assert stored(env) == {"# Eulen\nÜberblick über Eulen.": ["Eulen"]}
    # a Windows-1252 byte deep in a file: named at its own line (the decoder's chunk offset
    # said "byte 3076 of a line after line 14927"), nothing imported
    lines = [json.dumps({"text": f"note {i} about moths"}) + "\n" for i in range(20000)]
    src = tmp_path / "legacy.jsonl"
    src.write_bytes("".join(lines[:14999]).encode() + '{"text": "café"}\n'.encode("cp1252")
                    + "".join(lines[15000:]).encode())
    err = amem(env, "import", str(src), "--no-enrich", code=2).stderr
    assert f"{src}:15000: not UTF-8 text (byte 0xe9, byte 14 of the line)" in err
    assert "iconv -f CP1252 -t UTF-8" in err and "nothing was imported" in err
    # a line ended by a lone CR (an old Mac file) counts as the import counts it
    old = tmp_path / "mac.txt"
    old.write_bytes(b"one\rtwo\r\ncaf\xe9\n")
    assert f"{old}:3: not UTF-8 text" in amem(env, "import", str(old), code=2).stderr
    assert len(stored(env)) == 1


def test_yaml_front_matter_is_no_note_and_its_title_names_the_document(
        env: dict[str, str], tmp_path: Path) -> None:
    # an Obsidian note: the front matter was stored as a note of its own, and being a
    # paragraph before the "# Owls" heading it kept that heading from being the title
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "owls.md").write_text(
        "---\ntitle: \"Owl Notes\"\ntags: [birds, night]\naliases:\n  - owls\n---\n\n# Owls\n\n"
        "Barn owls hunt at night, see [[Bats]].\n", encoding="utf-8")
    (vault / "plain.md").write_text("---\naliases: [p]\n---\n# Plain Title\n\nBody about moths.\n",
                                    encoding="utf-8")
    # a first line of "---" that nothing closes is a rule in the text, read as before
    (vault / "rule.md").write_text("---\nnot front matter\n\nA paragraph about bats.\n",
                                   encoding="utf-8")
    for name in ("owls.md", "plain.md", "rule.md"):
        amem(env, "import", str(vault / name), "--no-enrich")
    assert stored(env) == {
        # the aliases are subjects after the title (one of them is the heading's words)
        "# Owls\nBarn owls hunt at night, see [[Bats]].": ["Owl Notes", "owls"],
        "# Plain Title\nBody about moths.": ["Plain Title", "p"],
        "---\nnot front matter": ["rule"], "A paragraph about bats.": ["rule"]}


def test_a_json_array_is_imported_and_a_one_line_jsonl_array_says_how(
        env: dict[str, str], tmp_path: Path) -> None:
    rows = [{"text": "array one about owls"}, {"text": "array two about bats"}]
    whole = tmp_path / "notes.json"
    whole.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    # was: "notes.json is JSON, not JSON lines ... jq -c '.[]'", nothing imported
    assert "read 2: created 2" in amem(env, "import", str(whole), "--no-enrich").stdout
    assert set(stored(env)) == {"array one about owls", "array two about bats"}
    line = tmp_path / "one-line.jsonl"
    line.write_text(json.dumps([{"text": "three"}]) + "\n", encoding="utf-8")
    err = amem(env, "import", str(line), code=2).stderr
    assert f"{line}:1: each line must be a JSON object with a 'text' field; this line is a " \
           "JSON array of 1 items (a file that is one array of notes is read as one with " \
           "--format json, or named .json)" in err
    assert "read 1: created 1" in amem(env, "import", str(line), "--format", "json",
                                       "--no-enrich").stdout


def test_a_folder_is_imported_file_by_file_and_what_is_left_out_is_named(
        env: dict[str, str], tmp_path: Path) -> None:
    # an Obsidian vault: `amem import VAULT` was "not a file"
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "app.json").write_text("{}", encoding="utf-8")
    (vault / "birds" / "night").mkdir(parents=True)
    (vault / "birds" / "owls.md").write_text("---\ntags: [b]\n---\n# Owls\n\nBarn owls hunt "
                                             "at night.\n", encoding="utf-8")
    (vault / "birds" / "night" / "bats.md").write_text("Bats hunt moths.\n", encoding="utf-8")
    (vault / "facts.jsonl").write_text('{"text": "Herons stand still."}\n', encoding="utf-8")
    (vault / "birds" / "owl.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (vault / "birds" / "up").symlink_to(vault)  # a loop, were it followed
    (vault / "gone.md").symlink_to(tmp_path / "nowhere.md")
    done = amem(env, "import", str(vault), "--no-enrich")
    assert "3 files, read 3: created 3" in done.stdout
    for said in ("left out 1 path: a hidden folder", "left out 1 path: not Markdown, text, "
                 "JSONL, HTML or ENEX (.png)", "left out 1 path: a link to a folder, not followed",
                 "left out 1 path: a broken link"):
        assert f"amem: {said}" in done.stderr
    assert stored(env) == {"# Owls\nBarn owls hunt at night.": ["Owls"],
                           "Bats hunt moths.": ["bats"], "Herons stand still.": []}
    report = json.loads(amem(env, "import", str(vault), "--no-enrich", "--json").stdout)
    assert (report["files"], report["created"], report["deduplicated"]) == (3, 0, 3)
    assert f"{vault / 'birds' / 'owl.png'}: not Markdown, text, JSONL, HTML or ENEX (.png)" \
        in report["left_out"]
    # a file that is not UTF-8 is a bad one: nothing imported, unless --skip-invalid
    (vault / "birds" / "cafe.md").write_bytes(b"caf\xe9 au lait\n")
    err = amem(env, "import", str(vault), "--no-enrich", code=2).stderr
    assert f"{vault / 'birds' / 'cafe.md'}:1: not UTF-8 text" in err
    assert "nothing was imported" in err
    done = amem(env, "import", str(vault), "--no-enrich", "--skip-invalid", code=1)
    assert f"amem: skipped {vault / 'birds' / 'cafe.md'}:1: not UTF-8" in done.stderr
    assert len(stored(env)) == 3


@pytest.mark.slow
def test_ctrl_c_says_what_is_kept_and_a_rerun_stores_the_rest(env: dict[str, str],
                                                               tmp_path: Path) -> None:
    import os
    import pty
    import re
    import signal
    import subprocess

    from .test_cli_frontdoor import AMEM, ROOT

    src = tmp_path / "many.jsonl"
    src.write_text("".join(json.dumps({"text": f"note {i} about the moth count of week {i}"})
                           + "\n" for i in range(5000)), encoding="utf-8")
    # stderr on a terminal, so the import draws its bar; the bar moves only after a batch is
    # stored, so the signal is sent once some notes are kept however slow the machine is (a
    # fixed sleep after the store opened interrupted a loaded machine before the first batch)
    master, slave = pty.openpty()  # reporting 0 columns, as a new pty does: a bar 80 wide
    proc = subprocess.Popen([str(AMEM), "import", str(src), "--no-enrich"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=slave,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    drawn = b""

    def read_more() -> bool:
        nonlocal drawn
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            return False
        drawn += chunk
        return bool(chunk)

    stored_some = re.compile(rb"\b([1-9]\d*)/5000\b")
    while not stored_some.search(drawn):
        assert read_more(), drawn.decode(errors="replace")[-2000:]
    proc.send_signal(signal.SIGINT)
    while read_more():
        pass
    os.close(master)
    assert proc.wait(timeout=120) == 130, drawn.decode(errors="replace")[-2000:]
    err = drawn.decode(errors="replace").replace("\r\n", "\n")
    assert "the import was stopped; the notes it wrote are kept, and running the same import " \
           "again stores only the rest" in " ".join(err.split()) and "Traceback" not in err
    done = json.loads(amem(env, "import", str(src), "--no-enrich", "--json").stdout)
    assert done["skipped"] == 0 and done["created"] + done["deduplicated"] == 5000
    assert done["deduplicated"] > 0 and done["created"] > 0  # stopped part way: some kept, some left
    status = json.loads(amem(env, "status", "--json").stdout)["memory"]
    assert status["active_notes"] == 5000


def test_stdin_is_imported_as_a_file_is(env: dict[str, str], tmp_path: Path) -> None:
    spool = tmp_path / "spool"  # TMPDIR: where stdin is kept for the two passes
    spool.mkdir()
    env = {**env, "TMPDIR": str(spool)}
    # was: "amem import reads a file ... not stdin", exit 2
    done = amem(env, "import", "-", "--no-enrich", "--json",
                stdin='{"text": "from a pipe about owls"}\n{"text": "and bats"}\n')
    report = json.loads(done.stdout)
    assert (report["path"], report["created"], report["skipped"]) == ("stdin", 2, 0)
    # a bad line is named as stdin's, and nothing is imported
    err = amem(env, "import", "-", stdin='{"text": "moths"}\n{"txt": "x"}\n', code=2).stderr
    assert "stdin:2: missing field 'text'" in err and "nothing was imported" in err
    assert set(stored(env)) == {"from a pipe about owls", "and bats"}
    assert list(spool.iterdir()) == []  # the private copy is gone, after an error too
def test_common_slips_in_json_lines_are_said_for_what_they_are(env: dict[str, str],
                                                               tmp_path: Path) -> None:
    src = tmp_path / "slips.jsonl"
    src.write_text('{"text": "alpha about owls"},\n\n// a comment\n{"text": "beta about bats"}\n'
                   '{"text": "gamma about mo', encoding="utf-8")  # a writer killed mid-line
    err = amem(env, "import", str(src), code=2).stderr
    assert f"{src}:1: the line is not valid JSON: Extra data at column 29 (a comma after the " \
           "object: JSON lines end without one)" in err
    assert f"{src}:3: the line is not valid JSON: Expecting value at column 1 (a comment line" \
        in err
    assert f"{src}:5: the line is not valid JSON: Unterminated string starting at column 10 " \
           "(the file's last line, with no line end: cut short" in err
    done = amem(env, "import", str(src), "--skip-invalid", "--no-enrich", code=1)
    assert "created 1" in done.stdout and set(stored(env)) == {"beta about bats"}
