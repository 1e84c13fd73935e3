"""consolidate(): grouping, pairs, merge contents, link cascade, pending, idempotence, report."""

from __future__ import annotations

import pytest

from amem import MemoryStore
from amem.consolidate import ConsolidationReport, consolidate
from amem.errors import NotFoundError

from .conftest import angle_vector, link_problems, put, state


def seed_pair(store: MemoryStore) -> None:
    put(store, "tea1", "Alice drinks green tea every morning before work",
        vector=angle_vector(0), category="Personal", keywords=["tea"], tags=["habit"],
        subjects=["alice"], retrieval_count=3, links=["x"])
    put(store, "tea2", "Alice drinks green tea in the morning",
        vector=angle_vector(20), category="Personal", keywords=["green tea", "morning"],
        tags=["drink"], subjects=["alice", "morning"], retrieval_count=2, links=["y", "tea1"])
    put(store, "x", "Deploys run on GitHub Actions", vector=angle_vector(0, axis=2),
        category="Technical", links=["tea1"])
    put(store, "y", "Quarterly revenue grew by twelve percent", vector=angle_vector(0, axis=4),
        category="Business", links=["tea2"])


def test_duplicate_pair_merges_into_the_more_informative_note(store: MemoryStore) -> None:
    seed_pair(store)
    report = store.consolidate()
    assert isinstance(report, ConsolidationReport)
    assert (report.pairs, report.merges) == (1, 1)
    survivor = store.get("tea1")
    assert survivor.content == "Alice drinks green tea every morning before work"
    assert survivor.keywords == ["tea", "green tea", "morning"]
    assert survivor.tags == ["habit", "drink"]
    assert survivor.subjects == ["alice", "morning"]
    assert survivor.retrieval_count == 5
    assert survivor.links == ["x", "y"]
    entry = survivor.evolution_history[-1]
    assert entry["action"] == "consolidate_merge" and entry["merged"] == "tea2"
    assert entry["merged_text"] == "Alice drinks green tea in the morning"
    assert entry["merged_by"] == "offline" and entry["similarity"] == pytest.approx(0.9397, abs=1e-3)
    loser = store.get("tea2", include_inactive=True)
    assert (loser.is_active, loser.merged_into) == (False, "tea1")
    assert loser.content == "Alice drinks green tea in the morning"  # kept word for word
    assert store.get("tea2", include_inactive=True).evolution_history[-1]["survivor"] == "tea1"
    with pytest.raises(NotFoundError, match="merged into 'tea1'"):
        store.get("tea2")
    # the link y -> tea2 was cascaded to the survivor
    assert store.get("y").links == ["tea1"]
    assert link_problems(store) == []
    assert report.links_rewritten >= 1


def test_exact_dedup_of_the_loser_text_finds_the_survivor(edge_store: MemoryStore) -> None:
    seed_pair(edge_store)
    edge_store.consolidate()
    survivor = edge_store.get("tea1")
    loser = edge_store.get("tea2", include_inactive=True)
    assert loser.hash in survivor.folded_hashes


def test_second_run_changes_nothing(store: MemoryStore) -> None:
    seed_pair(store)
    put(store, "p", "Bob likes chess", vector=angle_vector(0, axis=6), pending_merge=True)
    store.consolidate()
    before = state(store)
    again = store.consolidate()
    assert (again.pairs, again.merges, again.links_rewritten, again.pending_resolved) == (0, 0, 0, 0)
    assert state(store) == before


def test_second_run_writes_nothing(table: object, clock: object) -> None:
    from .conftest import open_store

    with open_store("edge", table, clock, flaky=True) as s:
        seed_pair(s)
        s.consolidate()
        s.index.backend.arm(0)  # any write now raises
        report = s.consolidate()
        assert report.merges == 0 and s.index.backend.writes == 0


def test_categories_and_note_types_are_separate_groups(store: MemoryStore) -> None:
    put(store, "m1", "The office wifi password rotates monthly", vector=angle_vector(0),
        category="Technical")
    put(store, "m2", "Office wifi password changes every month", vector=angle_vector(5),
        category="Project")
    put(store, "k1", "Wifi passwords should rotate monthly", vector=angle_vector(3),
        category="Technical", note_type="knowledge")
    put(store, "k2", "Rotate wifi passwords every month", vector=angle_vector(8),
        category="Technical", note_type="knowledge")
    report = store.consolidate()
    assert report.groups == 3  # (memory, Technical), (memory, Project), (knowledge, Technical)
    assert report.merges == 1  # only the two knowledge notes
    merged = [n for n, _ in store.iter_notes(include_inactive=True) if not n.is_active]
    assert [(n.note_type, n.merged_into) for n in merged] in (
        [("knowledge", "k1")], [("knowledge", "k2")])
    assert store.get("m1").is_active and store.get("m2").is_active


def test_knowledge_merge_unions_topics(store: MemoryStore) -> None:
    put(store, "k1", "HNSW graphs trade memory for recall", vector=angle_vector(0),
        note_type="knowledge", topics=["ann"])
    put(store, "k2", "HNSW trades memory for recall", vector=angle_vector(5),
        note_type="knowledge", topics=["vector-search"])
    store.consolidate()
    assert store.get("k1").topics == ["ann", "vector-search"]


def test_notes_below_the_threshold_stay_apart(store: MemoryStore) -> None:
    put(store, "a", "Alpha note about lunch", vector=angle_vector(0))
    put(store, "b", "Beta note about lunch", vector=angle_vector(42))  # cosine 0.743
    report = store.consolidate()
    assert report.merges == 0 and report.pairs == 0


def test_agents_are_consolidated_separately(store: MemoryStore) -> None:
    for agent in ("ann", "bob"):
        put(store, "n1", "Standup is at nine", vector=angle_vector(0), agent=agent)
        put(store, "n2", "The standup is at nine", vector=angle_vector(10), agent=agent)
    only_ann = store.consolidate(agent_id="ann")
    assert list(only_ann.agents) == ["ann"] and only_ann.merges == 1
    assert store.count(agent_id="bob") == 2
    everyone = store.consolidate(all_agents=True)
    assert sorted(everyone.agents) == ["ann", "bob"]
    assert everyone.agents["bob"].merges == 1 and everyone.agents["ann"].merges == 0
    assert store.count(agent_id="ann") == store.count(agent_id="bob") == 1


def test_a_cluster_of_three_merges_into_one_and_cascades_every_link(store: MemoryStore) -> None:
    put(store, "c1", "Server room temperature alarm at thirty degrees celsius",
        vector=angle_vector(0), links=["c2", "o"])
    put(store, "c2", "Server room alarm at thirty degrees", vector=angle_vector(8), links=["c1"])
    put(store, "c3", "Alarm at thirty degrees", vector=angle_vector(16), links=["o"])
    put(store, "o", "Unrelated note", vector=angle_vector(0, axis=3), links=["c2", "c3", "c1"])
    report = store.consolidate()
    assert report.merges == 2 and report.agents["default"].merged == [("c2", "c1"), ("c3", "c1")]
    assert store.get("o").links == ["c1"]
    assert store.get("c1").links == ["o"]
    assert link_problems(store) == []


def test_pending_note_merges_into_a_near_duplicate_of_another_category(store: MemoryStore) -> None:
    put(store, "old", "Carol moved to Lisbon in 2024 for a new job", vector=angle_vector(0),
        category="Personal")
    put(store, "new", "Carol moved to Lisbon", vector=angle_vector(25), category="General",
        pending_merge=True)
    put(store, "lonely", "Dave collects stamps", vector=angle_vector(0, axis=5),
        pending_merge=True)
    report = store.consolidate()
    assert report.pending_resolved == 2
    assert store.get("new", include_inactive=True).merged_into == "old"
    assert store.get("lonely").pending_merge is False
    assert store.get("old").pending_merge is False


def test_resolves_links_left_dangling_by_a_deleted_or_merged_note(store: MemoryStore) -> None:
    put(store, "a", "Note a", vector=angle_vector(0), links=["gone", "b", "m"])
    put(store, "b", "Note b", vector=angle_vector(0, axis=2), links=["a"])
    put(store, "m", "Note m", vector=angle_vector(0, axis=4), is_active=False, merged_into="b")
    put(store, "d", "Note d", vector=angle_vector(0, axis=6), links=["a"])
    store.delete("d")
    put(store, "c", "Note c", vector=angle_vector(0, axis=8), links=["d", "c"])
    report = store.consolidate()
    assert store.get("a").links == ["b"]
    assert store.get("c").links == []
    assert report.links_rewritten == 2 and link_problems(store) == []


def test_progress_is_reported_per_stage(store: MemoryStore) -> None:
    seed_pair(store)
    seen: list[tuple[str, int, int]] = []
    store.consolidate(progress=lambda stage, done, total: seen.append((stage, done, total)))
    stages = {s for s, _, _ in seen}
    assert {"pairs", "merge"} <= stages
    assert ("merge", 1, 1) in seen and ("pairs", 4, 4) in seen


def test_report_to_dict_has_totals_and_per_agent(store: MemoryStore) -> None:
    seed_pair(store)
    data = store.consolidate().to_dict()
    for key in ("groups", "pairs", "merges", "links_rewritten", "pending_resolved", "duration"):
        assert key in data
    assert data["per_agent"]["default"]["merges"] == 1
    assert "merged" not in data["per_agent"]["default"]


def test_bad_threshold_is_refused(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="threshold"):
        consolidate(store.index, threshold=1.5)


def test_index_first_builds_the_engine_index(edge_store: MemoryStore) -> None:
    seed_pair(edge_store)
    report = consolidate(edge_store.index, index_first=True)
    assert report.indexed_first and report.merges == 1


def test_a_pair_refused_for_a_cluster_member_is_merged_in_the_same_run(store: MemoryStore) -> None:
    # b~a and d~c are tight; a~c is 0.8 but d is too far from a, so the union of the two
    # clusters is refused in the first pass; once b and d are merged away, a and c are a
    # plain pair. A second run must not find it: the first run does, in its second pass.
    put(store, "a", "Gina's bakery on Elm Street opens at six every weekday morning",
        vector=angle_vector(0))
    put(store, "b", "Gina's bakery opens at six", vector=angle_vector(-18))
    put(store, "c", "The Elm Street bakery of Gina opens early on weekdays", vector=angle_vector(37))
    put(store, "d", "Bakery opens early", vector=angle_vector(55))
    first = store.consolidate()
    assert first.merges == 3
    assert [n.id for n, _ in store.iter_notes()] == ["a"]
    assert store.consolidate().merges == 0
