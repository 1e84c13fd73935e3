"""``amem import`` through the installed script: a bad ``--batch`` and an id clash import
nothing (exit 2, the problem named); Markdown code fences and a byte-order mark are read as a
reader of the file sees them (``amem.importer``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.amem.store.test_import_checks import RUNBOOK

from .test_cli_frontdoor import amem, base_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


def stored(env: dict[str, str]) -> dict[str, list[str]]:
    """Content -> subjects of every live note of the agent, read in one command (an export of
    the agent's notes: ``list`` shows no subjects, and a ``get`` per note was a process each)."""
    rows = [json.loads(line)["note"] for line in
            amem(env, "export", "-", "--no-vectors", "--agent", env["AMEM_AGENT"]).stdout.splitlines()]
    return {n["content"]: n["subjects"] for n in rows if n["is_active"]}


def test_a_batch_below_one_is_a_usage_error_and_imports_nothing(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text("".join(json.dumps({"text": f"note {i}"}) + "\n" for i in range(5)),
                   encoding="utf-8")
    for bad in ("-1", "0"):
        done = amem(env, "import", str(src), "--batch", bad, "--no-enrich", "--json", code=2)
        assert json.loads(done.stdout)["error"]["field"] == "batch"
        assert "batch must be a whole number of at least 1" in done.stderr
    assert stored(env) == {}
    report = json.loads(amem(env, "import", str(src), "--batch", "2", "--no-enrich",
                             "--json").stdout)
    assert report["created"] == 5


def test_an_id_clash_imports_nothing_unless_skip_invalid(env: dict[str, str],
                                                         tmp_path: Path) -> None:
    src = tmp_path / "dupid.jsonl"
    src.write_text(
        '{"text": "First text with id X about owls", "id": "X"}\n'
        '{"text": "Second different text with the same id X about bats", "id": "X"}\n'
        '{"text": "Third unrelated line about moths"}\n', encoding="utf-8")
    err = amem(env, "import", str(src), "--no-enrich", code=2).stderr
    assert f"{src}:2: line 1 already gives id 'X' to another text" in err
    assert "nothing was imported" in err and stored(env) == {}
    done = amem(env, "import", str(src), "--no-enrich", "--skip-invalid", code=1)
    assert f"skipped {src}:2:" in done.stderr
    assert set(stored(env)) == {"First text with id X about owls",
                                "Third unrelated line about moths"}
    # a stored note's id with another text: refused whole, the stored note kept
    clash = tmp_path / "clash.jsonl"
    clash.write_text('{"text": "a new note about wasps"}\n{"text": "OVERWRITTEN", "id": "X"}\n',
                     encoding="utf-8")
    err = amem(env, "import", str(clash), "--no-enrich", code=2).stderr
    assert f"{clash}:2: a note with id 'X' already exists with different content" in err
    assert "OVERWRITTEN" not in stored(env) and "a new note about wasps" not in stored(env)


def test_markdown_code_fences_and_a_byte_order_mark(env: dict[str, str],
                                                    tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(RUNBOOK, encoding="utf-8")
    amem(env, "import", str(doc), "--no-enrich")
    notes = stored(env)
    assert notes["```bash\n# this is a comment in code, not a heading\nsystemctl status "
                 "payments\n\njournalctl -u payments\n```"] == ["Runbook", "Restarts"]
    assert notes["### Deep heading\nDeep content about the failover to pay-2 in region "
                 "eu-west."] == ["Runbook", "Restarts", "Deep heading"]
    assert len(notes) == 4
    bom = base_env(tmp_path / "bom")
    md = tmp_path / "bom.md"
    md.write_bytes(b"\xef\xbb\xbf# BOM Title\r\n\r\nParagraph one about herons.\r\n")
    amem(bom, "import", str(md), "--no-enrich")
    assert stored(bom) == {"# BOM Title\nParagraph one about herons.": ["BOM Title"]}
