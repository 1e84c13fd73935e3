"""``amem import`` of what users have besides JSON lines and Markdown, through the installed
script: a vault's tags, a JSON object wrapping its notes, a CSV table, HTML and Evernote
exports (the cases are in tests/amem/store/test_import_{tags,json_object,csv,html_enex}.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .test_cli_frontdoor import amem
from .test_import_checks_cli import env  # noqa: F401 - a fixture

ENEX = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE en-export SYSTEM "http://xml.evernote.com/pub/evernote-export3.dtd">
<en-export><note><title>Groceries</title><created>20240301T120000Z</created><tag>Home</tag>
<content><![CDATA[<en-note><div>Milk and eggs</div></en-note>]]></content></note></en-export>
"""


def notes(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Content -> the stored note, every live note of the agent read in one command."""
    rows = [json.loads(line)["note"] for line in amem(
        env, "export", "-", "--no-vectors", "--agent", env["AMEM_AGENT"]).stdout.splitlines()]
    return {n["content"]: n for n in rows if n["is_active"]}


def test_a_vault_of_markdown_html_and_evernote_keeps_tags_titles_and_times(
        env: dict[str, str], tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "owls.md").write_text("---\ntags: [Birds, night]\naliases: [Strigiformes]\n---\n"
                                   "Barn owls hunt at night #field-notes\n", encoding="utf-8")
    (vault / "page.html").write_text("<html><head><title>Herons</title><script>x()</script>"
                                     "</head><body><p>Herons stand still.</p></body></html>",
                                     encoding="utf-8")
    (vault / "Evernote.enex").write_text(ENEX, encoding="utf-8")
    (vault / "table.csv").write_text("text\nleft out\n", encoding="utf-8")
    done = amem(env, "import", str(vault), "--no-enrich")
    assert "3 files, read 3: created 3" in done.stdout
    assert "left out 1 path: a .csv table" in done.stderr
    got = notes(env)
    owls = got["Barn owls hunt at night #field-notes"]
    assert owls["tags"] == ["birds", "night", "field-notes"]
    assert owls["subjects"] == ["owls", "Strigiformes"]
    assert got["Herons stand still."]["subjects"] == ["Herons"]
    milk = got["Milk and eggs"]
    assert (milk["subjects"], milk["tags"]) == (["Groceries"], ["home"])
    assert milk["event_time"].startswith("2024-03-01T12:00:00")


def test_a_json_object_wrapping_its_notes_is_read_from_stdin_and_the_key_said(
        env: dict[str, str]) -> None:
    piped = json.dumps({"version": 1, "memories": [{"text": "Owls hunt at night."}]}, indent=2)
    done = amem(env, "import", "-", "--no-enrich", stdin=piped)
    assert "read 1: created 1" in done.stdout
    assert "amem: read the notes listed under 'memories' of stdin's top-level object" in done.stderr
    err = amem(env, "import", "-", stdin=json.dumps({"pages": [{"text": "x"}]}, indent=1),
               code=2).stderr
    assert "its keys: 'pages' (a list of 1); to import the list under 'pages': " \
           "`jq '.pages' - | amem import -`" in err


def test_a_csv_table_names_its_bad_rows(env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "notes.csv"
    src.write_text("content,tags,created\nOwls hunt at night.,\"birds, night\",2024-01-02\n"
                   ",birds,\n", encoding="utf-8")
    done = amem(env, "import", str(src), "--no-enrich", "--skip-invalid", code=1)
    assert f"amem: skipped {src} row 3: the text cell is empty" in done.stderr
    assert notes(env)["Owls hunt at night."]["tags"] == ["birds", "night"]
