"""A conversation's title: set by ``ingest(..., title=)`` (a chat export's title), renamed by a
later title, kept when none is given. The column existed, but nothing could write it."""

from __future__ import annotations

import pytest

from lcm import LcmStore
from lcm.errors import LcmValidationError

KEY = "agent:a:chatgpt:6634f0a2"


def title_of(store: LcmStore) -> str | None:
    conversation = store.conversation(KEY)
    assert conversation is not None
    return conversation.title


def test_ingest_names_the_conversation_and_a_later_title_renames_it(store: LcmStore) -> None:
    store.ingest(KEY, [{"role": "user", "content": "plan a trip", "event_id": "u1"}], title="Lisbon trip")
    assert title_of(store) == "Lisbon trip"
    store.ingest(KEY, [{"role": "assistant", "content": "Day 1: Alfama", "event_id": "a1"}])
    assert title_of(store) == "Lisbon trip"  # no title given: the stored one stays
    store.ingest(KEY, [], title="Lisbon and Sintra")  # the user renamed the chat in the app
    assert title_of(store) == "Lisbon and Sintra"


@pytest.mark.parametrize("bad", [42, "x" * 1001, "bad \ud800 title"])
def test_a_title_that_is_not_short_text_is_refused_and_nothing_stored(store: LcmStore, bad: object) -> None:
    with pytest.raises(LcmValidationError) as caught:
        store.ingest(KEY, [{"role": "user", "content": "hello"}], title=bad)  # type: ignore[arg-type]
    assert caught.value.field == "title"
    assert store.conversation(KEY) is None
