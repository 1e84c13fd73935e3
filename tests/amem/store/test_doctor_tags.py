"""``amem doctor`` finds the tags an older amem wrote that this one refuses or keeps once,
and ``amem doctor --fix`` tidies them (``amem.tagtidy``)."""

from __future__ import annotations

import numpy as np

from amem import MemoryStore
from tools.cli.notes import _join_lines
from tools.reports import doctor_report


def _doctor(store: MemoryStore, fix: bool = False) -> dict[str, object]:
    return doctor_report(store, lambda _: {"ok": True}, {}, clean=False, fix=fix)


def test_doctor_finds_untidy_tags_and_fix_keeps_each_tag_once(edge_store: MemoryStore) -> None:
    store = edge_store
    tidy = store.add("Alice walks her dog every morning", tags=["#Dogs", "walks"]).id
    old = store.add("Bob swims before work", tags=["sport"]).id
    # what a version before the '#' check and the tag keys wrote, as it wrote it
    store.index.update_payload(old, store.agent_id, {"tags": ["#", "Morning", "sport",
                                                              "#morning"]})
    report = _doctor(store)
    memory = report["memory"]
    assert isinstance(memory, dict)
    assert memory["untidy_tags"] == 1 and memory["untidy_tags_examples"] == [
        f"{store.agent_id}/{old}: #, Morning, sport, #morning"]
    (said,) = [w for w in report["warnings"] if "tags" in w]  # type: ignore[attr-defined]
    assert "1 notes" in said and old in said and "amem doctor --fix" in said
    assert report["ok"]  # nothing is lost: a warning
    fixed = _doctor(store, fix=True)
    assert fixed["memory"]["tags_tidied"] == 1  # type: ignore[index]
    note = store.get(old)
    assert note.tags == ["Morning", "sport"]
    assert store.get(tidy).tags == ["#Dogs", "walks"]  # a lone '#'-spelled tag is a tag
    entry = note.evolution_history[-1]
    assert (entry["action"], entry["old_tags"], entry["new_tags"]) == (
        "tags_tidied", ["#", "Morning", "sport", "#morning"], ["Morning", "sport"])
    # `amem history` says what the fix replaced
    events = store.history(old)[0]["events"]
    assert "tags tidied by `amem doctor --fix`: were #, Morning, sport, #morning" in (
        _join_lines(events)[-1])
    # the keys and the vector follow the tags: found by tag, embedded as stored now
    assert [r.id for r in store.search("swims", tags=["MORNING"])] == [old]
    _, vector = store.index.load(old, store.agent_id, with_vector=True)
    want = store.index.embed_passages([note.embed_text()])[0]
    assert not note.vector_stale and np.allclose(np.asarray(vector), want, atol=1e-5)
    again = _doctor(store)
    assert again["memory"]["untidy_tags"] == 0  # type: ignore[index]
    assert not [w for w in again["warnings"] if "tags" in w]  # type: ignore[attr-defined]
