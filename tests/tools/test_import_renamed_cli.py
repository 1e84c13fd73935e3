"""``amem import`` of a document renamed since it was imported, through the installed script:
its notes are the ones stored, which gain the new file name as a subject
(``amem.importtitle``); a title the user gave still keeps the same text apart."""

from __future__ import annotations

import json
from pathlib import Path

from .test_cli_frontdoor import amem
from .test_import_checks_cli import env, stored  # noqa: F401 - env is a fixture

DOC = "Tea is best brewed at eighty degrees.\n\n## Servers\n\nStaging moved to db-2.\n"


def test_a_renamed_document_imported_again_adds_its_name_not_a_copy(
        env: dict[str, str], tmp_path: Path) -> None:
    first = tmp_path / "notes.md"
    first.write_text(DOC, encoding="utf-8")
    amem(env, "import", str(first), "--no-enrich")
    renamed = first.rename(tmp_path / "notes-2025.md")
    done = amem(env, "import", str(renamed), "--no-enrich", "--json")
    report = json.loads(done.stdout)
    # was: created 2 (every paragraph stored twice, the first one's subjects sharing nothing)
    assert (report["created"], report["deduplicated"], report["title_added"]) == (0, 2, 2)
    assert report["warnings"] == []  # was: "not added: notes-2025" on the heading's paragraph
    assert stored(env) == {"Tea is best brewed at eighty degrees.": ["notes", "notes-2025"],
                           "## Servers\nStaging moved to db-2.": ["notes", "Servers",
                                                                  "notes-2025"]}
    hits = json.loads(amem(env, "search", "notes-2025 tea", "--json").stdout)["results"]
    assert hits[0]["content"] == "Tea is best brewed at eighty degrees."
    again = amem(env, "import", str(renamed), "--no-enrich")  # a rerun: nothing left to add
    assert "created 0, deduplicated 2" in again.stdout and "gained" not in again.stdout


def test_a_given_title_still_keeps_the_same_text_apart(env: dict[str, str],
                                                       tmp_path: Path) -> None:
    doc = tmp_path / "seats.txt"
    doc.write_text("Prefers window seats.\n", encoding="utf-8")
    amem(env, "import", str(doc), "--no-enrich", "--title", "alice")
    (tmp_path / "bob.txt").write_text("# Bob\n\nPrefers window seats.\n", encoding="utf-8")
    amem(env, "import", str(tmp_path / "bob.txt"), "--no-enrich")
    done = amem(env, "import", str(doc), "--no-enrich", "--title", "carol")
    assert "created 1" in done.stdout and "gained" not in done.stdout
    listed = json.loads(amem(env, "list", "--json").stdout)["notes"]
    assert len(listed) == 3  # alice's, bob's (a # title is the user's) and carol's
    # a document with no title of its own: its text is a stored note's, which it joins (a
    # file's name cannot say whether it was renamed or names someone: --title says so)
    (tmp_path / "dave.txt").write_text("Prefers window seats.\n", encoding="utf-8")
    done = amem(env, "import", str(tmp_path / "dave.txt"), "--no-enrich")
    assert "created 0, deduplicated 1" in done.stdout
    assert "1 stored notes hold the same text from a file of another name: they gained " \
           "this file's name as a subject" in done.stdout
    # a daily note's template paragraph is stored once, but a file mostly new is no rename:
    # its name is not added to the shared paragraph (every day's date would bury it)
    (tmp_path / "2025-03-02.md").write_text("Prefers window seats.\n\nRained all day.\n\n"
                                            "Read a book.\n", encoding="utf-8")
    done = amem(env, "import", str(tmp_path / "2025-03-02.md"), "--no-enrich")
    assert "created 2, deduplicated 1" in done.stdout and "gained" not in done.stdout
