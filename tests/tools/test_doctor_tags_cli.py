"""``amem doctor`` names the notes holding tags an older amem wrote, and ``--fix`` tidies them
(the command in this process: ``tests/amem/store/test_doctor_tags.py`` holds the cases)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from amem import MemoryStore
from amem.config import load_config
from amem.embed.hashing import HashingEmbedder
from tools.cli import main

from .test_cli_console import AGENT, base_env


def _doctor(env: dict[str, str], *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["doctor", *args], env=env)
    return code, out.getvalue()


def test_doctor_names_untidy_tags_and_fix_tidies_them(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(), agent_id=AGENT) as store:
        nid = store.add("Carol bakes bread on Sundays", tags=["baking"]).id
        # as a version before the '#' check and the tag keys wrote them
        store.index.update_payload(nid, AGENT, {"tags": ["#", "Baking", "#baking"]})
    code, said = _doctor(env)
    assert code == 0 and f"{AGENT}/{nid}: #, Baking, #baking" in said
    assert "keeps each tag once" in said  # the warning names the fix
    code, fixed = _doctor(env, "--fix", "--json")
    assert code == 0 and json.loads(fixed)["memory"]["tags_tidied"] == 1
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder(), agent_id=AGENT) as store:
        assert store.get(nid).tags == ["Baking"]
    assert json.loads(_doctor(env, "--json")[1])["memory"]["untidy_tags"] == 0
