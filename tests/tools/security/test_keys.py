"""Keys: stored hashed in a private file that refuses symlinks; a key decides the agent, the
``X-Amem-Agent`` header only narrows, read-only keys change nothing, revocation is immediate."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tools.keys import KeyFileError, KeyStore

from ..http_server import http_client
from .conftest import Served


def test_a_key_is_stored_hashed_in_a_private_file(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        keys = KeyStore(tmp_path / "home" / "keys.json")
        record, secret = keys.add(agent="alice", name="laptop")
    finally:
        os.umask(old)
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600
    text = keys.path.read_text()
    # the random part whole (it may hold "_" itself: split at the first two only); the last
    # "_"-piece alone was sometimes one character, found in any JSON text
    random_part = secret.split("_", 2)[2]
    assert len(random_part) >= 40
    assert secret not in text and random_part not in text
    assert json.loads(text)["keys"][0]["sha256"] == record.sha256
    principal = keys.authenticate(secret)
    assert principal is not None and (principal.agent, principal.owner) == ("alice", False)
    assert keys.authenticate(secret[:-1]) is None and keys.authenticate("alice") is None
    assert [r.public() for r in keys.list()] == [record.public()]
    assert "sha256" not in record.public()


def test_revocation_reaches_a_store_that_already_read_the_file(tmp_path: Path) -> None:
    server = KeyStore(tmp_path / "keys.json")    # what a running server holds
    cli = KeyStore(tmp_path / "keys.json")       # what `amem keys` opens
    record, secret = cli.add(agent="alice")
    assert server.authenticate(secret) is not None
    cli.revoke(record.id)
    assert server.authenticate(secret) is None
    with pytest.raises(KeyError):
        cli.revoke(record.id)


@pytest.mark.parametrize("kwargs, message", [
    ({"agent": None}, "--agent"), ({"agent": "a", "owner": True}, "not both"),
    ({"agent": ""}, "agent"), ({"agent": "a", "name": "x\n"}, "printable")])
def test_a_bad_key_request_is_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeyStore(tmp_path / "keys.json").add(**kwargs)


def test_an_unsafe_key_file_is_refused_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("precious")
    link = tmp_path / "keys.json"
    link.symlink_to(target)
    keys = KeyStore(link)
    with pytest.raises(KeyFileError, match="symbolic link"):
        keys.authenticate("amem_0123456789ab_x")
    with pytest.raises(KeyFileError, match="symbolic link"):
        keys.add(agent="alice")
    assert target.read_text() == "precious" and link.is_symlink()
    link.unlink()
    _, secret = keys.add(agent="alice")
    os.chmod(keys.path, 0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        keys.authenticate(secret)


def mcp(served: Served, key: str, agent: bytes | None, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async def main() -> list[Any]:
        headers = [(b"Authorization", f"Bearer {key}".encode())]
        if agent is not None:
            headers.append((b"X-Amem-Agent", agent))
        async with http_client(served.url, headers) as client:
            return [(await client.call_tool(n, a)).structured_content for n, a in calls]

    return anyio.run(main)


def test_an_agent_key_acts_as_its_agent_and_the_header_only_narrows(served: Served) -> None:
    listed = mcp(served, served.bob, None, [("memory_list", {})])[0]  # the server's agent is alice
    assert [n["content"] for n in listed["notes"]] == ["bob's secret: the boat is called Wren"]
    assert mcp(served, served.bob, b"bob", [("memory_list", {})])[0]["count"] == 1
    with httpx.Client(timeout=30) as http:
        for agent in ("alice", "bob2", "%62ob", ""):
            res = http.get(served.root + "/lcm/assemble?budget=100", headers={
                "Authorization": f"Bearer {served.bob}", "X-Amem-Agent": agent})
            if agent == "%62ob":  # "bob" percent-escaped is bob
                assert res.status_code == 200, res.text
                continue
            assert res.status_code == 403, (agent, res.text)
            assert res.json()["error"]["field"] == "X-Amem-Agent"
        # bob's key cannot reach alice's conversation by naming her session either
        res = http.get(served.root + "/lcm/assemble?budget=100&sessionKey=agent:alice:main",
                       headers={"Authorization": f"Bearer {served.bob}"})
        assert res.status_code == 403 and res.json()["error"]["field"] == "sessionKey"
    owner = mcp(served, served.owner, b"bob", [("memory_list", {})])[0]
    assert owner["count"] == 1  # an owner key may act as anyone


def test_a_read_only_key_reads_and_changes_nothing(served: Served) -> None:
    results = mcp(served, served.alice_read, None, [
        ("memory_search", {"query": "door code"}), ("memory_add", {"text": "planted note"}),
        ("memory_delete_all", {"confirm": True}), ("lcm_grep", {"pattern": "Porto"})])
    search, add, delete_all, grep = results
    assert "2468" in json.dumps(search)
    for refused in (add, delete_all):
        assert refused["error"]["code"] == "forbidden" and "read-only" in refused["error"]["message"]
    assert "Porto" in json.dumps(grep)
    with httpx.Client(timeout=30) as http:
        res = http.post(served.root + "/lcm/ingest", json={"messages": [{"role": "user", "content": "x"}]},
                        headers={"Authorization": f"Bearer {served.alice_read}"})
        assert res.status_code == 403 and "read-only" in res.json()["error"]["message"]
        assert http.get(served.root + "/lcm/assemble?budget=100",
                        headers={"Authorization": f"Bearer {served.alice_read}"}).status_code == 200
    listed = mcp(served, served.alice, None, [("memory_list", {})])[0]
    assert [n["content"] for n in listed["notes"]] == ["alice's secret: the door code is 2468"]


def test_a_read_only_key_is_listed_only_the_tools_that_change_nothing(served: Served) -> None:
    async def listing(key: str) -> tuple[list[Any], Any]:
        async with http_client(served.url, [(b"Authorization", f"Bearer {key}".encode())]) as client:
            info = (await client.call_tool("tool_info", {"query": "memory_add"})).structured_content
            return (await client.list_tools()).tools, info

    tools, info = anyio.run(listing, served.alice_read)
    names = {t.name for t in tools}
    assert {"memory_search", "memory_get", "lcm_grep", "tool_info"} <= names
    assert not {"memory_add", "memory_delete", "memory_delete_all", "memory_update"} & names
    assert all(t.annotations.read_only_hint for t in tools)
    assert "memory_add" not in {t["name"] for t in info["tools"]}
    full, _ = anyio.run(listing, served.alice)
    assert {"memory_add", "memory_delete_all"} <= {t.name for t in full}


def _usage(served: Served, agent: str) -> list[tuple[int, str, Any]]:
    """What reads record on an agent's notes: retrieval count, access time, usage heat."""
    from amem.notes import point_id
    from amem.search.usage import FIELD

    notes, _ = served.memory.list(agent_id=agent, limit=100)
    points = served.memory.index.backend.retrieve([point_id(agent, n.id) for n in notes])
    return sorted((p.payload.get("retrieval_count", 0), p.payload.get("last_accessed", ""),
                   p.payload.get(FIELD)) for p in points)


def test_a_read_only_keys_reads_record_no_usage_on_the_notes(served: Served) -> None:
    # retrieval counts and usage heat reorder the agent's later searches: a read-only key
    # (a dashboard, a reviewer) searching and opening notes must leave them as they were
    note = served.memory.list(agent_id="alice", limit=1)[0][0]
    before = _usage(served, "alice")
    calls = [("memory_search", {"query": "door code"}), ("memory_get", {"id": note.id}),
             ("memory_search", {"query": "what is the door code"}), ("memory_get", {"id": note.id})]
    results = mcp(served, served.alice_read, None, calls)
    assert "2468" in json.dumps(results[0]) and results[1]["id"] == note.id
    assert _usage(served, "alice") == before
    # the same reads with alice's own key do record (what the check above would catch)
    mcp(served, served.alice, None, calls)
    assert _usage(served, "alice") != before


def test_a_read_only_keys_assemble_neither_compacts_nor_records_debt(served: Served) -> None:
    # GET /lcm/assemble passes the guard's method check, but at the threshold assemble
    # compacts the conversation or records debt: writes a read-only key must not make
    from lcm import LcmStore

    lcm = served.lcm
    assert isinstance(lcm, LcmStore)
    key = "agent:alice:readonly-assemble"
    lcm.ingest(key, [{"role": "user" if i % 2 == 0 else "assistant",
                      "content": f"turn {i}: the shipment {i} left the Porto warehouse today"} for i in range(200)])

    def state() -> tuple[int, int, int]:
        return (int(lcm.db.scalar("SELECT count(*) FROM summaries")),
                int(lcm.db.scalar("SELECT count(*) FROM context_items")),
                int(lcm.db.scalar("SELECT count(*) FROM compaction_debt")))

    before = state()
    with httpx.Client(timeout=60) as http:
        for budget in (400, 3600):  # over the budget (the emergency path) and at the threshold
            res = http.get(served.root + f"/lcm/assemble?budget={budget}&sessionKey={key}",
                           headers={"Authorization": f"Bearer {served.alice_read}"})
            assert res.status_code == 200, res.text
            ctx = res.json()
            assert not ctx["compacted"] and not ctx["debt_recorded"]
            assert any(w.startswith("read-only caller") for w in ctx["warnings"]), ctx["warnings"]
            assert ctx["items"] and ctx["total_tokens"] <= budget
        assert state() == before
        # alice's own key still compacts (the writes are hers to make)
        res = http.get(served.root + f"/lcm/assemble?budget=400&sessionKey={key}",
                       headers={"Authorization": f"Bearer {served.alice}"})
        assert res.status_code == 200 and res.json()["compacted"], res.text
    assert state()[0] > before[0]


def test_a_revoked_key_is_refused_by_the_running_server(served: Served) -> None:
    record, secret = served.keys.add(agent="carol")
    with httpx.Client(timeout=30) as http:
        get = lambda: http.get(served.root + "/lcm/assemble?budget=100",  # noqa: E731
                               headers={"Authorization": f"Bearer {secret}"})
        assert get().status_code == 200
        served.keys.revoke(record.id)
        res = get()
        assert res.status_code == 401 and res.json()["error"]["code"] == "unauthenticated"



def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def test_an_mcp_client_is_told_why_the_guard_refused_it(served: Served) -> None:
    # the SDK's client shows a refusal's reason only from a JSON-RPC error; any other body
    # became "Server returned an error response", and an agent whose key was revoked, or
    # that named another agent, could not tell why
    from mcp.shared.exceptions import MCPError

    record, secret = served.keys.add(agent="carol")

    async def main() -> list[str]:
        said = []
        auth = (b"Authorization", f"Bearer {secret}".encode())
        async with http_client(served.url, [auth]) as client:
            assert "error" not in (await client.call_tool("memory_status", {})).structured_content
            served.keys.revoke(record.id)
            with pytest.raises(MCPError) as revoked:
                await client.call_tool("memory_status", {})
            said.append(str(revoked.value))
        try:  # refused at the opening request: the client's task group re-raises it grouped
            async with http_client(served.url, [(b"Authorization", f"Bearer {served.bob}".encode()),
                                                (b"X-Amem-Agent", b"alice")]):
                pass
        except BaseException as exc:  # noqa: BLE001 - an ExceptionGroup around the MCPError
            found = _leaves(exc)
            assert any(isinstance(e, MCPError) for e in found), found
            said.append(" ".join(str(e) for e in found if isinstance(e, MCPError)))
        return said

    revoked, other = anyio.run(main)
    assert "key is not valid" in revoked and "revoked" in revoked
    assert "acts as agent 'bob' only" in other


def test_the_keys_commands(tmp_path: Path) -> None:
    """``amem keys``: the secret printed once, never listed, revoked by id; bad requests exit 2
    or 3 naming the problem."""
    import contextlib
    import io

    from tools.cli import main

    env = {"AMEM_HOME": str(tmp_path / "home"), "AMEM_EMBEDDER": "hashing"}

    def run(*args: str, code: int = 0) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main(list(args), env=env) == code, (args, err.getvalue())
        return out.getvalue(), err.getvalue()

    added = json.loads(run("keys", "add", "--agent", "alice", "--read-only", "--name", "ci", "--json")[0])
    assert added["agent"] == "alice" and added["read_only"] and added["secret"].startswith("amem_")
    owner_text = run("keys", "add", "--owner")[0]
    assert "owner (any agent)" in owner_text and "shown once" in owner_text
    listed = run("keys", "list", "--json")[0]
    assert added["secret"] not in listed and "amem_" not in listed and "sha256" not in listed
    assert [k["id"] for k in json.loads(listed)["keys"]][0] == added["id"]
    assert "agent 'alice'  read-only" in run("keys", "list")[0]
    assert "revoked" in run("keys", "revoke", added["id"])[0]
    assert "no key" in run("keys", "revoke", added["id"], code=3)[1]
    assert "--agent ID" in run("keys", "add", code=2)[1]
    assert "not both" in run("keys", "add", "--owner", "--agent", "bob", code=2)[1]
    keyfile = tmp_path / "home" / "keys.json"
    os.chmod(keyfile, 0o644)
    assert "chmod 600" in run("keys", "list", code=2)[1]


def test_serve_refuses_to_start_over_an_unsafe_key_file(tmp_path: Path) -> None:
    import contextlib
    import io

    from tools.cli import main

    from ..http_server import free_port

    home = tmp_path / "home"
    home.mkdir()
    (home / "keys.json").symlink_to(tmp_path / "planted.json")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["serve", "--http", "--port", str(free_port()), "--no-scheduler"],
                    env={"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing"})
    assert code == 2 and "symbolic link" in err.getvalue()
    assert not (tmp_path / "planted.json").exists() and not (home / "server.json").exists()


def test_sessions_are_counted_before_the_sdk_answers() -> None:
    """A burst of opening requests cannot overshoot the cap while none has an id yet."""
    from tools.http_guard import SessionBook

    now = [0.0]
    book = SessionBook(cap=2, idle=10, clock=lambda: now[0])
    assert book.reserve("k") and book.reserve("k") and not book.reserve("k")
    book.opened("k", None)        # refused by the SDK: its place comes back
    assert book.reserve("k")
    book.opened("k", "s1")
    book.opened("k", "s2")
    assert book.open_count("k") == 2 and not book.reserve("k") and book.reserve("other")
    book.begin("s1", "k")
    now[0] = 100.0                # s2 idle past the limit, s1 busy (an open stream)
    assert book.open_count("k") == 1
    book.end("s1", "k", closed=True)   # DELETE
    assert book.open_count("k") == 0
