"""A note's subjects reach ranking: BM25 counts the subject terms its text lacks, the vector
embeds a "Subjects: ..." line; edits, old stores and bad input (issue 29)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pytest

from amem import MemoryStore, load_config
from amem import bm25
from amem.backends.base import Point
from amem.backends.edge import EdgeBackend
from amem.embed import make_embedder
from amem.embed.base import Kind
from amem.embed.hashing import HashingEmbedder
from amem.errors import ValidationError
from amem.export import SUBJECTS_EMBEDDED, export_store, import_export
from amem.kernel.clock import ManualClock
from amem.notes import compose_embed_text, point_id
from amem.refresh import count_stale
from amem.text import tokenize
from amem.upgrades import SUBJECTS_KEY
from tools.reports import doctor_report

#: a sentence that does not name what it is about (as the second sentence of an article)
RIVER = "Its capital lies on a river delta, and it exports rice and silk."
MOUNTAIN = "Its capital sits high in the mountains, and it exports copper and tin."


def bm25_ids(store: MemoryStore, query: str) -> list[str]:
    """The notes BM25 alone finds for ``query``, best first."""
    hits = store.index.backend.sparse_search(bm25.query_vector(tokenize(query)), None, 10)
    return [str(h.payload["id"]) for h in hits]


def stored_vector(store: MemoryStore, note_id: str, agent: str = "default") -> np.ndarray:
    _, vector = store.index.load(note_id, agent, with_vector=True)
    assert vector is not None
    return np.asarray(vector, dtype=np.float32)


def embedded(store: MemoryStore, text: str) -> np.ndarray:
    vector = store.index.embed_passages([text])[0]
    return np.asarray(vector, dtype=np.float32) / float(np.linalg.norm(vector))


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / float(np.linalg.norm(vector))


# -- the fields: what a subject adds, and when it adds nothing --------------------------------


def test_a_subject_adds_the_terms_and_the_line_the_content_lacks_and_nothing_else() -> None:
    plain = bm25.note_terms(RIVER, [], [])
    assert bm25.note_terms(RIVER, [], [], ["Quelmar"]) == plain + ["quelmar"]
    # counted once, with a keyword or tag naming it too
    assert bm25.note_terms(RIVER, ["Quelmar"], ["quelmar"], ["Quelmar"]) == plain + ["quelmar"]
    named = "Quelmar exports rice."
    assert bm25.note_terms(named, [], [], ["Quelmar"]) == bm25.note_terms(named, [], [])
    assert compose_embed_text(RIVER, [], [], "", ["Quelmar"]) == RIVER + "\nSubjects: Quelmar"
    assert compose_embed_text(named, [], [], "", ["quelmar"]) == named
    # a subject is said once: not again as a keyword or tag
    assert compose_embed_text(RIVER, ["Quelmar", "delta trade"], ["quelmar"], "",
                              ["Quelmar"]) == (RIVER + "\nSubjects: Quelmar"
                                               "\nKeywords: delta trade\nTags: quelmar")


def test_a_subject_the_content_already_names_leaves_both_vectors_as_they_were(
        edge_store: MemoryStore) -> None:
    text = "Alice prefers green tea in the morning"
    edge_store.add(text, subjects=["alice"], id="with", enrich=False)
    edge_store.add(text, id="without", enrich=False, agent_id="other")
    note = edge_store.get("with")
    assert note.embed_text() == text and not note.vector_stale
    assert np.array_equal(stored_vector(edge_store, "with"),
                          stored_vector(edge_store, "without", "other"))
    hits = edge_store.index.backend.sparse_search(
        bm25.query_vector(tokenize("alice green tea")), None, 5)
    assert len(hits) == 2 and hits[0].score == pytest.approx(hits[1].score, rel=1e-6)


# -- found by a query naming the subject -------------------------------------------------------


def test_bm25_finds_a_note_by_a_subject_its_text_lacks(edge_store: MemoryStore) -> None:
    edge_store.add(RIVER, subjects=["Quelmar"], id="q", enrich=False)
    edge_store.add(MOUNTAIN, subjects=["Zorbania"], id="z", enrich=False)
    assert bm25_ids(edge_store, "Quelmar") == ["q"]
    assert bm25_ids(edge_store, "what does Quelmar export")[0] == "q"
    # the full write path (enrichment, links) gives the same field
    edge_store.add("It trades mostly with its northern neighbours.", subjects=["Vantoria"],
                   id="v")
    assert bm25_ids(edge_store, "Vantoria") == ["v"]
    assert edge_store.search("Quelmar", limit=1)[0].id == "q"


@pytest.fixture(scope="module")
def e5_store() -> Iterator[MemoryStore]:
    with MemoryStore(":memory:", embedder=make_embedder("e5-small"),
                     config=load_config(overrides={}),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        store.add(RIVER, subjects=["Quelmar"], id="q", enrich=False)
        store.add(RIVER, id="q", enrich=False, agent_id="bare")  # the same text, no subject
        store.add(MOUNTAIN, subjects=["Zorbania"], id="z", enrich=False)
        yield store


def test_the_vector_of_a_note_embeds_its_subject_and_a_query_naming_it_comes_closer(
        e5_store: MemoryStore) -> None:
    """With the default embedder: the dense leg reads the subject (old code: one vector)."""
    assert np.allclose(unit(stored_vector(e5_store, "q")),
                       embedded(e5_store, RIVER + "\nSubjects: Quelmar"), atol=1e-5)
    assert not e5_store.get("q").vector_stale
    query = e5_store.index.embed_query("What does Quelmar export?")
    titled = float(np.dot(query, unit(stored_vector(e5_store, "q"))))
    bare = float(np.dot(query, unit(stored_vector(e5_store, "q", "bare"))))
    assert titled > bare + 0.01
    hits = e5_store.index.backend.dense_search(query, e5_store.index.tenant_where("default"), 2)
    assert [h.payload["id"] for h in hits] == ["q", "z"]
    assert [r.id for r in e5_store.search("What does Quelmar export?", limit=2)] == ["q", "z"]


# -- edits and stores written before ----------------------------------------------------------


def test_new_subjects_of_an_edit_reach_both_vectors(edge_store: MemoryStore) -> None:
    edge_store.add(RIVER, id="q", enrich=False)
    assert bm25_ids(edge_store, "Quelmar") == []
    result = edge_store.update("q", subjects=["Quelmar"])
    assert result.changed == ["subjects"]
    assert bm25_ids(edge_store, "Quelmar") == ["q"]
    assert np.allclose(unit(stored_vector(edge_store, "q")),
                       embedded(edge_store, RIVER + "\nSubjects: Quelmar"), atol=1e-5)
    assert not edge_store.get("q").vector_stale
    edge_store.update("q", subjects=[])
    assert bm25_ids(edge_store, "Quelmar") == []
    assert np.allclose(unit(stored_vector(edge_store, "q")), embedded(edge_store, RIVER),
                       atol=1e-5)


def test_a_store_written_before_subjects_reached_ranking_is_brought_up_to_date(
        tmp_path: Path) -> None:
    path, clock = tmp_path / "store", ManualClock("2026-01-10T12:00:00+00:00")
    config, embedder = load_config(overrides={}), HashingEmbedder(dim=64)
    with MemoryStore(path, config=config, embedder=embedder, clock=clock) as old:
        old.add(RIVER, subjects=["Quelmar"], id="q", enrich=False)
        old.add("Alice prefers green tea", subjects=["alice"], id="a", enrich=False)
        content_vector = old.index.embed_passages([RIVER])[0]
    # What an older version wrote: vectors of the text alone, no record of this upgrade.
    with EdgeBackend(path, 64) as engine:
        hit = engine.retrieve([point_id("default", "q")])[0]
        terms = bm25.note_terms(RIVER, [], [])
        engine.upsert([Point(hit.id, np.asarray(content_vector, dtype=np.float32),
                             bm25.doc_vector(terms, 10.0, bm25.Bm25Params()), hit.payload)])
        meta = engine.read_meta()
        meta.pop(SUBJECTS_KEY)
        engine.write_meta(meta)
    with MemoryStore(path, config=config, embedder=embedder, clock=clock) as new:
        assert new.index.backend.read_meta()[SUBJECTS_KEY] == 1
        assert bm25_ids(new, "Quelmar") == ["q"]  # at once: no encoder needed
        # its vector waits for the next write; the note whose text names its subject does not
        assert new.get("q").vector_stale and not new.get("a").vector_stale
        assert count_stale(new.index) == 1
        # doctor said "a write was interrupted" of the notes this upgrade marked
        (stale,) = [w for w in doctor_report(new, lambda _: {"ok": True}, {}, clean=False)[
            "warnings"] if "earlier text" in w]
        assert "upgrade" in stale
        new.add("Bob rides a blue bicycle", enrich=False)
        assert count_stale(new.index) == 0
        assert np.allclose(unit(stored_vector(new, "q")),
                           embedded(new, RIVER + "\nSubjects: Quelmar"), atol=1e-5)


# -- bad subjects: the errors of before --------------------------------------------------------


@pytest.mark.parametrize("subjects, why", [
    ("Quelmar", "subjects must be a list of strings"),
    ([""], "subjects items must be non-empty strings"),
    ([3], "subjects items must be non-empty strings"),
    (["x" * 201], "subjects items must be at most 200 characters"),
    ([f"s{i}" for i in range(65)], "subjects has 65 items; the limit is 64"),
])
def test_bad_subjects_are_refused_naming_the_field(edge_store: MemoryStore, subjects: object,
                                                   why: str) -> None:
    with pytest.raises(ValidationError) as info:
        edge_store.add(RIVER, subjects=subjects, enrich=False)
    assert info.value.field == "subjects" and why in str(info.value)
    assert edge_store.count() == 0


def test_an_export_made_before_subjects_reached_the_vector_is_re_embedded_after_loading(
        edge_store: MemoryStore, embedder: HashingEmbedder, clock: ManualClock) -> None:
    edge_store.add(RIVER, subjects=["Quelmar"], id="q", enrich=False)
    edge_store.add("Alice prefers green tea", subjects=["alice"], id="a", enrich=False)
    out = io.StringIO()
    export_store(edge_store, out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(row[SUBJECTS_EMBEDDED] is True for row in rows)
    # the same rows as an older version wrote them: no mark, the vector of the text alone
    for row in rows:
        del row[SUBJECTS_EMBEDDED]
        row["vector"] = [float(x) for x in edge_store.index.embed_passages(
            [row["note"]["content"]])[0]]
    old = io.StringIO("".join(json.dumps(row) + "\n" for row in rows))
    with MemoryStore(":memory:", config=load_config(overrides={}), embedder=embedder,
                     clock=clock) as other:
        assert import_export(other, old) == 2
        assert other.get("q").vector_stale and not other.get("a").vector_stale
        assert bm25_ids(other, "Quelmar") == ["q"]
        other.add("Bob rides a blue bicycle", enrich=False)
        assert count_stale(other.index) == 0
        assert np.allclose(unit(stored_vector(other, "q")),
                           embedded(other, RIVER + "\nSubjects: Quelmar"), atol=1e-5)
    # an export of this version keeps its vectors as they are
    with MemoryStore(":memory:", config=load_config(overrides={}), embedder=embedder,
                     clock=clock) as again:
        assert import_export(again, io.StringIO(out.getvalue())) == 2
        assert not again.get("q").vector_stale


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the passages it embeds."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.passages: list[str] = []

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> np.ndarray:
        if kind == "passage":
            self.passages.extend(texts)
        return super().embed(texts, kind=kind)


def test_the_fast_path_embeds_a_note_with_subjects_once(clock: ManualClock) -> None:
    """No fold decision needs its content's vector: its whole text is embedded, once."""
    counting = CountingEmbedder(dim=64)
    with MemoryStore(":memory:", config=load_config(overrides={}), embedder=counting,
                     clock=clock) as store:
        store.add_many([{"text": RIVER, "subjects": ["Quelmar"], "id": "q"},
                        {"text": MOUNTAIN, "id": "m"}], enrich=False)
        store.add("Bob rides a blue bicycle", subjects=["Bob's travels"], id="b", enrich=False)
        assert counting.passages == [MOUNTAIN, RIVER + "\nSubjects: Quelmar",
                                     "Bob rides a blue bicycle\nSubjects: Bob's travels"]
        assert count_stale(store.index) == 0
        assert np.allclose(unit(stored_vector(store, "q")),
                           unit(counting.embed([RIVER + "\nSubjects: Quelmar"])[0]), atol=1e-6)
        assert bm25_ids(store, "Quelmar") == ["q"]
