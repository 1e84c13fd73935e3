"""Fixtures of the standing security suite: a real HTTP server on 127.0.0.1 with a key file
holding one key of each kind, and stores whose contents the refused requests must not change."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amem import MemoryStore
from amem.embed.hashing import HashingEmbedder
from tools import ToolFacade
from tools.http_guard import GuardConfig
from tools.keys import KeyStore

from ..http_server import OWNER_SECRET, running_http


@dataclass(frozen=True)
class Served:
    """The server's url and root, its stores, and one secret per kind of key."""

    url: str
    root: str
    memory: MemoryStore
    lcm: object
    keys: KeyStore
    alice: str          # agent key of alice
    bob: str            # agent key of bob
    alice_read: str     # read-only agent key of alice
    owner: str          # owner key


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from lcm import LcmConfig, LcmStore

    home: Path = tmp_path_factory.mktemp("secure")
    keys = KeyStore(home / "keys.json")
    secrets = {name: keys.add(**kw)[1] for name, kw in {
        "alice": {"agent": "alice"}, "bob": {"agent": "bob"},
        "alice_read": {"agent": "alice", "read_only": True},
        "owner": {"agent": None, "owner": True}}.items()}
    with MemoryStore(":memory:", embedder=HashingEmbedder(), agent_id="default") as memory, \
            LcmStore(":memory:", LcmConfig(log_file_enabled=False)) as lcm:
        memory.add("alice's secret: the door code is 2468", [], enrich=False, agent_id="alice")
        memory.add("bob's secret: the boat is called Wren", [], enrich=False, agent_id="bob")
        lcm.ingest("agent:alice:main", [{"role": "user", "content": "alice plans a trip to Porto"}])
        facade = ToolFacade(memory, lcm, agent_id="alice")
        guard = GuardConfig(keys=keys, record_secret=OWNER_SECRET, sessions_per_key=8,
                            session_idle=30)
        with running_http(facade, guard=guard) as url:
            yield Served(url, url.removesuffix("/mcp"), memory, lcm, keys, **secrets)
