#!/usr/bin/env bash
# Set up a virtualenv with the project and its dev extras, then run the test suite.
#
#   bash scripts/test.sh            the everyday suite: every test not marked slow
#   bash scripts/test.sh --all      every test, the slow ones too (what CI runs: .ci/run)
#   bash scripts/test.sh --slow     only the slow ones
#
# Any other argument goes to pytest (bash scripts/test.sh tests/amem -x).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
select=(-m "not slow")
case "${1:-}" in
    --all) select=(); shift ;;
    --slow) select=(-m slow); shift ;;
esac
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
exec .venv/bin/python -m pytest -q "${select[@]}" "$@"
