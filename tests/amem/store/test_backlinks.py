"""Links are written both ways, and a write killed between the two halves is finished later:
the note owes its back-links (``links_owed``) until the next write, the nightly job or
``amem doctor --fix`` writes them (``amem.backlinks``; findings F1)."""

from __future__ import annotations

from typing import Any

from amem import MemoryStore, load_config
from amem.backends import EdgeBackend
from amem.backlinks import OWED, OWED_FIELD, count_owed, mend_links, one_way, settle
from amem.consolidate.graph import LinkGraph
from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.notes import point_id
from tests.fakes.backends import FlakyBackend, InjectedCrash
from tests.fakes.llms import enrich_and_link_all

UNRELATED = ["My car brakes squeak when it rains", "Ubuntu 24.04 upgrade broke the wifi driver",
             "Mum's birthday is on the 14th of May"]
NEW = "Sam notes: " + "; ".join(t.lower() for t in UNRELATED)


class LinkingLLM:
    """The LLM seam linking every candidate it is offered and evolving none."""

    model = "linking"

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        raise AssertionError("the write path asks for JSON")

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        canned = enrich_and_link_all(name, user)
        if canned is not None:
            return canned
        if name == "supersede_verdicts":
            return {"verdicts": []}
        return {"updates": []}


def linking_store(clock: ManualClock, backend: Any = None) -> MemoryStore:
    return MemoryStore(config=load_config(overrides={"evolve_max": 0}),
                       embedder=HashingEmbedder(256), clock=clock,
                       backend=backend or EdgeBackend.temporary(256), llm=LinkingLLM())


def live_links(store: MemoryStore) -> dict[tuple[str, str], list[str]]:
    return {(n.agent_id, n.id): list(n.links) for n, _ in store.iter_notes(all_agents=True)}


def owed(store: MemoryStore) -> set[str]:
    return {str(hit.payload["id"]) for hit in store.index.backend.iterate(OWED)}


def _pid(store: MemoryStore, note_id: str) -> str:
    return point_id(store.agent_id, note_id)


def test_an_add_killed_at_any_write_owes_its_back_links_and_the_next_add_writes_them(
        clock: ManualClock) -> None:
    seen_one_way = 0
    # 0: killed before the note (no link at all, test_write_hardening); 1-3: after the note,
    # between its back-links; 4: before the mark is cleared
    for fail_at in range(1, 5):
        backend = FlakyBackend(EdgeBackend.temporary(256))
        with linking_store(clock, backend) as store:
            for n, text in enumerate(UNRELATED):
                store.add(text, id=f"t{n}")
            backend.arm(fail_at)
            try:
                store.add(NEW, id="new")
            except InjectedCrash:
                pass
            backend.arm(None)
            halves = one_way(live_links(store))
            seen_one_way += bool(halves)
            # a one-way link is never silent: its source says it owes the other half
            assert {src for _, src, _ in halves} <= owed(store), (fail_at, halves)
            store.add("Dana is allergic to peanuts")  # the next write settles what is owed
            assert one_way(live_links(store)) == [], fail_at
            assert count_owed(store.index) == 0, fail_at
    assert seen_one_way == 3  # the kills between the note and its last back-link


def test_a_clean_add_leaves_no_mark(clock: ManualClock) -> None:
    with linking_store(clock) as store:
        for n, text in enumerate(UNRELATED):
            store.add(text, id=f"t{n}")
        assert store.add(NEW, id="new").links
        assert count_owed(store.index) == 0 and one_way(live_links(store)) == []


def test_an_edit_killed_before_it_drops_a_back_link_is_finished_by_settling(
        clock: ManualClock) -> None:
    backend = FlakyBackend(EdgeBackend.temporary(256))
    with linking_store(clock, backend) as store:
        store.add(UNRELATED[0], id="a")
        store.add("My car brakes squeak in the rain, said the mechanic", id="b")
        assert "a" in store.get("b").links and "b" in store.get("a").links
        # the note's write (links changed) and its stale mark's, then killed before the rest
        store.index.update_note_fields("b", store.agent_id, {"links": [], OWED_FIELD: True})
        assert one_way(live_links(store)) == [("default", "a", "b")]
        assert settle(store.index) == 1
        # the note's own list is the truth: the edit dropped the link, so its other half goes
        assert store.get("a").links == [] and count_owed(store.index) == 0


def test_a_note_owing_a_link_to_a_note_deleted_since_writes_nothing_onto_it(
        clock: ManualClock) -> None:
    """A link to a note that no longer exists: no back-link is written onto the deleted note
    (nothing revives or edits it); the forward link stays an ordinary link to a deleted note,
    which readers skip and the nightly repair drops."""
    with linking_store(clock) as store:
        store.add(UNRELATED[0], id="a")
        store.add(UNRELATED[1], id="gone")
        store.add(UNRELATED[2], id="n")
        agent = store.agent_id
        for nid in ("a", "gone", "n"):
            store.index.update_note_fields(nid, agent, {"links": []})
        store.index.update_note_fields("n", agent, {"links": ["a", "gone", "never"],
                                                    OWED_FIELD: True})
        store.delete("gone")
        assert settle(store.index) == 1
        assert store.get("a").links == ["n"]
        assert store.get("gone", include_inactive=True).links == []
        assert store.get("gone", include_inactive=True).is_active is False
        assert count_owed(store.index) == 0
        assert store.get("n").links == ["a"]  # what a reader sees: live links only
        report = store.consolidate()
        assert report.to_dict()["links_completed"] == 0
        stored = store.index.backend.retrieve([_pid(store, "n")])[0].payload["links"]
        assert stored == ["a"]  # the nightly repair dropped the links to missing notes


def test_one_way_links_of_an_old_store_are_completed_by_the_nightly_job_and_doctor_fix(
        clock: ManualClock) -> None:
    """No mark (a store written before it): the link was decided, the kill lost its second
    half, so the missing half is written rather than the link dropped."""
    with linking_store(clock) as store:
        for n, text in enumerate(UNRELATED):
            store.add(text, id=f"t{n}")
        store.add(NEW, id="new")
        agent = store.agent_id
        for target in ("t0", "t1"):
            links = [x for x in store.get(target).links if x != "new"]
            store.index.update_note_fields(target, agent, {"links": links})
        assert len(one_way(live_links(store))) == 2
        report = store.consolidate()
        assert report.to_dict()["links_completed"] == 2
        assert one_way(live_links(store)) == []
        store.index.update_note_fields("t2", agent, {"links": []})
        halves = one_way(live_links(store))
        assert halves and mend_links(store.index) == (0, len(halves))
        assert one_way(live_links(store)) == []


def test_one_way_is_pure_and_ignores_links_to_missing_notes() -> None:
    links = {("x", "a"): ["b", "c", "gone"], ("x", "b"): ["a"], ("x", "c"): [],
             ("y", "a"): ["b"]}
    assert one_way(links) == [("x", "a", "c")]  # y's b is not a note of y: dangling


def test_the_link_graph_completes_one_way_links_and_leaves_missing_targets() -> None:
    graph = LinkGraph.from_links({"a": ["b", "c", "zz"], "b": [], "c": ["a"]})
    assert graph.complete() == {"b": ["a"]}
    assert graph.links("b") == ["a"] and graph.links("a") == ["b", "c", "zz"]
    assert graph.complete() == {}


class BrakesLLM(LinkingLLM):
    """Links only the candidates that speak of brakes."""

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        if name == "link_decisions":
            blocks = user.split("<candidate ")[1:]
            return {"links": [{"candidate": n, "link": "brakes" in block.lower()}
                              for n, block in enumerate(blocks, start=1)]}
        return super().complete_json(system, user, schema=schema, name=name)


def test_an_edit_of_a_note_owing_back_links_writes_them_before_its_own(clock: ManualClock) -> None:
    """``amem update`` of a note a killed write left owing: the edit wrote the back-links of the
    links it changed and cleared the mark, so a kept link that never got its other half stayed
    one-way with nothing to say so."""
    store = MemoryStore(config=load_config(overrides={"evolve_max": 0}), embedder=HashingEmbedder(256),
                        clock=clock, backend=EdgeBackend.temporary(256), llm=BrakesLLM())
    with store:
        for nid, text in (("a", "My car brakes squeak when it rains"),
                          ("x", "Ubuntu 24.04 upgrade broke the wifi driver"),
                          ("b", "The brakes and the wifi both need a look")):
            store.add(text, id=nid)
        agent = store.agent_id
        # b lists a and x; x got its back-link, the kill came before a's
        store.index.update_note_fields("b", agent, {"links": ["a", "x"], OWED_FIELD: True})
        store.index.update_note_fields("x", agent, {"links": ["b"]})
        store.index.update_note_fields("a", agent, {"links": []})
        assert one_way(live_links(store)) == [("default", "b", "a")]
        result = store.update("b", content="The brakes squeak again, the garage says")
        assert "a" in result.links and "x" not in result.links, result
        assert one_way(live_links(store)) == [] and count_owed(store.index) == 0
        assert "b" in store.get("a").links and "b" not in store.get("x").links
