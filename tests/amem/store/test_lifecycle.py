"""Persistence, embedder records, process ownership and backend congruence of the store."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import EmbedderMismatchError, StoreLockedError

from .conftest import make_store

CORPUS = [f"note {i}: " + " ".join(w for w in ("tea coffee water juice milk soda wine beer".split())
                                     if (i * 7 + len(w)) % 3) + f" topic{i % 5}" for i in range(60)]


def test_close_reopen_same_results(tmp_path: Path, embedder: HashingEmbedder,
                                   clock: ManualClock) -> None:
    with MemoryStore(tmp_path / "s", embedder=embedder, clock=clock) as store:
        for i, text in enumerate(CORPUS):
            store.add(text, id=f"n{i}", enrich=False)
        before = [(r.id, r.rrf) for r in store.search("coffee topic3", limit=10, heat=False)]
    with MemoryStore(tmp_path / "s", embedder=embedder, clock=clock) as store:
        assert store.count() == len(CORPUS)
        after = [(r.id, r.rrf) for r in store.search("coffee topic3", limit=10, heat=False)]
    assert after == before


def test_other_embedder_is_a_clear_error(tmp_path: Path, clock: ManualClock) -> None:
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64), clock=clock) as store:
        store.add("hello", enrich=False)
    with pytest.raises(EmbedderMismatchError) as info:
        MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=128), clock=clock)
    assert "reembed" in str(info.value) and "64" in info.value.stored
    # the failed open released the store: the right embedder opens it fine
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64), clock=clock) as store:
        assert store.count() == 1


class _Renamed:
    """Same vectors and size, another model id: must still be refused."""

    def __init__(self, inner: HashingEmbedder) -> None:
        self.inner = inner
        self.model_id = "other-model"
        self.dim = inner.dim

    def embed(self, texts, kind="passage"):  # type: ignore[no-untyped-def]
        return self.inner.embed(texts, kind)


def test_other_model_of_same_size_is_a_clear_error(tmp_path: Path, clock: ManualClock) -> None:
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64), clock=clock) as store:
        store.add("hello", enrich=False)
    with pytest.raises(EmbedderMismatchError) as info:
        MemoryStore(tmp_path / "s", embedder=_Renamed(HashingEmbedder(dim=64)), clock=clock)
    assert info.value.stored.startswith("hashing") and info.value.given == "other-model"
    assert "amem reembed" in str(info.value)
    with MemoryStore(tmp_path / "s", embedder=HashingEmbedder(dim=64), clock=clock) as store:
        assert store.count() == 1


def test_second_process_gets_a_clear_error(tmp_path: Path, embedder: HashingEmbedder) -> None:
    path = tmp_path / "s"
    with MemoryStore(path, embedder=embedder) as store:
        store.add("owned by this process", enrich=False)
        code = textwrap.dedent(f"""
            from amem import MemoryStore
            from amem.embed.hashing import HashingEmbedder
            from amem.errors import StoreLockedError
            try:
                MemoryStore({str(path)!r}, embedder=HashingEmbedder(dim={embedder.dim}))
            except StoreLockedError as exc:
                print("LOCKED", exc)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120)
        assert "LOCKED" in out.stdout, out.stderr
        assert str(path) in out.stdout and "amem serve" in out.stdout
        assert "Traceback" not in out.stderr
        assert store.count() == 1
    with MemoryStore(path, embedder=embedder) as store:
        assert store.count() == 1


def test_backends_are_congruent(embedder: HashingEmbedder, clock: ManualClock) -> None:
    edge = make_store("edge", embedder, clock)
    local = make_store("qdrant-local", embedder, clock)
    try:
        for store in (edge, local):
            for i, text in enumerate(CORPUS):
                store.add(text, id=f"n{i}", enrich=False, agent_id="a" if i % 4 else "b")
        for query in ("coffee", "tea water topic2", "milk soda beer", "note 17", "wine"):
            for agent in ("a", "b"):
                got_edge = [r.id for r in edge.search(query, limit=10, agent_id=agent, heat=False)]
                got_local = [r.id for r in local.search(query, limit=10, agent_id=agent,
                                                        heat=False)]
                assert got_edge == got_local, query
                assert got_edge
    finally:
        edge.close()
        local.close()


def test_config_from_env_and_toml(tmp_path: Path) -> None:
    toml = tmp_path / "amem.toml"
    toml.write_text('[amem]\nrrf_k = 30\ncandidates = 20\n')
    cfg = load_config(toml, env={"AMEM_CANDIDATES": "40", "AMEM_HOME": str(tmp_path)},
                      overrides={"heat": False})
    assert (cfg.rrf_k, cfg.candidates, cfg.heat, cfg.home) == (30, 40, False, tmp_path)
    assert cfg.store_path == tmp_path / "store"


def test_no_argument_store_opens_what_the_cli_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``MemoryStore()`` opened the XDG default with e5 while the CLI used $AMEM_HOME: a bulk
    import script and ``amem search`` then looked at two different stores."""
    monkeypatch.setenv("AMEM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AMEM_EMBEDDER", "hashing")
    monkeypatch.setenv("AMEM_AGENT", "scripted")
    with MemoryStore() as store:
        assert Path(store.location) == tmp_path / "home" / "store"
        assert store.embedder.model_id == HashingEmbedder().model_id
        assert store.agent_id == "scripted"
        store.add("written by a script", enrich=False)
    from tools.cli import main

    capsys.readouterr()
    assert main(["list", "--json"], env={"AMEM_HOME": str(tmp_path / "home"),
                                         "AMEM_EMBEDDER": "hashing",
                                         "AMEM_AGENT": "scripted"}) == 0
    assert "written by a script" in capsys.readouterr().out  # the CLI sees the script's note
    explicit = load_config(env={"AMEM_HOME": str(tmp_path / "elsewhere")})
    cfg_store = MemoryStore(":memory:", config=explicit, embedder=HashingEmbedder())
    try:  # an explicit config reads no environment: not the env's agent, not its home
        assert cfg_store.agent_id == "default" and cfg_store.config.home == explicit.home
    finally:
        cfg_store.close()
