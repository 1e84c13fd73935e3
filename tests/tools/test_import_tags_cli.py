"""A vault note retagged in Obsidian and imported again, through the installed script: the
stored note gains the new tag (``amem.write.tagjoin``), and ``amem search --tag`` finds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem
from .test_import_checks_cli import env  # noqa: F401 - a fixture


@pytest.mark.slow  # eight runs of the script, 1-2 s each on a shared machine
def test_a_retagged_vault_note_keeps_its_new_tag_and_search_filters_by_it(
        env: dict[str, str], tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "trip.md").write_text("---\ntags: [travel]\n---\nBooked the Lisbon flight.\n",
                                   encoding="utf-8")
    (vault / "pack.md").write_text("---\ntags: [travel]\n---\nPack sandals for Lisbon.\n",
                                   encoding="utf-8")
    amem(env, "import", str(vault), "--no-enrich")
    (vault / "trip.md").write_text("---\ntags: [travel, conference]\n---\n"
                                   "Booked the Lisbon flight.\n", encoding="utf-8")
    report = json.loads(amem(env, "import", str(vault), "--no-enrich", "--json").stdout)
    # was: deduplicated 2 and the "conference" tag dropped, with no word said
    assert (report["created"], report["deduplicated"], report["tags_added"]) == (0, 2, 1)
    # any case, a leading '#' or not, as a vault user types it (amem.notefields.tag_key)
    hits = json.loads(amem(env, "search", "Lisbon", "--tag", "#Conference", "--tag", "work",
                           "--json").stdout)["results"]
    matches = [h for h in hits if h["via"] == "match"]
    assert [h["content"] for h in matches] == ["Booked the Lisbon flight."]
    assert matches[0]["tags"] == ["travel", "conference"]
    assert report["tags_added_to"] == [matches[0]["id"]]
    # the joined tag taken back by its user: recorded, and the filter no longer finds it
    undone = json.loads(amem(env, "update", matches[0]["id"], "--tag", "travel", "--json").stdout)
    assert undone["changed"] == ["tags"]
    again = json.loads(amem(env, "search", "Lisbon", "--tag", "conference", "--json").stdout)
    assert [h for h in again["results"] if h["via"] == "match"] == []
    amem(env, "update", matches[0]["id"], "--tag", "x", "--no-tags", code=2)  # one or the other
    # the history says what the re-import added and what the update took back (the update
    # was shown only by --json)
    shown = amem(env, "history", matches[0]["id"]).stdout
    assert "tags added: conference" in shown and "updated: tags were travel, conference" in shown
    # the vault imported again: the removed tag stays removed (it came back before), said
    # (tests/amem/store/test_tags_stay_removed.py: the note's tags, each case)
    said = amem(env, "import", str(vault), "--no-enrich").stdout
    assert "tags_kept_removed 1: " in said and said.rstrip().endswith(matches[0]["id"])
    assert "gained tags" not in said
