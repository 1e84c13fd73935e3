"""Issue 28's papercuts a newcomer hits at the front door, through the installed ``amem`` script.

Each test runs the console script next to this interpreter (as a user types it) on a fresh
home with the hashing embedder; checks that need no process (config loading) run in-process.
A script start costs 1-3 s on a busy machine, so the tests that need several are marked slow
(CI runs them; `-m "not slow"` skips them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amem.errors import ConfigError
from tools.settings import load_settings

AMEM = Path(sys.executable).with_name("amem")
ROOT = Path(__file__).resolve().parents[2]


def base_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "front",
                "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def amem(env: dict[str, str], *args: str, code: int = 0, stdin: str | None = None,
         cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(AMEM), *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=cwd)
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return base_env(tmp_path / "home")


# -- 1. common options before the command; did you mean ---------------------------------------


@pytest.mark.slow
def test_common_options_before_the_command_work_as_after_it(env: dict[str, str],
                                                             tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("rrf_kk = 3\n", encoding="utf-8")
    for argv in (["--config", str(bad), "status"], ["status", "--config", str(bad)]):
        err = amem(env, *argv, code=2).stderr
        assert "invalid choice" not in err
        assert "unknown config key 'rrf_kk'" in err and "did you mean 'rrf_k'?" in err
    amem(env, "add", "Alice prefers green tea", "--no-enrich")
    before = json.loads(amem(env, "-v", "--json", "--agent", "front", "list").stdout)
    after = json.loads(amem(env, "list", "-v", "--json", "--agent", "front").stdout)
    assert before == after and before["count"] == 1
    # `lcm`'s own level keeps an option given there (its subcommand's parser used to erase it)
    other = tmp_path / "other"
    amem(env, "lcm", "--home", str(other), "status")
    assert other.is_dir() and any(other.iterdir())


def test_an_unknown_option_or_command_gets_the_nearest_spelling(env: dict[str, str]) -> None:
    err = amem(env, "search", "tea", "--limt", "3", code=2).stderr
    assert "unrecognized arguments: --limt 3; did you mean --limit?" in err
    assert "usage: amem search" in err  # the command's own usage, not the top level's
    err = amem(env, "serach", "tea", code=2).stderr
    assert "did you mean search?" in err


def test_unknown_config_keys_and_variables_get_did_you_mean(tmp_path: Path) -> None:
    home = {"AMEM_HOME": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"did you mean 'AMEM_EMBEDDER'\?"):
        load_settings(env={**home, "AMEM_EMBEDER": "hashing"})
    toml = tmp_path / "c.toml"
    toml.write_text("schedule_houre = 3\n[lcm]\nfreshTailCont = 3\n", encoding="utf-8")
    # a scheduler key in the shared table is a fine suggestion too
    with pytest.raises(ConfigError, match=r"did you mean 'schedule_hour'\?"):
        load_settings(toml, env=home)
    toml.write_text("[lcm]\nfreshTailCont = 3\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"did you mean 'freshTailCount'\?"):
        load_settings(toml, env=home)
    with pytest.raises(Exception, match=r"did you mean 'LCM_FRESH_TAIL_COUNT'\?"):
        load_settings(env={**home, "LCM_FRESH_TAIL_CONT": "3"})
    toml.write_text("nonsense_entirely = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:  # nothing close: no guess
        load_settings(toml, env=home)
    assert "did you mean" not in str(caught.value)


# -- 2. the commands a running server does not route say so --------------------------------------


@pytest.mark.slow
def test_commands_not_routed_through_a_running_server_say_so(env: dict[str, str],
                                                            tmp_path: Path) -> None:
    # This process holds the store and its record says it is `amem serve --http` (the
    # discovery checks what a real server's record holds: pid = the lock's holder, mode 0600).
    from amem import MemoryStore
    from amem.config import load_config
    from amem.embed.hashing import HashingEmbedder
    from tools.remote import record_path

    src = tmp_path / "notes.jsonl"
    src.write_text('{"text": "one note"}\n', encoding="utf-8")
    cfg = load_config(env={k: v for k, v in env.items() if k.startswith("AMEM_")})
    with MemoryStore(None, config=cfg, embedder=HashingEmbedder()):
        record = record_path(env["AMEM_HOME"])
        record.write_text(json.dumps({"transport": "http", "pid": os.getpid(), "token": "t",
                                      "url": "http://127.0.0.1:9/mcp"}))
        os.chmod(record, 0o600)
        said = {command: amem(env, *argv, code=4).stderr for command, argv in (
            ("import", ["import", str(src)]),
            ("consolidate", ["consolidate"]), ("reembed", ["reembed", "--to", "hashing"]))}
        record.unlink()
    for command, err in said.items():
        assert (f"`amem {command}` is not routed through the running `amem serve --http` at "
                f"http://127.0.0.1:9/mcp (pid {os.getpid()})") in err, err
        assert "Stop the server" in err and "Run `amem serve` in the owning process" not in err
    assert "memory_consolidate" in said["consolidate"]


# -- 3. one exit code for a missing input file ---------------------------------------------------


def test_a_missing_file_is_the_same_usage_error_for_import_and_lcm_ingest(
        env: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.jsonl")
    errors = [json.loads(amem(env, *argv, "--json", code=2).stdout)["error"] for argv in (
        ["import", missing], ["lcm", "ingest", missing, "--session-key", "agent:front:main"])]
    assert errors[0] == errors[1] == {"code": "invalid_argument", "field": "file",
                                      "message": f"no such file: {missing}"}


# -- 4. [tools.descriptions]: checked by every command, shown by `amem tools` --------------------


@pytest.mark.slow
def test_tool_descriptions_are_checked_everywhere_and_amem_tools_lists_what_the_server_serves(
        env: dict[str, str], tmp_path: Path) -> None:
    import anyio
    from mcp import Client

    from tools import ToolFacade
    from tools.mcp_server import build_server

    config = tmp_path / "amem.toml"
    config.write_text('[tools.descriptions]\nmemory_serch = "Find notes."\n', encoding="utf-8")
    for argv in (["status"], ["tools"], ["search", "tea"]):
        err = amem(env, *argv, "--config", str(config), code=2).stderr
        assert ("tools.descriptions.memory_serch: there is no tool named 'memory_serch'; "
                "did you mean 'memory_search'?") in err, (argv, err)
    mine = "Find the notes of this deployment's user about a topic. Returns {results}."
    config.write_text(f'[tools.descriptions]\nmemory_search = "{mine}"\n', encoding="utf-8")
    printed = json.loads(amem(env, "tools", "--format", "mcp", "--config", str(config)).stdout)
    facade = ToolFacade(None, None, agent_id="default", lcm_listed=True,
                        descriptions={"memory_search": mine})

    async def served() -> list[dict[str, object]]:
        async with Client(build_server(facade)) as client:
            listed = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]

    entries = anyio.run(served)
    assert printed == entries
    search = next(t for t in printed if t["name"] == "memory_search")
    assert search["description"] == mine
    assert search["annotations"]["readOnlyHint"] is True and "outputSchema" in search
    anthropic = json.loads(amem(env, "tools", "--format", "anthropic", "--config",
                                str(config)).stdout)
    assert next(t for t in anthropic if t["name"] == "memory_search")["description"] == mine


# -- 5. import: where a line is broken, and skipped lines on stderr -----------------------------


@pytest.mark.slow
def test_a_line_cut_short_is_reported_at_its_column_and_skipped_lines_go_to_stderr(
        env: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "notes.jsonl"
    broken = '{"text": "missing brace"'
    src.write_text('{"text": "a good note"}\n' + broken + "\n", encoding="utf-8")
    where = (f"{src}:2: the line is not valid JSON: Expecting ',' delimiter at column "
             f"{len(broken) + 1}")
    assert where in amem(env, "import", str(src), "--no-enrich", code=2).stderr
    done = amem(env, "import", str(src), "--no-enrich", "--skip-invalid", code=1)
    assert f"amem: skipped {where}" in done.stderr
    assert "not valid JSON" not in done.stdout and "created 1" in done.stdout
    # an export line cut short: the same position
    export = tmp_path / "export.jsonl"
    amem(env, "export", str(export))
    lines = export.read_text(encoding="utf-8").splitlines()
    cut = lines[-1][:-1]  # the closing brace gone
    export.write_text("\n".join([*lines[:-1], cut]) + "\n", encoding="utf-8")
    err = amem(base_env(tmp_path / "other"), "import", str(export), "--from-export",
               code=2).stderr
    assert f"at column {len(cut) + 1}" in err and "column 1\n" not in err


# -- 6. a store opens with the embedder that wrote it --------------------------------------------


@pytest.mark.slow
def test_after_reembed_a_plain_search_opens_the_store_with_its_new_embedder(
        tmp_path: Path) -> None:
    env = base_env(tmp_path / "home")
    del env["AMEM_EMBEDDER"]  # as a user types it: no embedder configured anywhere
    amem(env, "add", "Alice prefers green tea", "--no-enrich", "--embedder", "hashing-32")
    amem(env, "reembed", "--to", "hashing")
    hits = json.loads(amem(env, "search", "green tea", "--json").stdout)["results"]
    assert hits[0]["content"] == "Alice prefers green tea"
    status = json.loads(amem(env, "status", "--json").stdout)
    assert json.dumps(status).count("hashing-v1-d64") >= 1
    # an embedder named explicitly is obeyed, and the refusal says which one to use and how
    err = amem({**env, "AMEM_EMBEDDER": "hashing-32"}, "search", "tea", code=1).stderr
    assert "written by 'hashing-v1-d64'" in err and "--embedder hashing " in err
    assert "AMEM_EMBEDDER=hashing" in err


# -- 7, 8. amem lcm: the lcm_grep tool's defaults, readable output -------------------------------


def _conversation(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A home whose agent `front` has one main session: a flight, a large tool output stored
    as a file (the rollback token on its line 300), and 20 deploy messages."""
    env = base_env(tmp_path / "home", LCM_LARGE_FILE_TOKEN_THRESHOLD="1000")
    lines = [f"line {i}: ordinary log output" for i in range(1, 400)]
    lines[299] = "the rollback token is RB-4711"
    talk = [{"role": "user", "content": "My flight to Lisbon is TP1234 on May 3rd"},
            {"role": "tool", "content": "\n".join(lines)}]
    talk += [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"deploy step {i}: service {i} failed with exit code 137"}
             for i in range(20)]
    src = tmp_path / "talk.jsonl"
    src.write_text("".join(json.dumps(m) + "\n" for m in talk), encoding="utf-8")
    amem(env, "lcm", "ingest", str(src), "--session-key", "agent:front:main")
    return env, src


@pytest.mark.slow
def test_lcm_grep_has_the_tools_defaults_and_a_files_scope(tmp_path: Path) -> None:
    env, _ = _conversation(tmp_path)
    # no scope: the agent's main session; no mode: an RE2 regular expression
    plain = json.loads(amem(env, "lcm", "grep", r"TP\d{4}", "--json").stdout)
    assert [h["snippet"] for h in plain["hits"]] == ["My flight to Lisbon is TP1234 on May 3rd"]
    assert json.loads(amem(env, "lcm", "grep", r"TP\d{4}", "--json", "--agent",
                           "someone").stdout)["hits"] == []  # another agent's main session
    files = json.loads(amem(env, "lcm", "grep", r"RB-\d+", "--scope", "files",
                            "--json").stdout)["hits"]
    assert [(h["kind"], h["line"]) for h in files] == [("file", 300)]
    only = amem(env, "lcm", "grep", r"RB-\d+", "--scope", "files", "--file-id",
                files[0]["id"]).stdout
    assert only.startswith(f"file {files[0]['id']}")
    assert "--file-id needs --scope files" in amem(env, "lcm", "grep", "x", "--file-id",
                                                    files[0]["id"], code=2).stderr
    table = amem(env, "lcm", "grep", "exit code 137", "-n", "2").stdout.splitlines()
    assert [line.split()[0] for line in table[:2]] == ["message", "message"]  # not "mes"


def test_lcm_status_and_expand_print_for_a_reader(tmp_path: Path) -> None:
    env, _ = _conversation(tmp_path)
    env["LCM_ENABLE_SUMMARY_THINKING"] = "true"  # a lossless-claw key lcm ignores
    status = amem(env, "lcm", "status").stdout
    assert "ignored_keys: LCM_ENABLE_SUMMARY_THINKING" in status and "ignoredKeys" not in status
    expanded = amem(env, "lcm", "expand", "--query", "deploy step 3").stdout
    assert '{"' not in expanded  # no inline JSON
    assert "\n      deploy step 3: service 3 failed with exit code 137\n" in expanded


# -- 8. cosmetics: stdin notes, linked notes, Markdown headings ---------------------------------


@pytest.mark.slow
def test_notes_read_as_written_and_linked_notes_show_as_links(env: dict[str, str],
                                                              tmp_path: Path) -> None:
    from amem.enrich.context import first_informative_sentence

    added = json.loads(amem(env, "add", "-", "--json", stdin="Alice prefers green tea\n").stdout)
    assert json.loads(amem(env, "get", added["id"], "--json").stdout)["content"] == (
        "Alice prefers green tea")  # echo's line break is not part of the note
    for text in ("Alice drinks green tea with Bob at noon", "Alice went to Lisbon in May"):
        amem(env, "add", text)
    hits = json.loads(amem(env, "search", "green tea", "-n", "1", "--json").stdout)["results"]
    assert [h["via"] for h in hits][:1] == ["match"] and "link" in {h["via"] for h in hits}
    table = amem(env, "search", "green tea", "-n", "1").stdout
    body, _, linked = table.partition("\nlinked from the matches (")
    assert "0.0000" not in table and linked, table  # links are not rows with a zero score
    assert [line.split()[0] for line in body.splitlines()[2:]] == ["1"]
    assert all(line.split()[0] in ("from", "link") for line in linked.splitlines()[1:])
    # an imported Markdown section: its title is not glued to the paragraph it titles
    md = tmp_path / "deploy.md"
    md.write_text("# Deploy notes\n\nThe staging database moved to db-2.internal on Monday.\n",
                  encoding="utf-8")
    amem(env, "import", str(md))
    listed = amem(env, "list", "-n", "50").stdout
    assert "Deploy notes — The staging database moved" in listed
    assert first_informative_sentence(
        "# Deploy notes\nThe staging database moved to db-2.internal on Monday.",
        ["staging database"]) == "The staging database moved to db-2.internal on Monday."


@pytest.mark.slow
def test_the_import_bar_ends_in_one_line_before_the_index_build_is_announced(
        tmp_path: Path) -> None:
    from .test_cli_console import _run_on_a_terminal

    env = base_env(tmp_path / "home", AMEM_OPTIMIZE_AFTER="50")  # a build is due at the end
    src = tmp_path / "notes.jsonl"
    src.write_text("".join(json.dumps({"text": f"note {i} about topic {i % 7}"}) + "\n"
                           for i in range(120)), encoding="utf-8")
    code, out, err = _run_on_a_terminal(env, "import", str(src), "--no-enrich")
    assert code == 0 and "created 120" in out
    # what the terminal shows: the last redraw of each line
    shown = [line.split("\r")[-1] for line in err.replace("\r\n", "\n").split("\n")
             if line.split("\r")[-1].strip()]
    assert [line.startswith("import: 100%") for line in shown] == [True, False], shown
    assert shown[1].startswith("building the search index")


def test_reembed_takes_the_homes_conversation_store_along(tmp_path: Path) -> None:
    """The conversation store keeps the embedder its vectors were made by and refuses semantic
    recall with another; after `amem reembed` of the notes every semantic grep of the home was
    refused until `amem lcm embed --switch-embedder`. The home's own file follows now."""
    env = base_env(tmp_path / "home")
    del env["AMEM_EMBEDDER"]
    amem(env, "add", "Alice prefers green tea", "--no-enrich", "--embedder", "hashing-32")
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"role": "user", "content": "the ledger closes on Friday"}) + "\n",
                   encoding="utf-8")
    amem(env, "lcm", "ingest", str(src), "--session-key", "agent:front:main")
    amem(env, "lcm", "embed")
    done = json.loads(amem(env, "reembed", "--to", "hashing", "--json").stdout)
    assert "now uses hashing" in done["conversations"], done
    amem(env, "lcm", "embed")
    hits = json.loads(amem(env, "lcm", "grep", "ledger Friday", "--mode", "semantic",
                           "--session-key", "agent:front:main", "--json").stdout)["hits"]
    assert hits and "ledger" in hits[0]["snippet"]
