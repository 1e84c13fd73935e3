"""``tools.runtime.Runtime``: the one place a process builds its stores (issue 17 part 3).

It opens nothing until asked, opens each part once, shares the embedder between the two stores,
closes what it opened (and then refuses to open again), and says which setting is wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amem.errors import ConfigError
from amem.kernel.errors import MemoryToolError
from tools.runtime import Runtime


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", **extra}


def test_nothing_opens_until_asked_and_each_part_opens_once(tmp_path: Path) -> None:
    runtime = Runtime.load(_env(tmp_path))
    assert list(tmp_path.iterdir()) == []  # settings only: no store directory, no lcm file
    with runtime:
        memory, lcm = runtime.memory, runtime.lcm
        assert runtime.memory is memory and runtime.lcm is lcm
        assert memory.embedder is runtime.embedder  # one embedder for both stores
        assert lcm.semantic.embedder is runtime.embedder
        assert runtime.llm is None and memory.llm is None  # no llm_base_url: offline, and said so
        assert Path(lcm.config.database_path) == tmp_path / "lcm.db"
        assert memory.add("the runtime opened me", enrich=False).status == "created"


def test_close_closes_both_stores_and_a_closed_runtime_opens_nothing(tmp_path: Path) -> None:
    with Runtime.load(_env(tmp_path)) as runtime:
        runtime.memory.add("kept across runtimes", enrich=False)
        runtime.lcm.ingest("agent:main:main", [{"role": "user", "content": "hello"}])
    runtime.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        runtime.memory
    with pytest.raises(RuntimeError, match="closed"):
        runtime.lcm
    # Both stores were really closed: a new runtime opens the embedded store (its lock is free)
    # and sees what the first one wrote.
    with Runtime.load(_env(tmp_path)) as again:
        assert again.memory.count() == 1
        assert again.lcm.status().to_dict()["messages"] == 1


def test_the_agent_comes_from_the_argument_then_the_environment_then_the_config(tmp_path: Path) -> None:
    assert Runtime.load(_env(tmp_path)).agent_id == "default"
    assert Runtime.load(_env(tmp_path, AMEM_AGENT="env-agent")).agent_id == "env-agent"
    assert Runtime.load(_env(tmp_path, AMEM_AGENT="env-agent"), agent="flag").agent_id == "flag"


def test_two_names_for_the_conversation_store_are_refused(tmp_path: Path) -> None:
    env = _env(tmp_path, AMEM_LCM_URL=str(tmp_path / "a.db"), LCM_DATABASE_PATH=str(tmp_path / "b.db"))
    with Runtime.load(env) as runtime:
        with pytest.raises(ConfigError) as caught:
            runtime.lcm
        assert caught.value.key == "AMEM_LCM_URL"
        assert isinstance(caught.value, MemoryToolError)  # the CLI maps it to config_error, exit 2


def test_a_bad_embedder_names_the_key_and_lcm_still_opens(tmp_path: Path) -> None:
    with Runtime.load(_env(tmp_path, AMEM_EMBEDDER="hashing-x")) as runtime:
        with pytest.raises(ConfigError) as caught:
            runtime.memory
        assert caught.value.key == "embedder"
        # conversations work without semantic recall (a logged warning says why)
        assert runtime.lcm.semantic.embedder is None
