"""Issue 24, items 2 and 3: marks that heal, and a hidden fact a person can see and undo."""

from __future__ import annotations

from amem import MemoryStore
from amem.supersede import audit

COFFEE = "Alice drinks coffee every morning"
TEA = "Alice stopped coffee, she drinks tea now"
QUERY = "Alice coffee morning"


def _pair(store: MemoryStore) -> tuple[str, str]:
    old = store.add(COFFEE, ["Alice"], timestamp="2026-01-01").id
    new = store.add(TEA, ["Alice"], timestamp="2026-01-05")
    assert new.supersedes == [old]
    return old, new.id


def _shown(store: MemoryStore, note_id: str) -> bool:
    return note_id in [r.id for r in store.search(QUERY, limit=5, expand_links=False)]


def _kinds(store: MemoryStore) -> list[str]:
    return sorted(p.kind for p in audit(store.index))


def test_a_result_names_what_it_hid(store: MemoryStore) -> None:
    old, new = _pair(store)
    hit = next(r for r in store.search(QUERY, limit=5) if r.id == new)
    assert hit.hidden == [old] and not _shown(store, old)


def test_history_shows_the_chain_and_unsupersede_keeps_the_fact(store: MemoryStore) -> None:
    old, new = _pair(store)
    chain = store.history(old)
    assert [n["id"] for n in chain] == [old, new]
    assert chain[0]["superseded_by"] == new and chain[1]["supersedes"] == [old]
    assert chain[0]["events"][-1]["action"] == "superseded"
    assert store.unsupersede(old) == {"id": old, "was_superseded_by": new, "restored": True}
    assert _shown(store, old) and store.get(new).supersedes == []
    # remembered: neither the nightly sweep nor an edit of the newer note hides it again
    store.consolidate()
    store.update(new, content=TEA + ".")
    assert store.get(old).superseded_by is None and store.get(old).kept_against == [new]
    assert [n["id"] for n in store.history(old)] == [old, new]  # the pair stays in the chain


def test_notes_told_in_one_second_stand_in_the_order_they_replaced(store: MemoryStore) -> None:
    """Times are kept to the second: a chain of notes written in one second is ordered by what
    replaced what, not by the ids (which here sort the other way)."""
    old = store.add(COFFEE, ["Alice"], timestamp="2026-01-01", id="z-coffee").id
    new = store.add(TEA, ["Alice"], timestamp="2026-01-01", id="a-tea")
    assert new.supersedes == [old]
    assert [n["id"] for n in store.history(old)] == [old, new.id]
    store.unsupersede(old)  # kept against the newer note: still its predecessor
    assert [n["id"] for n in store.history(old)] == [old, new.id]


def test_unsupersede_of_a_current_note_says_so(store: MemoryStore) -> None:
    import pytest

    from amem.errors import NotFoundError, ValidationError

    old, _ = _pair(store)
    store.unsupersede(old)
    with pytest.raises(ValidationError, match="not superseded"):
        store.unsupersede(old)
    with pytest.raises(NotFoundError):
        store.unsupersede("no-such-note")


def test_a_deleted_successor_still_listing_releases_at_once(store: MemoryStore) -> None:
    """The state a delete killed between its writes left before issue 24 (deactivated, the
    older note still marked): search shows the older fact at once, doctor finds it."""
    old, new = _pair(store)
    store.index.update_payload(new, store.agent_id, {"is_active": False})
    assert _shown(store, old)
    assert _kinds(store) == ["successor_deleted"]


def test_audit_finds_every_unsound_mark_and_heal_repairs_them(store: MemoryStore) -> None:
    agent = store.agent_id
    old, new = _pair(store)
    # an orphan mark: the newer note does not list it (an add killed between its writes)
    orphan = store.add("Alice works at a bakery downtown", ["Alice"]).id
    store.index.update_payload(orphan, agent, {"superseded_by": new})
    # a mark naming a note that does not exist
    ghost = store.add("Alice plays the cello on Fridays", ["Alice"]).id
    store.index.update_payload(ghost, agent, {"superseded_by": "no-such-note"})
    # an entry nothing backs: the newer note lists a note it does not hide
    free = store.add("Alice keeps bees on the roof", ["Alice"]).id
    store.index.update_payload(new, agent, {"supersedes": [old, free]})
    assert _kinds(store) == ["orphan_mark", "successor_missing", "unbacked_entry"]
    freed = store.superseder.heal(store.superseder.audit())
    assert sorted(freed) == sorted([orphan, ghost])
    assert _kinds(store) == [] and store.get(new).supersedes == [old]
    assert store.get(old).superseded_by == new  # a sound mark is left alone


def test_an_edited_successor_is_judged_again_by_heal(store: MemoryStore) -> None:
    """The state an edit killed after its rewrite left before issue 24: the newer note's text
    changed, its mark stayed. Heal asks the judge again and releases on a no."""
    old, new = _pair(store)
    store.clock.advance(60)  # type: ignore[attr-defined]
    note = store.get(new)
    history = [*note.evolution_history, {"action": "update", "at": "2026-02-01T00:00:00+00:00",
                                         "old_content": TEA}]
    store.index.update_payload(new, store.agent_id, {"content": "Alice likes hiking in the Alps",
                                                     "evolution_history": history})
    assert _kinds(store) == ["edited_since"]
    assert store.superseder.heal(store.superseder.audit()) == [old]
    assert _shown(store, old)


def test_the_nightly_job_and_doctor_repair_marks(store: MemoryStore) -> None:
    from tools.reports import doctor_report

    old, new = _pair(store)
    bakery = store.add("Alice works at a bakery downtown", ["Alice"]).id
    store.index.update_payload(bakery, store.agent_id, {"superseded_by": new})  # orphan mark
    assert bakery not in [r.id for r in store.search("Alice bakery", limit=5)]
    report = doctor_report(store, lambda _: {"ok": True}, {}, clean=False)
    assert not report["ok"] and report["memory"]["supersession"]["hiding_a_fact"] == 1
    assert any("doctor --fix" in w for w in report["warnings"])
    assert store.consolidate().marks_released == 1  # the nightly job heals first
    assert bakery in [r.id for r in store.search("Alice bakery", limit=5)]
    assert store.get(old).superseded_by == new  # the sound mark stays
    assert doctor_report(store, lambda _: {"ok": True}, {}, clean=False)["ok"]
    # and `amem doctor --fix` does the same
    store.index.update_payload(bakery, store.agent_id, {"superseded_by": new})
    fixed = doctor_report(store, lambda _: {"ok": True}, {}, clean=False, fix=True)
    assert fixed["ok"] and fixed["memory"]["supersession"]["released"] == [bakery]


def test_the_nightly_job_record_counts_the_marks_it_released(store: MemoryStore) -> None:
    from scheduler.job import _summary

    _, new = _pair(store)
    bakery = store.add("Alice works at a bakery downtown", ["Alice"]).id
    store.index.update_payload(bakery, store.agent_id, {"superseded_by": new})
    assert _summary(store.consolidate(all_agents=True))["marks_released"] == 1
