"""No existence oracle: another family's msg_/sum_/file_/conversation ids answer exactly like missing ones."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from amem import MemoryStore
from lcm import LcmConfig, LcmStore
from tools import ToolFacade


@pytest.fixture
def stores(memory: MemoryStore) -> Iterator[tuple[ToolFacade, ToolFacade, LcmStore]]:
    cfg = LcmConfig(leaf_chunk_tokens=120, fresh_tail_count=2, large_file_threshold_tokens=200, log_file_enabled=False)
    with LcmStore(":memory:", cfg) as lcm:
        for agent in ("alice", "mallory"):
            lcm.ingest(f"agent:{agent}:main", [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"{agent} note {i} about the deploy on host {i}"}
                for i in range(12)] + [{"role": "user", "content": f"{agent} log: " + "line of output " * 200}])
            assert lcm.compact(f"agent:{agent}:main", force=True).ran
        yield (ToolFacade(memory, lcm, agent_id="alice"), ToolFacade(memory, lcm, agent_id="mallory"), lcm)


def _theirs(lcm: LcmStore) -> dict[str, str]:
    conv = lcm.conversations("agent:mallory:main")[0].id
    one = lcm.db.scalar
    return {
        "msg": f"msg_{one('SELECT id FROM messages WHERE conversation_id = ? LIMIT 1', (conv,))}",
        "sum": one("SELECT summary_id FROM summaries WHERE conversation_id = ? LIMIT 1", (conv,)),
        "file": one("SELECT file_id FROM large_files WHERE conversation_id = ? LIMIT 1", (conv,)),
        "conv": str(conv),
    }


MISSING = {"msg": "msg_987654", "sum": "sum_0123456789abcdef", "file": "file_0123456789abcdef", "conv": "987654"}


def _shape(out: dict[str, Any], the_id: str) -> dict[str, Any]:
    assert set(out) == {"error"}, out
    return {**out["error"], "message": re.sub(re.escape(the_id), "<id>", out["error"]["message"])}


def _calls(kind: str, the_id: str) -> list[tuple[str, dict[str, Any]]]:
    if kind == "conv":
        return [("lcm_grep", {"pattern": "deploy", "conversationId": int(the_id)})]
    calls: list[tuple[str, dict[str, Any]]] = [("lcm_describe", {"id": the_id})]
    if kind == "file":  # a file named to grep answers like describe does
        calls.append(("lcm_grep", {"pattern": ".", "scope": "files", "fileIds": [the_id]}))
    if kind == "sum":
        calls += [("lcm_expand", {"summaryIds": [the_id]}),
                  ("lcm_expand_query", {"prompt": "what host?", "summaryIds": [the_id]})]
    return calls


@pytest.mark.parametrize("kind", ["msg", "sum", "file", "conv"])
def test_another_familys_id_and_a_missing_one_answer_alike(
    stores: tuple[ToolFacade, ToolFacade, LcmStore], kind: str
) -> None:
    alice, mallory, lcm = stores
    theirs = _theirs(lcm)[kind]
    for (name, args), (_, missing_args) in zip(_calls(kind, theirs), _calls(kind, MISSING[kind])):
        assert "error" not in mallory.call(name, args), (name, args)  # the owner reads it
        foreign = _shape(alice.call(name, args), theirs)
        missing = _shape(alice.call(name, missing_args), MISSING[kind])
        assert foreign == missing and foreign["code"] == "not_found", (name, foreign, missing)
        assert "history" not in foreign["message"]  # no hint that the id exists elsewhere


def test_the_python_api_scopes_the_same_way(stores: tuple[ToolFacade, ToolFacade, LcmStore]) -> None:
    from lcm.errors import LcmNotFoundError

    _, _, lcm = stores
    theirs = _theirs(lcm)
    for kind in ("msg", "sum", "file"):
        with pytest.raises(LcmNotFoundError) as foreign:
            lcm.describe(theirs[kind], session_key="agent:alice:main")
        with pytest.raises(LcmNotFoundError) as missing:
            lcm.describe(MISSING[kind], session_key="agent:alice:main")
        assert str(foreign.value).replace(theirs[kind], "<id>") == str(missing.value).replace(MISSING[kind], "<id>")
        assert lcm.describe(theirs[kind]).kind in ("message", "summary", "file")  # unscoped: trusted caller
