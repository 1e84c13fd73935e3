"""Deferred re-embedding: changed notes are re-embedded once per batch, and a killed or
failed refresh leaves marked notes that are counted and repaired (``amem.refresh``)."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.export import export_store, import_export
from amem.importer import import_file
from amem.notes import Note, point_id
from tests.fakes.embedders import FailingEmbedder, RecordingEmbedder

BASE = "The deploy pipeline runs make release after CI is green on main branch"
VARIANTS = [
    "The deploy pipeline runs make release after CI is green on the main branch",
    "The deploy pipeline runs make release after the CI is green on main branch",
    "Our deploy pipeline runs make release after CI is green on main branch",
]
FOLDING = {"fold_threshold": 0.8, "pending_threshold": 0.6}


def open_store(embedder: HashingEmbedder, clock: ManualClock, path: str | Path = ":memory:",
               **overrides: object) -> MemoryStore:
    return MemoryStore(path, config=load_config(overrides={**FOLDING, **overrides}),
                       embedder=embedder, clock=clock)


def stored_vector(store: MemoryStore, note: Note) -> np.ndarray:
    hit = store.index.backend.retrieve([point_id(note.agent_id, note.id)], with_vectors=True)[0]
    assert hit.dense is not None
    return np.asarray(hit.dense)


def embeds_current_text(store: MemoryStore, note: Note) -> bool:
    want = HashingEmbedder(store.embedder.dim).embed([note.embed_text()], kind="passage")[0]
    return bool(np.allclose(stored_vector(store, note), want, atol=1e-5))


def stale_payloads(store: MemoryStore) -> list[str]:
    return [n.id for n, _ in store.iter_notes(all_agents=True, include_inactive=True)
            if n.vector_stale]


def test_a_note_folded_three_times_in_one_batch_is_embedded_once(clock: ManualClock) -> None:
    recorder = RecordingEmbedder()
    with open_store(recorder, clock) as store:
        results = store.add_many([{"text": t} for t in [BASE, *VARIANTS]])
        assert [r.status for r in results] == ["created", "folded", "folded", "folded"]
        note = store.get(results[0].id)
        assert all(v in note.content for v in VARIANTS)
        # one call for the four new texts, one for the folded note's final text; its stored
        # vector was never rewritten for an intermediate version. Those versions were read
        # once each, as content, by the next fold decision (amem.nearduplicate), never twice.
        versions = [c for call in recorder.calls[1:-1] for c in call]
        assert recorder.calls[0] == [BASE, *VARIANTS] and recorder.calls[-1] == [note.embed_text()]
        assert len(versions) == len(set(versions)) == len(VARIANTS) - 1
        assert all(v.startswith(BASE) and v != note.content for v in versions)
        assert embeds_current_text(store, note)
        assert stale_payloads(store) == [] and store.info().stale_vectors == 0


def test_single_adds_refresh_before_they_return(clock: ManualClock) -> None:
    with open_store(RecordingEmbedder(), clock) as store:
        first = store.add(BASE)
        for text in VARIANTS:
            assert store.add(text).status == "folded"
            note = store.get(first.id)
            assert embeds_current_text(store, note) and not note.vector_stale


def test_a_failed_refresh_keeps_the_note_says_so_and_the_next_write_repairs(
        clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    # call 1 embeds BASE, call 2 the variant, call 3 the folded note's own re-embedding, and
    # call 4 the add's refresh, which tries it again
    with open_store(FailingEmbedder(fail_on={3, 4}), clock) as store:
        first = store.add(BASE)
        with caplog.at_level(logging.WARNING, logger="amem.write"):
            folded = store.add(VARIANTS[0])
        assert folded.status == "folded"
        assert any("keep their previous vector" in w and "EncoderDied" in w
                   for w in folded.warnings), folded.warnings
        assert "re-embedding failed" in caplog.text
        note = store.get(first.id)
        assert VARIANTS[0] in note.content  # the fold itself is saved, nothing lost
        assert note.vector_stale and stale_payloads(store) == [first.id]
        assert store.info().stale_vectors == 1
        assert not embeds_current_text(store, note)  # still BASE's vector, as the mark says
        # the folded text is already recognised as a duplicate
        assert store.add(VARIANTS[0]).status == "deduplicated"
        # the next write re-embeds it first
        with caplog.at_level(logging.WARNING, logger="amem.write"):
            store.add("Bob rides a blue bicycle to the office")
        assert "re-embedded 1 notes" in caplog.text
        note = store.get(first.id)
        assert not note.vector_stale and embeds_current_text(store, note)
        assert store.info().stale_vectors == 0


def test_consolidation_re_embeds_stale_vectors_first_and_reports_it(clock: ManualClock) -> None:
    with open_store(FailingEmbedder(fail_on={3, 4}), clock) as store:
        first = store.add(BASE)
        store.add(VARIANTS[0])
        assert store.info().stale_vectors == 1
        report = store.consolidate()
        assert report.vectors_refreshed == 1 and report.to_dict()["vectors_refreshed"] == 1
        assert embeds_current_text(store, store.get(first.id))
        assert store.consolidate().vectors_refreshed == 0


def test_export_keeps_the_mark_and_the_importing_store_repairs_it(clock: ManualClock) -> None:
    import io

    with open_store(FailingEmbedder(fail_on={3, 4}), clock) as source:
        first = source.add(BASE)
        source.add(VARIANTS[0])
        buffer = io.StringIO()
        export_store(source, buffer)
    with open_store(RecordingEmbedder(), clock) as target:
        import_export(target, io.StringIO(buffer.getvalue()))
        assert target.info().stale_vectors == 1  # the reused vector is still BASE's
        target.add("Bob rides a blue bicycle to the office")
        assert target.info().stale_vectors == 0
        assert embeds_current_text(target, target.get(first.id))


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from amem import MemoryStore, load_config
    from amem.embed.hashing import HashingEmbedder
    from amem.importer import import_file

    class DiesAtCall(HashingEmbedder):
        # SIGKILL inside passage call number `at` (0: never): a real kill, mid-batch
        def __init__(self, at):
            super().__init__(dim=256)
            self.at, self.count = at, 0
        def embed(self, texts, kind="passage"):
            if kind == "passage":
                self.count += 1
                if self.count == self.at:
                    os.kill(os.getpid(), signal.SIGKILL)
            return super().embed(texts, kind=kind)

    store_path, src, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = load_config(overrides={"fold_threshold": 0.8, "pending_threshold": 0.6})
    with MemoryStore(store_path, config=config, embedder=DiesAtCall(at)) as store:
        report = import_file(store, src, enrich=True, batch=4)
        print("DONE", report.created, report.folded, report.deduplicated, store.count(),
              flush=True)
""")


def test_import_killed_between_a_fold_and_its_refresh_is_repaired_by_the_rerun(
        tmp_path: Path, clock: ManualClock) -> None:
    rows = [BASE, *VARIANTS, "Alice prefers green tea over coffee",
            "Bob rides a blue bicycle to the office", "Carol plays board games on Fridays"]
    src = tmp_path / "notes.jsonl"
    src.write_text("".join(f'{{"text": "{text}"}}\n' for text in rows), encoding="utf-8")
    script = tmp_path / "run_import.py"
    script.write_text(KILL_SCRIPT)
    store_path = tmp_path / "store"
    # batch 1 = BASE and the three variants: the first folds into BASE, whose vector waits for
    # the import's final refresh; the kill comes inside call 2, where the second variant's fold
    # decision embeds BASE's folded content (amem.nearduplicate)
    killed = subprocess.run([sys.executable, str(script), str(store_path), str(src), "2"],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with open_store(HashingEmbedder(dim=256), clock, store_path) as store:
        assert store.count() == 1  # the folded note, with the first variant in it
        assert store.info().stale_vectors == 1 and len(stale_payloads(store)) == 1
    rerun = subprocess.run([sys.executable, str(script), str(store_path), str(src), "0"],
                           capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert "re-embedded 1 notes" in rerun.stderr
    done = rerun.stdout.split()
    assert done[0] == "DONE" and int(done[4]) == 4  # the folded note and the three others
    with open_store(HashingEmbedder(dim=256), clock, store_path) as store:
        notes = [n for n, _ in store.iter_notes()]
        assert len(notes) == 4 and store.info().stale_vectors == 0
        assert all(embeds_current_text(store, n) for n in notes)


OTHERS = ["Alice prefers green tea over coffee", "Bob rides a blue bicycle to the office",
          "Carol plays board games on Fridays"]


#: a context the caller gives: embedded with the content, so such a note's vector is deferred
CONTEXT = "How a release reaches production"


def interleaved(tmp_path: Path, *, context: bool = False) -> Path:
    """Batches of two: BASE with an unrelated note, then each variant with one.

    With ``context``, BASE carries a given context: its vector embeds more than its content,
    so after each fold it waits for the deferred refresh instead of being re-embedded at once.
    """
    rows = [BASE, OTHERS[0], VARIANTS[0], OTHERS[1], VARIANTS[1], OTHERS[2], VARIANTS[2]]
    items = [{"text": t, **({"context": CONTEXT} if context and t == BASE else {})} for t in rows]
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


@pytest.mark.parametrize("every", [1024, 0])
def test_an_import_embeds_a_note_folded_in_many_batches_once(
        tmp_path: Path, clock: ManualClock, every: int) -> None:
    recorder = RecordingEmbedder()
    with open_store(recorder, clock, import_reembed_every=every) as store:
        report = import_file(store, interleaved(tmp_path), batch=2)
        assert (report.created, report.folded, report.warnings) == (4, 3, [])
        note = next(n for n, _ in store.iter_notes() if n.content.startswith(BASE))
        versions = [t for t in recorder.passages if t.startswith(BASE)]
        # Each version of the growing note is embedded once: the fold decisions read the
        # current content whenever the refresh runs (with 1024, the decision's embedding is
        # the stored vector too), so both settings embed the same texts and fold the same way.
        assert len(versions) == len(set(versions)) == 4 and versions[-1] == note.embed_text()
        assert embeds_current_text(store, note) and store.info().stale_vectors == 0


def test_an_import_refreshes_when_enough_notes_wait(tmp_path: Path, clock: ManualClock) -> None:
    recorder = RecordingEmbedder()
    with open_store(recorder, clock, import_reembed_every=1) as store:
        import_file(store, interleaved(tmp_path), batch=2)
        # one note waits after each folding batch: refreshed at once, as with 0
        assert len([t for t in recorder.passages if t.startswith(BASE)]) == 4


def test_an_interrupted_import_block_leaves_marks_the_next_write_repairs(
        clock: ManualClock) -> None:
    with open_store(RecordingEmbedder(), clock) as store:
        with pytest.raises(KeyboardInterrupt):
            with store.writer.deferred_reembed():
                # a given context is embedded with the content, so BASE's vector waits
                store.add_many([{"text": BASE, "context": CONTEXT}, {"text": VARIANTS[0]}])
                assert store.info().stale_vectors == 1
                raise KeyboardInterrupt
        assert store.info().stale_vectors == 1  # Ctrl-C does not wait for the refresh
        store.add(OTHERS[0])
        assert store.info().stale_vectors == 0
        assert all(embeds_current_text(store, n) for n, _ in store.iter_notes())


def test_a_failed_final_refresh_is_in_the_import_report(tmp_path: Path, clock: ManualClock) -> None:
    recorder = RecordingEmbedder()
    with open_store(recorder, clock) as store:
        import_file(store, interleaved(tmp_path, context=True), batch=2)
        note = next(n for n, _ in store.iter_notes() if n.content.startswith(BASE))
        assert recorder.calls[-1] == [note.embed_text()]  # the last call: the final refresh
    with open_store(FailingEmbedder(fail_on={len(recorder.calls)}), clock) as store:
        report = import_file(store, interleaved(tmp_path, context=True), batch=2)
        assert report.folded == 3 and len(report.warnings) == 1
        assert "re-embedding failed" in report.warnings[0]
        assert report.to_dict()["warnings"] == report.warnings
        assert store.info().stale_vectors == 1


def test_a_write_re_embeds_at_most_a_bounded_chunk_of_stale_notes(
        clock: ManualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Thousands of marks (an upgrade at open marks every note whose subjects add words) must
    not hold one add for minutes: each write takes ``REPAIR_LIMIT``, the nightly job the rest."""
    from amem.refresh import FIELD, REPAIR_LIMIT

    words = ["alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "iris"]
    texts = [f"{words[n % 9]} {words[n // 9 % 9]} {words[n // 81 % 9]} record {n}"
             for n in range(2 * REPAIR_LIMIT + 10)]
    distinct = {"fold_threshold": 0.9999, "pending_threshold": 0.9999}
    with open_store(HashingEmbedder(64), clock, tmp_path / "s", **distinct) as store:
        ids = [r.id for r in store.add_many([{"text": t} for t in texts])]
        assert len(set(ids)) == len(texts)
        for nid in ids:
            store.index.backend.set_payload(point_id("default", nid), {FIELD: True})
    # a new process: its first write repairs, a chunk at a time
    with open_store(HashingEmbedder(64), clock, tmp_path / "s", **distinct) as store:
        assert store.info().stale_vectors == len(ids)
        with caplog.at_level(logging.WARNING, logger="amem.write"):
            store.add("Bob rides a blue bicycle to the office")
        assert f"re-embedded {REPAIR_LIMIT} notes" in caplog.text
        # the add's own links may re-embed a few more of them (an evolution refreshes)
        left = store.info().stale_vectors
        assert len(ids) - REPAIR_LIMIT - 10 <= left <= len(ids) - REPAIR_LIMIT
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="amem.write"):
            store.add("Alice walks to the office on Fridays")
        assert f"re-embedded {REPAIR_LIMIT} notes" in caplog.text
        left = store.info().stale_vectors
        assert 0 < left <= 10  # more than a chunk waited: some are left for the nightly job
        assert store.consolidate().vectors_refreshed == left  # which takes the rest at once
        assert store.info().stale_vectors == 0 and not stale_payloads(store)
