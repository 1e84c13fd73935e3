"""Step 5b: a question's reply before the question among the first matches (amem.search.replies)."""

from __future__ import annotations

import pytest

from amem.embed.hashing import HashingEmbedder
from amem.kernel.clock import ManualClock
from amem.notefields import ASKS
from amem.notes import Note, point_id
from amem.search.replies import question_share

from .conftest import make_store

CHAT = [  # a question, the reply told a second later, then small talk
    ("Sam: what kind of counseling work do you want to pursue?", "2025-05-08T13:56:00Z"),
    ("Ana: working with trans people, helping them accept themselves.", "2025-05-08T13:56:01Z"),
    ("Sam: see you at the lake on Sunday!", "2025-05-08T13:56:02Z"),
]
QUERY = "what kind of counseling work does Ana want to pursue"


def test_question_share_counts_sentences_ending_with_a_question_mark() -> None:
    assert question_share("Sounds great! What kind of counseling do you want to pursue?") > 0.7
    # news closing with a polite question is not a question
    assert question_share("Guess what - I got a puppy two weeks ago! Her name is Coco and she "
                          "is adorable. You?") < 0.1
    # a speaker's label and bracketed annotations are part of no sentence
    assert question_share("[8 May 2023] Melanie: Is it? [shares a photo of a lake]") == 1.0
    assert question_share("你去哪里了？我在家。") == pytest.approx(6 / 10)
    assert question_share("") == 0.0 and question_share("[only a note]") == 0.0


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
def test_the_reply_takes_the_question_place(kind: str, embedder: HashingEmbedder,
                                            clock: ManualClock) -> None:
    def ranked(**overrides: object) -> list[tuple[str, float]]:
        with make_store(kind, embedder, clock, heat=False, **overrides) as store:
            for i, (text, when) in enumerate(CHAT):
                store.add(text, id=f"t{i}", event_time=when, enrich=False)
            for i in range(6):
                store.add(f"note {i} about gardening tomatoes", id=f"o{i}", enrich=False,
                          event_time=f"2025-0{1 + i}-03T10:00:00Z")
            return [(h.id, h.score) for h in store.search(QUERY, limit=5, expand_links=False)]
    plain, moved = ranked(question_share=0.0), ranked(question_penalty=0.0)
    # the question matches the query's words best; the reply, right after it, holds the answer
    assert [pid for pid, _ in plain][:2] == ["t0", "t1"]
    assert [pid for pid, _ in moved][:2] == ["t1", "t0"]
    # only the order changes: the same notes, and the scores stay in place, best first
    assert {pid for pid, _ in moved} == {pid for pid, _ in plain}
    assert [s for _, s in moved] == [s for _, s in plain]


def test_the_step_stands_aside_when_replaced_notes_are_shown(embedder: HashingEmbedder,
                                                             clock: ManualClock) -> None:
    with make_store("edge", embedder, clock, heat=False, question_penalty=0.0) as store:
        for i, (text, when) in enumerate(CHAT):
            store.add(text, id=f"t{i}", event_time=when, enrich=False)
        shown = [h.id for h in store.search(QUERY, limit=3, expand_links=False,
                                            include_superseded=True)]
        assert shown[:2] == ["t0", "t1"]


@pytest.mark.parametrize("written", ["now", "before asks was stored"])
def test_a_question_steps_back_behind_notes_that_tell(embedder: HashingEmbedder,
                                                      clock: ManualClock, written: str) -> None:
    """The question share comes from the note's stored ``asks`` field, or, for a note written
    before the field existed, from its content read at search time: the same order."""
    def order(**overrides: object) -> list[str]:
        with make_store("edge", embedder, clock, heat=False, **overrides) as store:
            # the question shares the most words; the two telling turns are days apart, so
            # neither is the question's reply (step 5b moves nothing here)
            store.add("Sam: which hiking trails did you walk with friends this summer?",
                      id="ask", enrich=False, event_time="2025-05-08T13:56:00Z")
            store.add("Ana: we walked the ridge trail with friends", id="tell1",
                      enrich=False, event_time="2025-06-01T10:00:00Z")
            store.add("Ana: the coastal trail was my summer favourite", id="tell2",
                      enrich=False, event_time="2025-07-01T10:00:00Z")
            for i in range(5):
                store.add(f"note {i} about tomatoes", id=f"o{i}", enrich=False,
                          event_time=f"2025-0{1 + i}-03T10:00:00Z")
            if written != "now":  # every note as an older version wrote it: no asks field
                backend = store.index.backend
                for hit in list(backend.iterate(with_vectors=True)):
                    assert hit.dense is not None and ASKS in hit.payload
                    point = store.index.make_point(Note.from_payload(hit.payload), hit.dense,
                                                   count_stats=False)
                    del point.payload[ASKS]
                    backend.upsert([point])
                assert all(ASKS not in h.payload for h in backend.iterate())
            return [h.id for h in store.search("which hiking trails did Ana walk with friends "
                                                  "this summer", limit=8, expand_links=False)]
    plain = order(question_penalty=0.0)
    assert plain[0] == "ask"
    stepped = order(question_penalty=10.0)
    assert stepped.index("ask") > max(stepped.index("tell1"), stepped.index("tell2"))
    assert set(stepped) == set(plain)


def test_the_stored_question_share_follows_every_change_of_the_text(
        embedder: HashingEmbedder, clock: ManualClock) -> None:
    """An edit and a field update that changes the content (a fold writes it so) derive
    ``asks`` again: step 4e and 5b must not rank a note by a text it no longer holds."""
    with make_store("edge", embedder, clock, heat=False) as store:
        store.add("Sam: which hiking trails did you walk this summer?", id="n1", enrich=False)

        def stored() -> object:
            (hit,) = store.index.backend.retrieve([point_id(store.agent_id, "n1")])
            return hit.payload[ASKS]

        assert stored() == 1.0
        store.update("n1", content="Sam: we walked the ridge trail this summer.")
        assert stored() == 0.0
        assert store.index.update_note_fields("n1", store.agent_id,
                                              {"content": "Sam: and you? Where did you go?"})
        assert stored() == question_share("Sam: and you? Where did you go?") == 1.0
