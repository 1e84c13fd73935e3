"""The same words on another day are another event: never folded (amem.write.placer)."""

from __future__ import annotations

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from amem.write.placer import same_event_day

SHOW = "I'm having an art show next month, come along!"


def test_same_event_day_compares_utc_days_and_lets_a_missing_time_fold() -> None:
    assert same_event_day("2025-05-08T23:00:00+00:00", "2025-05-08T01:00:00+00:00")
    assert not same_event_day("2025-05-08T23:00:00+00:00", "2025-05-09T00:00:00+00:00")
    assert same_event_day("", "2025-05-09T00:00:00+00:00")  # a note written before event times
    assert same_event_day("2025-05-08T23:00:00+00:00", None)


def test_the_same_words_on_another_day_are_stored_apart(embedder: HashingEmbedder) -> None:
    with MemoryStore(":memory:", embedder=embedder, agent_id="t") as store:
        first = store.add(SHOW, event_time="2025-05-08T13:00:00Z")
        # a day later in UTC (02:00+02:00 is still the 9th at midnight UTC): its own note
        later = store.add(SHOW + " Yes", event_time="2025-05-10T02:00:00+02:00")
        assert later.status != "folded" and later.id != first.id
        assert later.status == "pending_merge"  # still offered to the nightly merge
        assert store.get(later.id).event_time == "2025-05-10T00:00:00+00:00"
        # the same words the same day still fold
        again = store.add(SHOW + "!", event_time="2025-05-08T18:00:00Z")
        assert again.status == "folded" and again.id == first.id
        assert store.count() == 2
