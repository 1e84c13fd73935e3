"""How ``amem import -`` tells a pipe's format by how it opens (``tools.cli.spool.sniffed``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cli.spool import sniffed


@pytest.mark.parametrize(("head", "fmt"), [
    ('[{"text": "a"}]', "json"),
    ('{"text": "a"}\n{"text": "b"}\n', "jsonl"),
    ('{"notes": [{"text": "a"}]}', "json"),  # one line, but a list of notes under its key
    ('{\n  "version": 1,\n  "memories": []\n}\n', "json"),  # pretty-printed: one document
    ("<!DOCTYPE html>\n<html><p>a</p></html>", "html"),
    ("<HTML><body>a</body></HTML>", "html"),
    ('<?xml version="1.0"?>\n<!DOCTYPE en-export SYSTEM "x">\n<en-export>', "enex"),
    ('<p align="center">logo</p>\n\n# Project\n', None),  # Markdown opening with markup
    ("# Title\n\ntext\n", None),
])
def test_a_pipe_is_told_by_how_it_opens(tmp_path: Path, head: str, fmt: str | None) -> None:
    path = tmp_path / "in"
    path.write_text(head, encoding="utf-8")
    assert sniffed(path) == fmt
