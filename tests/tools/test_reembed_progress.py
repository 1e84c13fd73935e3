"""``amem reembed`` rebuilds a store's vectors; the progress bar draws only on a terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from amem.errors import EmbedderMismatchError
from tools.cli import main
from tools.progress import Progress
from amem.reembed import reembed


def test_reembed_rebuilds_every_note(tmp_path: Path) -> None:
    cfg = load_config(env={"AMEM_HOME": str(tmp_path)})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(64), agent_id="a") as store:
        for i in range(7):
            store.add(f"note {i} about topic {i % 3}", [], enrich=False)
        store.add("someone else's note", [], enrich=False, agent_id="b")
        gone = store.add("a deleted note", [], enrich=False).id
        store.delete(gone)
    seen: list[tuple[int, int | None]] = []
    report = reembed(cfg, HashingEmbedder(128), batch=3, progress=lambda d, t: seen.append((d, t)))
    assert (report.notes, report.old_dim, report.new_dim) == (9, 64, 128)
    assert seen[-1] == (9, 9)
    with pytest.raises(EmbedderMismatchError):
        MemoryStore(None, config=cfg, embedder=HashingEmbedder(64))
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(128), agent_id="a") as store:
        assert store.count() == 7 and store.count(agent_id="b") == 1
        assert store.get(gone, include_inactive=True).is_active is False
        assert store.search("topic 2", limit=3)[0].content.endswith("topic 2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_reembed_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"AMEM_HOME": str(tmp_path), "AMEM_EMBEDDER": "hashing"}
    assert main(["add", "one note", "--no-enrich"], env=env) == 0
    assert main(["reembed", "--to", "hashing-32", "--json"], env=env) == 0
    out = capsys.readouterr().out.split("\n", 1)[1]
    assert json.loads(out)["new_dim"] == 32
    assert main(["list"], env=env) == 1  # the old embedder no longer fits: a clear error
    assert "reembed" in capsys.readouterr().err
    assert main(["list", "--json"], env={**env, "AMEM_EMBEDDER": "hashing-32"}) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 1


def test_reembed_without_a_store(tmp_path: Path) -> None:
    cfg = load_config(env={"AMEM_HOME": str(tmp_path / "empty")})
    with pytest.raises(ValueError, match="no store"):
        reembed(cfg, HashingEmbedder())


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_only_on_a_terminal_and_never_with_quiet() -> None:
    for stream, quiet in ((io.StringIO(), False), (_Tty(), True)):
        with Progress("import", stream=stream, quiet=quiet) as bar:
            bar(5, 10)
            bar("pairs", 1, 2)
        assert stream.getvalue() == ""
    tty = _Tty()
    with Progress("import", stream=tty) as bar:
        bar(5, 10)
        bar(10, 10)
    assert "import" in tty.getvalue() and "10/10" in tty.getvalue()


def test_progress_takes_the_stage_form_of_consolidation() -> None:
    tty = _Tty()
    with Progress("consolidate", stream=tty) as bar:  # (stage, done, total) raised TypeError
        bar("scan", 3, 3)
        bar("pairs", 1, 4)
        bar("pairs", 4, 4)
        bar("pairs", 1, 2)  # the next agent's pairs: a new bar, not a count going back
    text = tty.getvalue()
    assert "consolidate: scan" in text and "4/4" in text and "1/2" in text
    assert text.count("consolidate: pairs") >= 2
    with pytest.raises(TypeError):
        Progress("x", enabled=True)("a", "b", 1, 2)


def test_a_terminal_reporting_no_width_still_gets_its_bar() -> None:
    """A new pty reports 0 columns and 0 lines until someone sizes it (``docker exec -t``, some
    CI runners): tqdm sized its bar to it and drew nothing at all, so a long import looked hung
    (the import's own bar, on stderr, is tests/tools/test_import_messy_cli.py's Ctrl-C test)."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    try:
        with open(slave, "w", encoding="utf-8", closefd=False) as stream:
            assert os.get_terminal_size(slave).columns == 0
            with Progress("import", stream=stream) as bar:
                bar(5, 10)
                bar(10, 10)
            stream.flush()
        drawn = b""
        while select.select([master], [], [], 0.2)[0]:  # all of it: a pty hands it in pieces
            drawn += os.read(master, 65536)
    finally:
        os.close(slave)
        os.close(master)
    text = drawn.decode("utf-8", errors="replace")
    assert "import" in text and "10/10" in text
