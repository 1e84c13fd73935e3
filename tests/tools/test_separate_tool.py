"""``memory_separate``: an agent undoes a fold for the user, through the facade; a read-only key
neither sees nor calls it, and another agent's note is a missing note."""

from __future__ import annotations

from tools import ToolFacade

from .conftest import Tenants

#: the hashing embedder folds the longer telling into the first (0.87 >= fold_threshold)
BIKE = "Alice keeps a green bicycle in the garage at home."
MORE = f"{BIKE} It has a wicker basket."


def _folded(facade: ToolFacade) -> tuple[str, str]:
    note = facade.call("memory_add", {"text": BIKE})["id"]
    assert facade.call("memory_add", {"text": MORE})["status"] == "folded"
    chain = facade.call("memory_history", {"id": note})["chain"]
    (part,) = [e["triggered_by"] for n in chain for e in n["events"] if e["action"] == "fold"]
    return note, part


def test_separate_through_the_tool(tenants: Tenants) -> None:
    facade = ToolFacade(tenants.store, None, agent_id=tenants.alice)
    note, part = _folded(facade)
    refused = facade.call("memory_separate", {"id": note, "part": part, "confirm": False})
    assert refused["error"]["field"] == "confirm"
    done = facade.call("memory_separate", {"id": note, "part": part, "confirm": True})
    assert (done["id"], done["note"], done["joined_by"], done["text_restored"]) == (
        note, part, "fold", True)
    assert facade.call("memory_get", {"id": note})["content"] == BIKE
    assert facade.call("memory_get", {"id": part})["content"] == MORE
    again = facade.call("memory_separate", {"id": note, "part": part, "confirm": True})
    assert again["error"]["code"] == "invalid_argument" and again["error"]["field"] == "part"
    events = [e["action"] for n in facade.call("memory_history", {"id": note})["chain"]
              for e in n["events"]]
    assert events == ["fold", "separated"]


def test_another_agent_cannot_separate_and_a_read_only_key_is_not_offered_it(
        tenants: Tenants) -> None:
    alice = ToolFacade(tenants.store, None, agent_id=tenants.alice)
    note, part = _folded(alice)
    mallory = alice.for_agent(tenants.mallory)
    stolen = mallory.call("memory_separate", {"id": note, "part": part, "confirm": True})
    assert stolen["error"]["code"] == "not_found"
    reader = ToolFacade(tenants.store, None, agent_id=tenants.alice, read_only=True)
    assert "memory_separate" not in [t["name"] for t in reader.list_tools()]
    forbidden = reader.call("memory_separate", {"id": note, "part": part, "confirm": True})
    assert forbidden["error"]["code"] == "forbidden"
    assert alice.call("memory_get", {"id": note})["content"] != BIKE  # still joined
