"""``MemoryStore.update``: a note edited in place (issue 16, item 1)."""

from __future__ import annotations

import pytest

from amem import MemoryStore, load_config
from amem import bm25
from amem.backends import EdgeBackend
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import NotFoundError, ValidationError
from tests.fakes.backends import FlakyBackend, InjectedCrash

PROJECT = "The Falcon project ships the billing service to production every Friday"
RELATED = "Falcon billing service deploys need a database migration review first"
OTHER = "Maria volunteers at the homeless shelter on weekends"


def _terms_total(store: MemoryStore) -> int:
    """The BM25 token total recomputed from every stored point."""
    return sum(len(bm25.note_terms(n.content, n.keywords, n.tags))
               for n, _ in store.iter_notes(all_agents=True, include_inactive=True))


def test_new_text_is_searchable_the_old_is_not_and_history_keeps_it(store: MemoryStore) -> None:
    nid = store.add("Alice's favourite editor is Emacs", ["Alice"]).id
    result = store.update(nid, content="Alice's favourite editor is Helix, a modal editor")
    assert result.status == "updated" and result.changed == ["text"]
    note = store.get(nid)
    assert note.content.endswith("a modal editor") and "helix" in [k.lower() for k in note.keywords]
    assert note.evolution_history[-1]["old_content"] == "Alice's favourite editor is Emacs"
    assert note.vector_stale is False
    found = store.search("Helix", limit=3, expand_links=False)
    assert [r.id for r in found] == [nid]
    # BM25 terms replaced: the old word finds it by vector only, no longer by its terms
    assert [r.found_by for r in store.search("Emacs", limit=3, expand_links=False)] == ["dense"]
    # the old text is no longer this note's: adding it again makes a new note
    again = store.add("Alice's favourite editor is Emacs", ["Alice"])
    assert again.status != "deduplicated" and again.id != nid


def test_bm25_statistics_follow_the_edit(edge_store: MemoryStore) -> None:
    nid = edge_store.add(PROJECT).id
    edge_store.add(OTHER)
    before_docs = edge_store.index.stats.docs
    edge_store.update(nid, content=PROJECT + " and on the first Monday of every month, after "
                      "the release train review with the payments team")
    assert edge_store.index.stats.docs == before_docs
    assert edge_store.index.stats.tokens == _terms_total(edge_store)


def test_subjects_only(edge_store: MemoryStore) -> None:
    store = edge_store
    nid = store.add("Shipped the new onboarding flow", ["Bob"]).id
    result = store.update(nid, subjects=["Carol", "Dan"])
    assert result.changed == ["subjects"] and store.get(nid).subjects == ["Carol", "Dan"]
    assert store.get(nid).evolution_history[-1]["old_subjects"] == ["Bob"]
    assert [r.id for r in store.search("onboarding", subject="Carol")] == [nid]
    assert store.search("onboarding", subject="Bob") == []
    assert store.update(nid, subjects=["Carol", "Dan"]).status == "unchanged"


def test_bad_input_and_duplicates_change_nothing(edge_store: MemoryStore) -> None:
    store = edge_store
    a = store.add("The office wifi password rotates monthly").id
    b = store.add("Lunch is served at noon in the canteen").id
    with pytest.raises(ValidationError) as err:
        store.update(b, content="The office wifi password rotates monthly")
    assert err.value.field == "text" and a in str(err.value)
    with pytest.raises(ValidationError) as err:
        store.update(b)
    assert err.value.field == "text"
    with pytest.raises(ValidationError):
        store.update(b, content="   ")
    with pytest.raises(ValidationError) as err:
        store.update(b, subjects="Bob")
    assert err.value.field == "subjects"
    assert store.get(b).content == "Lunch is served at noon in the canteen"
    assert store.get(b).evolution_history == []


def test_another_agents_note_is_not_found_like_a_missing_one(store: MemoryStore) -> None:
    nid = store.add("Mallory must not edit this", agent_id="alice").id
    with pytest.raises(NotFoundError) as foreign:
        store.update(nid, content="edited by mallory", agent_id="mallory")
    with pytest.raises(NotFoundError) as missing:
        store.update("no-such-id", content="edited by mallory", agent_id="mallory")
    assert str(foreign.value).replace(nid, "X") == str(missing.value).replace("no-such-id", "X")
    assert store.get(nid, agent_id="alice").content == "Mallory must not edit this"
    store.delete(nid, agent_id="alice")
    with pytest.raises(NotFoundError):
        store.update(nid, content="a deleted note stays deleted", agent_id="alice")


def test_links_are_checked_again_on_both_sides(edge_store: MemoryStore) -> None:
    a = edge_store.add(PROJECT).id
    b = edge_store.add(RELATED).id
    assert a in edge_store.get(b).links and b in edge_store.get(a).links
    result = edge_store.update(b, content=OTHER + " and bakes bread for the residents")
    assert a in result.links_removed
    assert a not in edge_store.get(b).links and b not in edge_store.get(a).links
    back = edge_store.update(b, content=RELATED)
    assert a in back.links_added
    assert a in edge_store.get(b).links and b in edge_store.get(a).links


def test_an_edit_links_the_notes_sharing_its_new_terms(store: MemoryStore) -> None:
    """Offline, an edit's candidates are the notes sharing its terms (amem.write.candidates),
    on every backend: the sparse ranking, then the candidates' vectors."""
    a = store.add("Alice: I started a pottery class downtown", timestamp="2026-01-05").id
    b = store.add("Alice: my sister visits in March", timestamp="2026-01-15").id
    c = store.add("Alice: the pottery class teacher is strict", timestamp="2026-01-25").id
    assert store.get(b).links == [] and store.get(c).links == [a]  # only "Alice" is shared
    result = store.update(b, content="Alice: my sister joined my pottery class")
    assert sorted(result.links_added) == sorted([a, c]) and result.links_removed == []
    assert b in store.get(a).links and b in store.get(c).links


def test_a_crash_mid_update_loses_nothing(clock: ManualClock) -> None:
    backend = FlakyBackend(EdgeBackend.temporary(256))
    with MemoryStore(config=load_config(), embedder=HashingEmbedder(256), clock=clock,
                     backend=backend) as store:
        # 0: killed before the note's write; 1: after it, before the stale mark is cleared;
        # 2: before the first back-link change
        for fail_at in range(3):
            a = store.add(PROJECT).id
            b = store.add(RELATED).id
            backend.arm(fail_at)
            try:
                store.update(b, content=OTHER + " and bakes bread for the residents")
            except InjectedCrash:
                pass
            backend.arm(None)
            note = store.get(b)
            texts = {note.content, *(h.get("old_content") for h in note.evolution_history)}
            assert RELATED in texts, fail_at  # the old text is still the note's, or its history's
            store.add(f"a later write repairs what crash {fail_at} left stale")
            assert store.info().stale_vectors == 0, fail_at
            live = {n.id for n, _ in store.iter_notes()}
            assert all(set(n.links) <= live for n, _ in store.iter_notes()), fail_at
            assert store.get(a).content == PROJECT
            store.delete(a)
            store.delete(b)
