"""Usage heat through the tools: memory_get after memory_search lifts that note next time."""

from __future__ import annotations

from tests.tools.conftest import Tenants
from tools import ToolFacade


def test_a_note_read_after_a_search_comes_first_for_the_same_search(
        facade: ToolFacade, tenants: Tenants) -> None:
    query = {"query": "what does Alice drink", "limit": 3}
    first = facade.call("memory_search", query)["results"]
    assert len(first) >= 2 and all(r["boosted_by"] is None for r in first)
    # mallory cannot open alice's note, and trying records nothing on it
    mallory = ToolFacade(tenants.store, None, agent_id=tenants.mallory)
    assert mallory.call("memory_get", {"id": first[1]["id"]})["error"]["code"] == "not_found"
    assert facade.call("memory_search", query)["results"][0]["id"] == first[0]["id"]
    facade.call("memory_get", {"id": first[1]["id"]})
    again = facade.call("memory_search", query)["results"]
    assert again[0]["id"] == first[1]["id"] and again[0]["boosted_by"] == "usage"
    # the recorded queries are bookkeeping: memory_get does not show them
    assert "opened_by" not in facade.call("memory_get", {"id": first[1]["id"]})
