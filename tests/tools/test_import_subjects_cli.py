"""``amem import`` of a document gives every note its title and heading path as subjects, so a
question naming the document finds each paragraph (issue 29), through the installed script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem, base_env

GUIDE = """# Lisbon trip

We flew in on a Tuesday.

## Food

### Lunch
Bob likes ramen.

Dinner was grilled sardines.

# Appendix
Packing list: sandals.
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


def found(env: dict[str, str], query: str) -> dict[str, list[str]]:
    """Content -> subjects of every note the search returns."""
    out = amem(env, "search", query, "-n", "10", "--json").stdout
    return {r["content"]: r["subjects"] for r in json.loads(out)["results"]}


def test_every_paragraph_of_a_markdown_document_gets_its_title_and_headings(
        env: dict[str, str], tmp_path: Path) -> None:
    doc = tmp_path / "trip-notes.md"
    doc.write_text(GUIDE, encoding="utf-8")
    report = json.loads(amem(env, "import", str(doc), "--no-enrich", "--json").stdout)
    assert report["created"] == 4
    # the first paragraph keeps its heading in its text, as before; every one gets subjects
    assert found(env, "Lisbon") == {
        "# Lisbon trip\nWe flew in on a Tuesday.": ["Lisbon trip"],
        "### Lunch\nBob likes ramen.": ["Lisbon trip", "Food", "Lunch"],
        "Dinner was grilled sardines.": ["Lisbon trip", "Food", "Lunch"],
        "# Appendix\nPacking list: sandals.": ["Lisbon trip", "Appendix"],
    }
    assert list(found(env, "food sardines"))[0] == "Dinner was grilled sardines."


def test_a_given_title_wins_and_an_empty_one_gives_none(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    plain = tmp_path / "packing.txt"
    plain.write_text("Bring sandals.\n\nBring a hat.\n", encoding="utf-8")
    amem(env, "import", str(plain), "--no-enrich")
    assert found(env, "packing") == {"Bring sandals.": ["packing"], "Bring a hat.": ["packing"]}
    other = base_env(tmp_path / "other")
    amem(other, "import", str(plain), "--no-enrich", "--title", "Summer in Lisbon")
    assert found(other, "summer") == {"Bring sandals.": ["Summer in Lisbon"],
                                      "Bring a hat.": ["Summer in Lisbon"]}
    none = base_env(tmp_path / "none")
    amem(none, "import", str(plain), "--no-enrich", "--title", "")
    assert found(none, "bring") == {"Bring sandals.": [], "Bring a hat.": []}


def test_a_title_where_it_cannot_apply_is_a_usage_error(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    lines = tmp_path / "notes.jsonl"
    lines.write_text('{"text": "a note", "subjects": ["x"]}\n', encoding="utf-8")
    err = amem(env, "import", str(lines), "--title", "T", "--json", code=2)
    assert json.loads(err.stdout)["error"]["field"] == "title"
    assert "JSONL" in err.stderr
    doc = tmp_path / "doc.md"
    doc.write_text("text\n", encoding="utf-8")
    err = amem(env, "import", str(doc), "--title", "x" * 201, code=2)
    assert "title" in err.stderr and "200" in err.stderr
    err = amem(env, "import", str(lines), "--from-export", "--title", "T", code=2)
    assert "--title" in err.stderr
    assert json.loads(amem(env, "list", "--json").stdout)["count"] == 0
