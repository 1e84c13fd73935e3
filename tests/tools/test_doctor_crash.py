"""``amem doctor`` on what a killed process leaves behind (findings F1, F5, F6, F10): each is
reported with what to do, and ``--fix`` repairs what it can."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from amem import MemoryStore
from amem.backends import EdgeBackend
from amem.backlinks import OWED_FIELD
from amem.config import load_config
from amem.embed import make_embedder
from amem.reembed import reembed
from amem.storeswap import NEW, SPOOL
from scheduler.config import SchedulerConfig
from scheduler.record import write_record
from tests.fakes.backends import FlakyBackend, InjectedCrash
from tools.cli import main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing",
            "AMEM_AGENT": "default"}


def run_json(capsys: pytest.CaptureFixture[str], env: dict[str, str], *argv: str,
             code: int = 0) -> dict[str, object]:
    got = main([*argv, "--json"], env=env)
    out = capsys.readouterr()
    assert got == code, out.err
    data = json.loads(out.out)
    assert isinstance(data, dict)
    return data


def open_store(env: dict[str, str]) -> MemoryStore:
    return MemoryStore(config=load_config(None, env=env), agent_id="default")


def test_doctor_counts_one_way_links_and_fix_writes_their_other_half(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    with open_store(env) as store:
        for nid in ("a", "b", "c"):
            store.add(f"note {nid} about the garden shed", id=nid, enrich=False)
        agent = store.agent_id
        # what a kill left: "c" was written linking a and b, only a got the link back; and a
        # note of an old store with no mark whose neighbour lost its half
        store.index.update_note_fields("c", agent, {"links": ["a", "b"], OWED_FIELD: True})
        store.index.update_note_fields("a", agent, {"links": ["c"]})
    doctor = run_json(capsys, env, "doctor")
    memory = doctor["memory"]
    assert isinstance(memory, dict)
    assert memory["one_way_links"] == 1 and memory["links_owed"] == 1
    assert memory["one_way_examples"] == ["default/c -> b"]
    said = [w for w in doctor["warnings"] if "one-way" in w]  # type: ignore[union-attr]
    assert said and "`amem doctor --fix`" in said[0]
    fixed = run_json(capsys, env, "doctor", "--fix")
    assert fixed["memory"]["links_mended"] == {"notes_settled": 1,  # type: ignore[index]
                                               "links_completed": 0}
    again = run_json(capsys, env, "doctor")
    assert again["memory"]["one_way_links"] == 0  # type: ignore[index]
    assert again["memory"]["links_owed"] == 0  # type: ignore[index]
    assert not [w for w in again["warnings"] if "one-way" in w]  # type: ignore[union-attr]


def test_doctor_and_status_name_a_delete_all_that_did_not_finish(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    config = load_config(None, env=env)
    embedder = make_embedder("hashing")
    backend = FlakyBackend(EdgeBackend(str(config.store_path), embedder.dim))
    with MemoryStore(config=config, embedder=embedder, backend=backend) as store:
        store.add_many([{"text": f"note {i}"} for i in range(3)], agent_id="x", enrich=False)
        backend.arm(0)  # killed at its first delete
        with pytest.raises(InjectedCrash):
            store.delete_all(agent_id="x")
        backend.arm(None)
    doctor = run_json(capsys, env, "doctor", code=1)
    assert doctor["ok"] is False
    said = [w for w in doctor["warnings"] if "delete --all" in w]  # type: ignore[union-attr]
    assert len(said) == 1 and "agent 'x'" in said[0] and "3 of its notes" in said[0]
    assert "amem --agent x delete --all --yes" in said[0]
    status = run_json(capsys, env, "status")
    unfinished = status["memory"]["delete_all_unfinished"]  # type: ignore[index]
    assert [(u["agent_id"], u["notes_left"]) for u in unfinished] == [("x", 3)]
    assert run_json(capsys, env, "--agent", "x", "delete", "--all", "--yes")["deleted"] == 3
    assert run_json(capsys, env, "doctor")["ok"] is True


class DyingEmbedder:
    """The hashing embedder until its second call, then killed (a reembed killed mid-build)."""

    def __init__(self) -> None:
        self.inner = make_embedder("hashing-256")
        self.model_id, self.dim, self.calls = self.inner.model_id, self.inner.dim, 0

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        self.calls += 1
        if self.calls >= 2:
            raise KeyboardInterrupt("killed")
        return self.inner.embed(texts, kind=kind)


def test_doctor_names_what_a_killed_reembed_left_and_fix_deletes_it(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    with open_store(env) as store:
        store.add_many([{"text": f"note {i}"} for i in range(4)], enrich=False)
    config = load_config(None, env=env)
    with pytest.raises(KeyboardInterrupt):
        reembed(config, DyingEmbedder(), batch=2)  # type: ignore[arg-type]
    doctor = run_json(capsys, env, "doctor")
    said = [w for w in doctor["warnings"] if "reembed" in w]  # type: ignore[union-attr]
    assert len(said) == 1 and SPOOL in said[0] and NEW in said[0]
    assert "`amem doctor --fix`" in said[0]
    fixed = run_json(capsys, env, "doctor", "--fix")
    assert len(fixed["memory"]["reembed_leftovers_removed"]) == 2  # type: ignore[index]
    home = Path(env["AMEM_HOME"])
    assert not (home / SPOOL).exists() and not (home / NEW).exists()
    again = run_json(capsys, env, "doctor")
    assert again["memory"]["reembed_leftovers"] == []  # type: ignore[index]
    assert run_json(capsys, env, "status")["memory"]["active_notes"] == 4  # type: ignore[index]


def test_doctor_warns_of_a_nightly_run_whose_process_died(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    with open_store(env) as store:
        store.add("a note", enrich=False)
    home = Path(env["AMEM_HOME"])
    # what a scheduler killed mid-run leaves: "running", and nobody holds the run lock
    write_record(SchedulerConfig(home=home).record_path, {"last_run": {
        "status": "running", "reason": "manual", "started_at": "2026-03-01T02:30:00+00:00",
        "pid": 999999}})
    doctor = run_json(capsys, env, "doctor")
    assert doctor["ok"] is True  # owed maintenance, not damage
    said = [w for w in doctor["warnings"] if "nightly run" in w]  # type: ignore[union-attr]
    assert len(said) == 1 and "interrupted" in said[0] and "pid 999999" in said[0]
    assert "`amem scheduler --once`" in said[0]


def test_doctor_warns_of_a_failed_nightly_run_and_names_its_error(
        capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> None:
    """`amem doctor` said nothing of a nightly run that failed (only `amem status` showed it):
    a store whose upkeep has failed for nights looked healthy."""
    from datetime import UTC, datetime

    with open_store(env) as store:
        store.add("a note", enrich=False)
    home = Path(env["AMEM_HOME"])
    write_record(SchedulerConfig(home=home).record_path, {
        "consecutive_failures": 2, "last_run": {
            "status": "failed", "reason": "scheduled", "pid": 999999,
            "started_at": datetime.now(UTC).isoformat(),
            "error": "consolidate: OSError: [Errno 28] No space left on device"}})
    doctor = run_json(capsys, env, "doctor")
    assert doctor["ok"] is True  # owed maintenance, not damage
    said = [w for w in doctor["warnings"] if "nightly run" in w]  # type: ignore[union-attr]
    assert len(said) == 1 and "failed" in said[0] and "No space left on device" in said[0]
    assert "2 nights in a row" in said[0] and "`amem scheduler --once`" in said[0]
