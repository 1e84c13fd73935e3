"""search's boolean flags take a bool (or None for the configured default), never any truthy
value: ``expand_links="no"`` once turned link expansion on."""

from __future__ import annotations

from typing import Any

import pytest

from amem import MemoryStore
from amem.errors import ValidationError


@pytest.mark.parametrize("flag", ["expand_links", "heat", "include_superseded"])
@pytest.mark.parametrize("value", ["no", "false", 0, 1, [], 1.0])
def test_a_non_bool_flag_is_refused_naming_it(edge_store: MemoryStore, flag: str,
                                               value: Any) -> None:
    edge_store.add("Alice went hiking in the mountains", subjects=["alice"], enrich=False)
    with pytest.raises(ValidationError, match="must be true or false") as err:
        edge_store.search("who went hiking?", **{flag: value})
    assert err.value.field == flag


def test_bools_and_the_default_still_work(store: MemoryStore) -> None:
    first = store.add("Alice went hiking in the mountains", enrich=False)
    second = store.add("Alice packed boots for the mountains", enrich=False)
    store.index.update_payload(first.id, store.agent_id, {"links": [second.id]})

    def via(**flags: Any) -> list[tuple[str, str]]:
        return [(r.id, r.via) for r in store.search("Alice hiking mountains", limit=1,
                                                         **flags)]

    assert via(expand_links=True) == [(first.id, "match"), (second.id, "link")]
    assert via(expand_links=False) == [(first.id, "match")]
    assert via() == via(expand_links=None) == via(expand_links=True)  # the default: on
    for flags in ({"heat": True}, {"heat": False}, {"heat": None},
                  {"include_superseded": True}):
        assert via(**flags)[0] == (first.id, "match")
