#!/usr/bin/env bash
# The main job on the embedded default: install, import the example notes, search them.
# The store lives in ./.amem (AMEM_HOME) so trying it leaves your data home alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
export AMEM_HOME="${AMEM_HOME:-$PWD/.amem}"
.venv/bin/amem import examples/notes.jsonl
.venv/bin/amem search "what does Alice like to drink?"
.venv/bin/amem search "季度复盘会在哪里开？"
.venv/bin/amem status
