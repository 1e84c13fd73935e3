"""Links: the nearest notes reach the verifier; the offline rule is right on real conversations."""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

import pytest

from benchmarks.datasets import BENCHDATA

from amem import MemoryStore, load_config
from amem.kernel.clock import ManualClock
from amem.embed.hashing import HashingEmbedder
from amem.errors import LLMError
from amem.backends.base import Hit
from amem.write.candidates import other_days_first, told_day
from amem.write.linking import LinkView, offline_links, related

SHARED = BENCHDATA

FALCON = [
    "Project Falcon kicks off with a budget of 2 million euros",
    "Dana leads the Falcon security review",
    "Falcon's payment provider is Adyen",
    "The Falcon launch is planned for March",
    "Project Falcon hired two contractors for the mobile app",
    "Falcon's beta testers reported slow checkout",
    "The Falcon steering committee meets every Tuesday",
    "Falcon marketing wants a launch video",
]


class YesLLM:
    """An LLM that enriches plainly, answers yes to every link candidate and evolves nothing
    (or fails every call with ``fail``): a real, small implementation of the LLM seam."""

    model = "yes-model"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.offered: list[int] = []

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        raise AssertionError("not used")

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any],
                      name: str) -> dict[str, Any]:
        if self.fail:
            raise LLMError("the model is down")
        if name == "link_decisions":
            count = len(re.findall(r'<candidate n="\d+"', user))
            self.offered.append(count)
            return {"links": [{"candidate": n, "link": True} for n in range(1, count + 1)]}
        if name == "memory_evolution":
            return {"updates": []}
        return {"keywords": ["falcon"], "tags": ["project"], "context": "Project Falcon.",
                "category": "Project", "note_type": "memory", "topics": []}


def _store(llm: Any = None) -> MemoryStore:
    # fold and pending off: these notes are related, not duplicates
    config = load_config(overrides={"fold_threshold": 1.0, "pending_threshold": 1.0})
    return MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=256),
                       clock=ManualClock("2026-01-10T12:00:00+00:00"), llm=llm)


def test_an_llm_answering_yes_links_every_offered_neighbour() -> None:
    llm = YesLLM()
    with _store(llm) as store:
        results = [store.add(text) for text in FALCON]
        # every note after the sixth was offered six neighbours, whatever their cosine
        assert llm.offered == [1, 2, 3, 4, 5, 6, 6]
        assert [len(r.links) for r in results] == [0, 1, 2, 3, 4, 5, 6, 6]


def test_offline_rule_links_notes_about_one_project() -> None:
    with _store() as store:
        results = [store.add(text) for text in FALCON]
        linked_notes = sum(1 for r in results[1:] if r.links)
        assert linked_notes == len(FALCON) - 1  # each shares the name Falcon and a word
        unrelated = store.add("Bob drinks espresso every morning")
        assert unrelated.links == []


def test_a_failing_llm_falls_back_to_the_offline_rule_and_says_so() -> None:
    with _store(YesLLM(fail=True)) as store:
        store.add(FALCON[0])
        res = store.add(FALCON[3])
        assert res.links and any("link verification" in w for w in res.warnings)


def test_rule_reads_names_words_and_time() -> None:
    day = "2026-01-01T10:00:00"
    alice = LinkView("a", "Alice: I prefer green tea over coffee", (), day)
    pot = LinkView("p", "Alice: my teapot is from the Kyoto trip", (), "2026-01-01T18:00:00")
    bob = LinkView("b", "Bob: I prefer green tea too", (), day)
    db = LinkView("d", "The staging database runs PostgreSQL 16", (), day)
    backups = LinkView("k", "Database backups of staging run nightly", (), "2026-03-01T10:00:00")
    assert related(alice, pot)  # the same speaker, the same day
    assert not related(alice, LinkView("p", pot.content, (), "2026-02-01T18:00:00"))
    assert not related(alice, bob)  # different speakers, though the words match
    assert related(db, backups) and not related(db, alice)  # nobody named: shared words decide
    assert related(alice, LinkView("x", "Completely different words", (), "", similarity=0.8))
    subject = LinkView("s", "Prefers oolong in the afternoon", ("Alice",), "2026-01-01T11:00:00")
    assert related(alice, subject)  # a subject is a name
    falcon = LinkView("f", "Falcon's payment provider is Adyen", (), day)
    assert related(LinkView("g", "Dana leads the Falcon security review", (), day), falcon)
    assert offline_links(alice, [pot, bob, db], floor=0.05) == []  # all below the floor
    assert offline_links(alice, [LinkView("p", pot.content, (), pot.timestamp, 0.1), bob],
                         floor=0.05) == ["p"]


def test_two_speakers_naming_each_other_are_still_different_people() -> None:
    """People talking name each other ("Hey Gina!"): a name one speaker says of the other is
    no shared story; one speaker's notes still link, a name neither speaker bears still
    counts, and a note in no one's voice is read by its names as before."""
    day, later = "2026-01-01T10:00:00", "2026-02-01T10:00:00"
    gina = LinkView("g", "Gina: Hey Jon! The store's new clothing line sold out", (), day)
    jon = LinkView("j", "Jon: Gina, the studio's new dance line sold out", (), later)
    jon_same_day = LinkView("s", "Jon: thanks Gina!", (), day)
    gina_again = LinkView("a", "Gina: Jon, the clothing line gets a second run", (), later)
    plain = LinkView("p", "Gina's clothing line gets a second run", (), later)
    assert not related(gina, jon)  # the same words and both names, two speakers
    assert not related(gina, jon_same_day)  # a name and a day shared, two speakers
    assert related(gina, gina_again) and related(gina, plain)
    assert related(gina, LinkView("x", jon.content, (), later, similarity=0.8))  # close notes
    two = LinkView("t", "Gina: the clothing line\nJon: the dance line", (), later)
    assert related(jon, two) and related(gina, two)  # a speaker shared
    # a third name both mention still counts: labels opening a line read as speakers too
    meeting = LinkView("m", "Meeting: Alice presented the Q3 budget", (), day)
    standup = LinkView("n", "Standup: the Q3 budget Alice wrote is late", (), later)
    assert related(meeting, standup)
    # a chat's roles are no people: the assistant's turn is about the user's trip
    user = LinkView("u", "User: I fly to Lisbon for the conference in May", (), day)
    assistant = LinkView("v", "Assistant: for the Lisbon conference, book the flight early",
                         (), later)
    assert related(user, assistant)


def test_the_rule_links_the_first_candidates_that_pass_up_to_keep() -> None:
    day = "2026-01-01T10:00:00"
    note = LinkView("n", "Alice: the pottery class made a bowl", (), day)
    bob = LinkView("b", "Bob: my pottery class is on Monday", (), day)  # another person
    first, second = (LinkView(i, f"Alice: pottery class {n}", (), day) for i, n in
                     (("1", "again"), ("2", "photos")))
    assert offline_links(note, [bob, first, second]) == ["1", "2"]
    assert offline_links(note, [bob, first, second], keep=1) == ["1"]  # bob does not count


def test_candidates_told_on_other_days_come_first_in_their_order() -> None:
    hits = [Hit(str(n), payload={"event_time": when}) for n, when in enumerate(
        ["2026-01-05T09:00:00+00:00", "2026-01-01T09:00:00+00:00", "2026-01-05T20:00:00+00:00",
         "2026-01-02T09:00:00+00:00"])]
    assert [h.id for h in other_days_first(hits, "2026-01-05")] == ["1", "3", "0", "2"]
    assert [h.id for h in other_days_first(hits, "")] == ["0", "1", "2", "3"]  # no day: as given
    assert told_day({"event_time": "", "timestamp": "2026-01-03T01:00:00+00:00"}) == "2026-01-03"


def _dated_store(**overrides: Any) -> MemoryStore:
    config = load_config(overrides={"fold_threshold": 1.0, "pending_threshold": 1.0,
                                    **overrides})
    return MemoryStore(":memory:", config=config, embedder=HashingEmbedder(dim=256),
                       clock=ManualClock("2026-02-01T12:00:00+00:00"))


def test_offline_links_reach_a_note_told_on_another_day_before_the_same_day() -> None:
    """The candidates are the notes sharing the note's terms, other days first: with room for
    one link, the pottery class of another week wins over the same evening's turn."""
    with _dated_store(link_keep=1) as store:
        old = store.add("Alice: I started a pottery class downtown", timestamp="2026-01-05")
        same = store.add("Alice: the pottery class teacher is strict",
                         timestamp="2026-01-20T18:00:00")
        new = store.add("Alice: my pottery class made a blue bowl", timestamp="2026-01-20T19:00:00")
        assert new.links == [old.id]
        assert same.links == [old.id]
        assert store.get(old.id).links == [same.id, new.id]  # the back-links


def test_with_link_pool_zero_the_nearest_notes_are_the_candidates_as_before() -> None:
    with _dated_store(link_pool=0) as store:
        old = store.add("Alice: I started a pottery class downtown", timestamp="2026-01-05")
        same = store.add("Alice: the pottery class teacher is strict",
                         timestamp="2026-01-20T18:00:00")
        new = store.add("Alice: my pottery class made a blue bowl", timestamp="2026-01-20T19:00:00")
        assert sorted(new.links) == sorted([old.id, same.id])  # every nearest note that passes


def test_a_note_sharing_no_term_gets_no_offline_candidate() -> None:
    with _dated_store() as store:
        store.add("Alice: I started a pottery class downtown", timestamp="2026-01-05")
        assert store.add("Bob drinks espresso every morning").links == []


@pytest.mark.skipif(not (SHARED / "locomo_dev.json").exists(), reason="shared benchdata absent")
def test_rule_separates_turns_one_question_needs_from_random_turns_on_locomo() -> None:
    """Labels from the data's evidence structure: two turns that are evidence for one question
    belong together; random turn pairs of the same conversation mostly do not."""
    from benchmarks.datasets import load_locomo

    rng = random.Random(0)
    together: list[tuple[LinkView, LinkView]] = []
    apart: list[tuple[LinkView, LinkView]] = []
    for conv in load_locomo(SHARED / "locomo_dev.json"):
        view = {d.id: LinkView(d.id, d.text, (), d.timestamp or "", 0.5) for d in conv.docs}
        pairs = {tuple(sorted(p)) for q in conv.queries
                 for p in itertools.combinations(q.relevant, 2)}
        together += [(view[a], view[b]) for a, b in sorted(pairs)]
        ids = sorted(view)
        while len(apart) < 4 * len(together):
            a, b = rng.sample(ids, 2)
            if tuple(sorted((a, b))) not in pairs:
                apart.append((view[a], view[b]))
    assert len(together) >= 150
    accept_together = sum(related(a, b) for a, b in together) / len(together)
    accept_apart = sum(related(a, b) for a, b in apart) / len(apart)
    # measured: 0.625 of the evidence pairs, 0.078 of the random pairs (8 times as often);
    # with speakers read as names only (each names the other in passing) 0.695 and 0.143
    assert accept_together >= 0.6 and accept_apart <= 0.1
    assert accept_together >= 6 * accept_apart


#: pairs of unrelated notes whose only shared word is a time of day (issue 28: 下午 joined two
#: Chinese notes), and one related pair as the control
AFTERNOON = [("周六下午去公园跑步", "下午三点开会讨论预算"),
             ("We went hiking in the afternoon", "The dentist appointment is in the afternoon")]
RELATED = ("预算会议下午三点开始", "这个季度的预算已经超支了")


def test_a_time_of_day_alone_does_not_link() -> None:
    for first, second in [*AFTERNOON, RELATED]:
        views = [LinkView(str(n), text, (), "", 0.5) for n, text in enumerate((first, second))]
        assert related(*views) is ((first, second) == RELATED), (first, second)


@pytest.mark.slow
def test_a_time_of_day_alone_does_not_link_with_the_default_embedder() -> None:
    from amem.embed import make_embedder

    config = load_config(overrides={"fold_threshold": 1.0, "pending_threshold": 1.0})
    with MemoryStore(":memory:", config=config, embedder=make_embedder("e5-small"),
                     clock=ManualClock("2026-01-10T12:00:00+00:00")) as store:
        for first, second in AFTERNOON:
            kept = store.add(first, enrich=True)
            assert store.add(second, enrich=True).links == [], (first, second)
            store.delete(kept.id)
        store.add(RELATED[0])
        assert store.add(RELATED[1]).links  # a shared term (预算, "budget") still links


#: two people talking over three weeks, each naming the other in passing; both speak of a floor
CHAT = [
    ("2026-03-02", "Gina: Hey Jon! I launched an ad campaign for my clothing store."),
    ("2026-03-02", "Jon: Nice one, Gina! My dance studio needs a new wooden floor."),
    ("2026-03-09", "Gina: Jon, the clothing store sold out after the ad campaign."),
    ("2026-03-09", "Jon: Gina, the studio floor is finally laid, dancers love it."),
    ("2026-03-16", "Gina: Jon, I put a new floor display in the clothing store."),
    ("2026-03-16", "Jon: Thanks Gina! The dance studio opens its doors on Friday."),
]


def test_through_the_write_path_one_speakers_turns_link_and_the_other_speakers_do_not() -> None:
    """With the default embedder and offline enrichment, as an import of a chat writes it: a
    turn links to the same speaker's turns of other days, never to the other speaker's,
    though each names the other and both speak of a floor and of something new."""
    from amem.embed import make_embedder

    config = load_config(overrides={"fold_threshold": 1.0, "pending_threshold": 1.0})
    with MemoryStore(":memory:", config=config, embedder=make_embedder("e5-small")) as store:
        added = store.add_many([{"text": text, "id": f"t{i}", "timestamp": day}
                                for i, (day, text) in enumerate(CHAT)])
        assert [a.id for a in added] == [f"t{i}" for i in range(len(CHAT))]
        speaker = {f"t{i}": text.split(":")[0] for i, (_, text) in enumerate(CHAT)}
        links = {nid: store.get(nid).links for nid in speaker}
    assert links["t0"] and links["t1"]  # each speaker's story links across its weeks
    for nid, linked in links.items():
        assert all(speaker[other] == speaker[nid] for other in linked), (nid, linked)
    assert "t2" in links["t0"] and "t4" in links["t2"]  # the clothing store, week by week
