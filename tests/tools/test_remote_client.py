"""The CLI's own MCP client (``tools.remote.RemoteServer``) against the real HTTP server: the
same answers as the facade, the guard's and the tools' refusals as codes, every session
closed, a server that is not there said plainly."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore
from tools.mcp_server import OwnerAccess
from tools.remote import RemoteError, RemoteServer, _event_data, _response

from .conftest import Tenants
from .http_server import OWNER_SECRET, free_port, running_http


def test_calls_and_reads_answer_what_the_facade_answers(tenants: Tenants,
                                                        facade: ToolFacade) -> None:
    with running_http(facade) as url:
        client = RemoteServer(url, agent_id=tenants.alice, token=OWNER_SECRET)
        page = client.call("memory_list", {"limit": 50})
        status = client.read("amem://status")
        as_mallory = RemoteServer(url, agent_id=tenants.mallory, token=OWNER_SECRET)
        theirs = as_mallory.call("memory_list", {"limit": 50})
    assert page == facade.call("memory_list", {"limit": 50})
    assert page["count"] == 4 and "vault" not in str(page)  # alice's notes only
    assert status == facade.call("memory_status", {})
    assert theirs["count"] == 1 and "vault" in theirs["notes"][0]["content"]


def test_refusals_keep_their_codes(tenants: Tenants, facade: ToolFacade, tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    _, read_only = keys.add(agent=tenants.alice, read_only=True)
    guard = GuardConfig(keys=keys, record_secret=OWNER_SECRET)
    owner = OwnerAccess(lambda name, agent, clean: {"report": name})
    with running_http(facade, guard=guard, owner=owner) as url:
        def refused(client: RemoteServer, work: str) -> RemoteError:
            with pytest.raises(RemoteError) as caught:
                if work.startswith("amem://"):
                    client.read(work)
                else:
                    client.call(work, {"text": "x"} if work == "memory_add"
                                else {"id": "no-such-note"})
            return caught.value

        owner_client = RemoteServer(url, agent_id=tenants.alice, token=OWNER_SECRET)
        missing = refused(owner_client, "memory_get")
        assert missing.code == "not_found" and "no-such-note" in str(missing)
        assert refused(owner_client, "amem://nothing").code == "not_found"
        assert owner_client.read("amem://owner/status") == {"report": "status"}
        wrong = refused(RemoteServer(url, agent_id=tenants.alice, token="amem_wrong"),
                        "memory_get")
        assert wrong.code == "unauthenticated"
        agent_key = RemoteServer(url, agent_id=tenants.alice, token=read_only)
        assert refused(agent_key, "memory_add").code == "forbidden"  # read-only key
        assert refused(agent_key, "amem://owner/status").code == "forbidden"
        other = refused(RemoteServer(url, agent_id=tenants.mallory, token=read_only),
                        "memory_get")
        assert other.code == "forbidden"  # an agent key speaks for its agent only


def test_every_session_is_closed(tenants: Tenants, facade: ToolFacade) -> None:
    """The guard caps open sessions per key: calls past the cap only work when each call's
    session was ended (``DELETE``)."""
    guard = GuardConfig(record_secret=OWNER_SECRET, sessions_per_key=2)
    with running_http(facade, guard=guard) as url:
        client = RemoteServer(url, agent_id=tenants.alice, token=OWNER_SECRET)
        for _ in range(5):
            assert client.call("memory_list", {"limit": 1})["count"] == 4


def test_no_server_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(RemoteError) as caught:
        RemoteServer(url, agent_id="a", token="t", timeout=5).call("memory_list", {})
    assert caught.value.code == "unavailable" and url in str(caught.value)


def test_event_streams_and_strange_answers() -> None:
    text = 'event: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\n: comment\n\ndata: {"id": 2}\n\n'
    assert list(_event_data(text)) == ['{"a":\n1}', '{"id": 2}']
    stream = b'data: {"jsonrpc": "2.0", "method": "notifications/progress"}\n\n' \
             b'data: {"jsonrpc": "2.0", "id": 7, "result": {"ok": true}}\n\n'
    assert _response(200, "text/event-stream", stream, 7, "u") == {
        "jsonrpc": "2.0", "id": 7, "result": {"ok": True}}
    with pytest.raises(RemoteError) as other_id:
        _response(200, "text/event-stream", stream, 8, "u")
    assert other_id.value.code == "unavailable"
    with pytest.raises(RemoteError) as not_json:
        _response(200, "application/json", b"<html>", 1, "u")
    assert not_json.value.code == "unavailable" and "not JSON-RPC" in str(not_json.value)
    with pytest.raises(RemoteError) as guard:
        _response(429, "application/json",
                  b'{"error": {"code": "too_many_sessions", "message": "cap 2", "field": null}}',
                  1, "u")
    assert guard.value.code == "too_many_sessions"
