"""``amem import`` through the installed script: the report's warnings on stderr (and in
--json) with their lines; ``--from-export`` takes ``--batch`` and checks it; an export loaded
twice says its notes were unchanged and keeps the BM25 statistics right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_frontdoor import amem, base_env

TEXT = "Prefers window seats on flights."


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


def test_a_duplicate_lines_dropped_subject_is_warned_with_its_line(env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    src = tmp_path / "notes.jsonl"
    src.write_text(json.dumps({"text": TEXT, "subjects": ["alice"]}) + "\n"
                   + json.dumps({"text": TEXT, "subjects": ["alice", "bob"]}) + "\n",
                   encoding="utf-8")
    done = amem(env, "import", str(src), "--no-enrich")
    assert "created 1, deduplicated 1" in done.stdout
    (warning,) = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warning.startswith(f"amem: warning: {src}:2: ") and "not added: bob" in warning
    report = json.loads(amem(env, "import", str(src), "--no-enrich", "--json").stdout)
    assert [w.split(": ")[0] for w in report["warnings"]] == [f"{src}:2"]
    assert "not added: bob" in report["warnings"][0]


def exported(tmp_path: Path) -> Path:
    source = base_env(tmp_path / "source")
    for text in ("Alice likes green tea.", "Bob moved to Paris in 2020.",
                 "The server listens on port 8080."):
        amem(source, "add", text, "--no-enrich")
    out = tmp_path / "exp.jsonl"
    amem(source, "export", str(out))
    return out


def test_from_export_takes_batch_and_refuses_a_bad_one(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    dump = exported(tmp_path)
    for bad in ("0", "-3"):
        done = amem(env, "import", str(dump), "--from-export", "--batch", bad, "--json", code=2)
        assert json.loads(done.stdout)["error"]["field"] == "batch"
        assert "batch must be a whole number of at least 1" in done.stderr
    assert json.loads(amem(env, "status", "--json").stdout)["memory"]["points"] == 0
    report = json.loads(amem(env, "import", str(dump), "--from-export", "--batch", "1",
                             "--json").stdout)
    assert report["created"] == 3


def test_an_export_loaded_twice_is_unchanged_the_second_time(env: dict[str, str],
                                                             tmp_path: Path) -> None:
    dump = exported(tmp_path)
    first = amem(env, "import", str(dump), "--from-export")
    assert "read 3: created 3," in first.stdout
    second = amem(env, "import", str(dump), "--from-export")
    assert "read 3: created 0," in second.stdout and "unchanged 3" in second.stdout
    status = amem(env, "status", "--json")
    assert json.loads(status.stdout)["memory"]["points"] == 3
    assert "BM25 statistics" not in status.stderr  # "counted 6 documents, the engine holds 3"
