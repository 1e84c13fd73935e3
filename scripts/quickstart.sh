#!/usr/bin/env bash
# The main job on the embedded default: install, import the example notes, search them.
# The store lives in ./.amem (AMEM_HOME) so trying it leaves your data home alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { printf '\n== %s\n' "$*" >&2; }
[ -x .venv/bin/python ] || { say "creating the virtualenv .venv"; "$PY" -m venv .venv; }
say "installing amem and its dependencies into .venv (about a minute on a fresh machine)"
# pip's own lines, one per package, so a minute of downloading is not a silent minute
pip_lines() { grep --line-buffered -E '^(Collecting|Installing|Successfully)' >&2 || true; }
.venv/bin/python -m pip install --upgrade pip 2>&1 | pip_lines
.venv/bin/python -m pip install -e . 2>&1 | pip_lines
export AMEM_HOME="${AMEM_HOME:-$PWD/.amem}"
# Notes belong to an agent: the quickstart, the commands it suggests and the MCP host entry it
# prints all act as the same one, so the host sees what was imported here.
export AMEM_AGENT="${AMEM_AGENT:-me}"
say "importing examples/notes.jsonl as agent '$AMEM_AGENT' into the store at $AMEM_HOME (the first run also prepares the embedding model, about 10 s)"
.venv/bin/amem import examples/notes.jsonl
for query in "what does Alice like to drink?" "季度复盘会在哪里开？"; do
    say "searching it: $query"
    .venv/bin/amem search "$query"
done
say "done: run 'AMEM_HOME=$AMEM_HOME AMEM_AGENT=$AMEM_AGENT .venv/bin/amem search \"...\"' to search this store again ('amem status' shows what is stored)"
say "to give an MCP host (Claude Desktop, Cursor, ...) this memory, add this entry to its config:"
cat >&2 <<JSON
{
  "mcpServers": {
    "amem": {
      "command": "$PWD/.venv/bin/amem",
      "args": ["serve", "--agent", "$AMEM_AGENT"],
      "env": {"AMEM_HOME": "$AMEM_HOME"}
    }
  }
}
JSON
