#!/usr/bin/env bash
# Set up a virtualenv with the project and its dev extras, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
exec .venv/bin/python -m pytest -q "$@"
