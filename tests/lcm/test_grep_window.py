"""grep refuses an empty time window (``since`` at or after ``before``) as amem's search does,
instead of answering it with no hits; ``lcm_grep`` says so as ``invalid_argument``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from lcm import LcmStore
from lcm.errors import LcmValidationError
from tools import ToolFacade

KEY = "agent:a:main"


@pytest.fixture
def chat_store(store: LcmStore) -> LcmStore:
    store.ingest(KEY, [{"role": "user", "content": "deploy failed with exit 137"}])
    return store  # its message is at the clock's 2025-01-01T00:00:00.000Z


@pytest.mark.parametrize("mode", ["regex", "full_text"])
@pytest.mark.parametrize(("since", "before"), [
    ("2030-01-01T00:00:00Z", "2020-01-01T00:00:00Z"),  # swapped
    ("2025-01-01T00:00:00Z", "2025-01-01T00:00:00+00:00"),  # equal: before is exclusive
    ("2025-01-01T01:00:00+01:00", "2025-01-01T00:00:00Z"),  # equal in UTC
])  # fmt: skip
def test_since_at_or_after_before_is_refused(chat_store: LcmStore, mode: str, since: str, before: str) -> None:
    with pytest.raises(LcmValidationError, match=r"since \(.*\) must be earlier than before") as err:
        chat_store.grep("deploy", mode=mode, session_key=KEY, since=since, before=before)
    assert err.value.field == "since"


def test_a_window_one_millisecond_wide_still_finds(chat_store: LcmStore) -> None:
    hits = chat_store.grep("deploy", session_key=KEY, since="2025-01-01T00:00:00Z",
                           before="2025-01-01T00:00:00.001Z").hits  # fmt: skip
    assert [h.id for h in hits] == ["msg_1"]


def test_the_refusal_comes_before_the_scope_is_read(chat_store: LcmStore) -> None:
    # an unknown session family answers nothing; the bad window is still the error
    with pytest.raises(LcmValidationError) as err:
        chat_store.grep("deploy", session_key="agent:nobody:main", since="2030-01-01T00:00:00Z",
                        before="2020-01-01T00:00:00Z")  # fmt: skip
    assert err.value.field == "since"


@pytest.fixture
def facade(chat_store: LcmStore) -> Iterator[ToolFacade]:
    with MemoryStore(":memory:", embedder=HashingEmbedder()) as memory:
        yield ToolFacade(memory, chat_store, agent_id="a", session_key=KEY)


def test_lcm_grep_answers_invalid_argument_naming_since(facade: ToolFacade) -> None:
    out = facade.call("lcm_grep", {"pattern": "deploy", "since": "2030-01-01T00:00:00Z",
                                   "before": "2020-01-01T00:00:00Z"})  # fmt: skip
    assert out["error"]["code"] == "invalid_argument" and out["error"]["field"] == "since"
    assert "must be earlier than before" in out["error"]["message"]
    assert len(facade.call("lcm_grep", {"pattern": "deploy"})["hits"]) == 1
