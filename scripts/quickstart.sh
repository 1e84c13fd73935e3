#!/usr/bin/env bash
# The main job on the embedded default: install, import the example notes, search them.
# The store lives in ./.amem (AMEM_HOME) so trying it leaves your data home alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { printf '\n== %s\n' "$*" >&2; }
[ -x .venv/bin/python ] || { say "creating the virtualenv .venv"; "$PY" -m venv .venv; }
say "installing amem and its dependencies into .venv (about a minute on a fresh machine)"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
export AMEM_HOME="${AMEM_HOME:-$PWD/.amem}"
say "importing examples/notes.jsonl into the store at $AMEM_HOME (AMEM_HOME; the first run also prepares the embedding model)"
.venv/bin/amem import examples/notes.jsonl
say "searching it"
.venv/bin/amem search "what does Alice like to drink?"
.venv/bin/amem search "季度复盘会在哪里开？"
.venv/bin/amem status
say "done: run 'AMEM_HOME=$AMEM_HOME .venv/bin/amem search \"...\"' to search this store again"
say "to give an MCP host (Claude Desktop, Cursor, ...) this memory, add this entry to its config:"
cat >&2 <<JSON
{
  "mcpServers": {
    "amem": {
      "command": "$PWD/.venv/bin/amem",
      "args": ["serve", "--agent", "me"],
      "env": {"AMEM_HOME": "$AMEM_HOME"}
    }
  }
}
JSON
