"""An Obsidian or Logseq note's tags and aliases, kept by a Markdown import (``amem.docmeta``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amem import MemoryStore
from amem.importer import import_file, read_items


def items(path: Path, text: str) -> list[dict[str, Any]]:
    path.write_text(text, encoding="utf-8")
    out = []
    for _, item in read_items(path, "text"):
        assert isinstance(item, dict)
        out.append(item)
    return out


def test_front_matter_tags_in_each_form_and_aliases_as_subjects(tmp_path: Path) -> None:
    forms = {
        "tags: [Project, '#idea']\n": ["project", "idea"],
        "tags: project, Big Idea\n": ["project", "big", "idea"],  # YAML: a space splits too
        "tags: project idea\n": ["project", "idea"],
        "tags:\n  - Project/AMem\n  - \"reading list\"\n": ["project/amem", "reading-list"],
        "tag: solo\n": ["solo"],
        "tags: 2024 things\n": ["things"],  # digits alone are no tag (Obsidian's rule)
    }
    for front, tags in forms.items():
        got = items(tmp_path / "n.md", f"---\ntitle: Trip\n{front}aliases: [Lisbon, LIS]\n---\n"
                                       "Packed sandals.\n")
        assert got == [{"text": "Packed sandals.", "subjects": ["Trip", "Lisbon", "LIS"],
                        "tags": tags}], front
    got = items(tmp_path / "n.md", "---\naliases:\n  - Ana\n---\n# Ana Silva\nLikes tea.\n")
    assert got[0]["subjects"] == ["Ana Silva", "Ana"]  # the alias after the title, kept once


def test_inline_tags_are_the_paragraphs_not_code_urls_or_headings(tmp_path: Path) -> None:
    doc = ("---\ntags: vault\n---\n# Title\nMet Ana #people/ana and (#Coffee), see "
           "https://x.org/page#part and C# and &#39; and #1 and `#inline`.\n\n"
           "## Heading #h\nplain\n\n```sh\n# a comment #not-a-tag\n```\n\n"
           "Logseq #[[Reading List]] too\n")
    got = items(tmp_path / "n.md", doc)
    assert [(i["text"].splitlines()[0], i.get("tags")) for i in got] == [
        ("# Title", ["vault", "people/ana", "coffee"]),
        ("## Heading #h", ["vault", "h"]),  # a heading's words may hold a tag, as in Obsidian
        ("```sh", ["vault"]),  # a code block's '#' is code
        ("Logseq #[[Reading List]] too", ["vault", "reading-list"]),
    ]
    assert got[0]["text"].endswith("`#inline`.")  # the text is kept as written


def test_logseq_page_properties_are_metadata(tmp_path: Path) -> None:
    got = items(tmp_path / "page.md", "title:: Garden\ntags:: plants, [[Green Things]]\n"
                                      "alias:: Yard\n- Water the basil #daily\n")
    assert got == [{"text": "- Water the basil #daily", "subjects": ["Garden", "Yard"],
                    "tags": ["plants", "green-things", "daily"]}]


def test_imported_tags_are_stored_as_given_and_embedded(tmp_path: Path,
                                                       store: MemoryStore) -> None:
    doc = tmp_path / "trip.md"
    doc.write_text("---\ntags: [travel]\n---\nAlice booked a flight to Lisbon for the "
                   "conference in March #work\n", encoding="utf-8")
    report = import_file(store, doc)
    assert report.created == 1
    note = store.list(limit=1)[0][0]
    got = store.get(note.id)
    assert got.tags == ["travel", "work"]
    # the user's tags are the note's enrichment: embedded with its content (drawn offline
    # enrichment is not), so a search by the tag's word finds the note on the dense side too
    assert got.enriched_by == "given" and "travel" in got.embed_text()
    # a JSONL line's given keywords still mean the caller enriched it
    lines = tmp_path / "n.jsonl"
    lines.write_text('{"text": "Bob likes green tea", "keywords": ["tea"], "tags": ["t"]}\n',
                     encoding="utf-8")
    import_file(store, lines)
    bob = next(n for n in store.list(limit=10)[0] if "Bob" in n.content)
    assert store.get(bob.id).enriched_by == "given" and store.get(bob.id).keywords == ["tea"]


def test_a_folder_counts_a_note_that_gains_tags_from_two_files_once(tmp_path: Path) -> None:
    """Each file's import counts its notes once; the folder's report summed the files', so a
    note two files both retagged was counted twice (``tags_added`` 2, its id listed twice)."""
    from amem.embed.hashing import HashingEmbedder
    from amem.importdir import import_dir

    folder = tmp_path / "notes"
    folder.mkdir()
    line = '{"text": "Alice booked the Lisbon flight", "tags": %s}\n'
    (folder / "a.jsonl").write_text(line % '["travel"]', encoding="utf-8")
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), agent_id="t") as store:
        assert import_dir(store, folder, enrich=False).created == 1
        (note,) = store.list()[0]
        (folder / "a.jsonl").write_text(line % '["travel", "home"]', encoding="utf-8")
        (folder / "b.jsonl").write_text(line % '["Travel", "work"]' + line % '["lisbon"]',
                                        encoding="utf-8")
        report = import_dir(store, folder, enrich=False)
        assert report.deduplicated == 3 and report.created == 0
        assert (report.tags_added, report.tags_added_to) == (1, [note.id])  # was 2, [id, id]
        assert store.get(note.id).tags == ["travel", "home", "work", "lisbon"]


def test_a_folder_counts_a_note_that_gains_two_file_names_once(tmp_path: Path) -> None:
    """``title_added`` counts stored notes that gained a file-name title (``amem.importtitle``).
    A folder's report left it out of the files' sum (0 beside the titles written); summed, a
    note two files both titled would count twice, as ``tags_added`` did."""
    from amem.embed.hashing import HashingEmbedder
    from amem.importdir import import_dir

    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a", "b", "c"):  # one text saved under three names: one note, three titles
        (folder / f"{name}.md").write_text("Sent from my phone.\n", encoding="utf-8")
    with MemoryStore(":memory:", embedder=HashingEmbedder(dim=64), agent_id="t") as store:
        report = import_dir(store, folder, enrich=False)
        (note,), _ = store.list(limit=5)
        assert note.subjects == ["a", "b", "c"] and report.created == 1
        assert report.title_added == 1  # was 0 (not summed); summed alone it would be 2
