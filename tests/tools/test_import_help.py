"""``amem import --help`` names every kind of file a folder import reads.

It said "every Markdown, text and JSONL file under it" while a folder's ``.html``, ``.htm`` and
``.enex`` files are imported too (``amem.importdir``): a user with a folder of web clips or an
Evernote export read that they would be skipped."""

from __future__ import annotations

import pytest

from tools.cli import main


def test_import_help_names_the_html_and_evernote_files_a_folder_import_reads(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "--help"], env={}) == 0
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    described, folder = shown.split("positional arguments:")
    assert "HTML" in described and "Evernote" in described
    assert "every Markdown, text, JSONL, HTML and Evernote (.enex) file under it" in folder
