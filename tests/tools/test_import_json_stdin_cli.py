"""``amem import`` of what users have in hand, through the installed script: a JSON array of
notes (what tools and LLMs write), and notes piped in on stdin (``amem import -``)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from .test_cli_frontdoor import AMEM, ROOT, amem
from .test_import_checks_cli import env, stored  # noqa: F401 - env is a fixture


def test_a_json_array_is_checked_whole_its_bad_items_named_by_place(
        env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "llm.json"  # compact, one line: only the item's place can say which
    src.write_text(json.dumps([{"text": "Owls hunt at night.", "subjects": ["owls"]},
                               {"txt": "typo"}, "just a string",
                               {"text": "Bats eat moths."}]), encoding="utf-8")
    err = amem(env, "import", str(src), "--no-enrich", code=2).stderr
    assert f"{src}: 2 of 4 items are invalid; nothing was imported" in err
    assert f"{src} item 2: missing field 'text'" in err
    assert f"{src} item 3: each item must be a JSON object with a 'text' field" in err
    assert stored(env) == {}
    done = amem(env, "import", str(src), "--no-enrich", "--skip-invalid", code=1)
    assert "read 4: created 2" in done.stdout and f"skipped {src} item 2:" in done.stderr
    assert stored(env) == {"Owls hunt at night.": ["owls"], "Bats eat moths.": []}
    # a file cut short: the items before the break are named good, the break by its line
    cut = tmp_path / "cut.json"
    cut.write_text('[\n  {"text": "Herons stand still."},\n  {"text": "Cranes da', encoding="utf-8")
    err = amem(env, "import", str(cut), "--no-enrich", code=2).stderr
    assert f"{cut} item 2: it is not valid JSON: Unterminated string" in err
    assert "(at line 3); nothing after it can be read" in err


def test_a_chat_export_is_sent_to_lcm_ingest_and_a_folder_leaves_json_out(
        env: dict[str, str], tmp_path: Path) -> None:
    chats = tmp_path / "conversations.json"
    chats.write_text(json.dumps([{"title": "t", "mapping": {}, "id": "c1"}]), encoding="utf-8")
    err = amem(env, "import", str(chats), code=2).stderr
    assert f"{chats} is a ChatGPT data export (conversations.json): its conversations go " \
           f"into conversation memory with `amem lcm ingest {chats}`" in err
    chats.write_text(json.dumps([{"uuid": "u", "name": "n", "chat_messages": []}]),
                     encoding="utf-8")
    assert "is a Claude data export" in amem(env, "import", str(chats), code=2).stderr
    err = amem(env, "import", "-", stdin=chats.read_text(encoding="utf-8"), code=2).stderr
    assert "stdin is a Claude data export (conversations.json): its conversations go into " \
           "conversation memory with `amem lcm ingest FILE` once it is saved to a file" in err
    # a folder's .json files are app data far more often than notes: left out, and said
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "owls.md").write_text("Owls hunt at night.\n", encoding="utf-8")
    (vault / "package.json").write_text('{"name": "x"}', encoding="utf-8")
    done = amem(env, "import", str(vault), "--no-enrich")
    assert "1 files, read 1: created 1" in done.stdout
    assert "left out 1 path: a .json file (one that is an array of notes: amem import " \
           "FILE.json)" in done.stderr


def test_stdin_format_is_told_by_its_first_character_else_asked_for(
        env: dict[str, str], tmp_path: Path) -> None:
    done = amem(env, "import", "-", "--no-enrich",
                stdin='\ufeff  [{"text": "Owls hunt at night."}]')  # a mark, then white space
    assert "read 1: created 1" in done.stdout
    err = amem(env, "import", "-", stdin="# Birds\n\nHerons stand still.\n", code=2).stderr
    assert "stdin is neither a JSON array ([...]) nor JSON lines ({...} a line): pass " \
           "--format text" in err
    assert "stdin is empty" in amem(env, "import", "-", stdin="", code=2).stderr
    # a document: titled by its heading, never by the private copy's name
    amem(env, "import", "-", "--format", "text", "--no-enrich",
         stdin="# Birds\n\nHerons stand still.\n")
    amem(env, "import", "-", "--format", "text", "--no-enrich", stdin="Cranes dance.\n")
    assert stored(env) == {"Owls hunt at night.": [], "# Birds\nHerons stand still.": ["Birds"],
                           "Cranes dance.": []}


def test_stdin_is_kept_private_and_removed_on_ctrl_c(env: dict[str, str],
                                                     tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    proc = subprocess.Popen([str(AMEM), "import", "-"], env={**env, "TMPDIR": str(spool)},
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdin is not None
    proc.stdin.write('{"text": "a note still being piped"}\n')
    proc.stdin.flush()  # the pipe stays open: the copy is under way
    deadline = time.monotonic() + 30
    while not (kept := list(spool.iterdir())) or not kept[0].stat().st_size:
        assert time.monotonic() < deadline, "stdin was never copied"
        time.sleep(0.05)
    assert kept[0].stat().st_mode & 0o777 == 0o600  # the user's notes: theirs alone
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert list(spool.iterdir()) == []


def test_what_other_apps_export_is_named_with_what_to_do(env: dict[str, str],
                                                         tmp_path: Path) -> None:
    mem0 = tmp_path / "memories.json"  # mem0's export, `amem get --json`: no 'text' field
    mem0.write_text(json.dumps([{"id": "m1", "memory": "Likes green tea."}]), encoding="utf-8")
    err = amem(env, "import", str(mem0), code=2).stderr
    assert f"{mem0} item 1: missing field 'text' (its text looks to be in 'memory': name that " \
           "field 'text'; with jq, `.text = .memory | del(.memory)` on each note)" in err
    name = "Export-1a2b.zip"  # (an ENEX or HTML file is read: test_import_formats_cli)
    (tmp_path / name).write_bytes(b"PK\x03\x04")
    # was: "cannot tell the format of ...: use .jsonl, .md or .txt"
    assert f"{name} is a zip archive (a Notion or Obsidian export?): unzip it and import its " \
           "folder" in amem(env, "import", str(tmp_path / name), code=2).stderr
