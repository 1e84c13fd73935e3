"""A library caller's bulk add and note type: checked whole before anything is written, and a
given note type kept (exploratory test of the Python API, 2026-12-05)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="t") as store:
        yield store


def test_a_bad_item_anywhere_stores_nothing_and_is_named(store: MemoryStore) -> None:
    # items went in 32 at a time: a bad 36th raised after the first 32 were stored
    items = [{"text": f"observation {i}: a heron at pond {i}"} for i in range(40)]
    items[35]["metadata"] = {"k": ["a", {"deep": 1}]}
    with pytest.raises(ValidationError) as err:
        store.add_many(items)
    assert err.value.field is not None and err.value.field.startswith("items[35].metadata")
    assert str(err.value).startswith("item 35: ")
    assert store.count() == 0
    for bad, field in (("x", "items"), (["x"], "items[0].item"), ([{"txt": "a"}], "items[0].text")):
        with pytest.raises(ValidationError) as err:
            store.add_many(bad)  # type: ignore[arg-type]
        assert err.value.field == field
    assert store.count() == 0


@pytest.mark.parametrize("batch", [-1, 0, 2.5, "3", True])
def test_a_batch_that_is_no_whole_number_is_refused(store: MemoryStore, batch: object) -> None:
    # -1 stored nothing and returned []; 2.5 raised a bare TypeError
    with pytest.raises(ValidationError) as err:
        store.add_many([{"text": "a note"}], batch=batch)
    assert err.value.field == "batch"
    assert store.count() == 0
    assert [r.status for r in store.add_many([{"text": "a note"}], batch=1)] == ["created"]


def test_an_id_clash_in_a_batch_is_a_rejected_result(store: MemoryStore) -> None:
    store.add("the first text", id="n-1")
    done = store.add_many([{"text": "another text", "id": "n-1"}, {"text": "a third text"}])
    assert [r.status for r in done] == ["rejected", "created"]
    assert "already exists with different content" in done[0].warnings[0]


def test_a_given_note_type_is_kept_by_enrichment() -> None:
    from amem.embed import make_embedder

    # offline enrichment reads "Carol's birthday is on March 3" as knowledge: asked for a
    # memory, the note was stored as knowledge anyway (its heat and the topics filter change)
    with MemoryStore(":memory:", embedder=make_embedder("hashing"), agent_id="t") as store:
        plain = store.add("Carol's birthday is on March 3")
        asked = store.add("Dave's birthday is on July 9", note_type="memory")
        assert store.get(asked.id).note_type == "memory"
        told = store.add("Erin's birthday is on May 1", note_type="knowledge")
        assert store.get(told.id).note_type == "knowledge"
        assert store.get(plain.id).note_type == "knowledge"  # what enrichment makes of it unasked
