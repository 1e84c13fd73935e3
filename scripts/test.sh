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
# one worker per core (pytest-xdist), a test file's tests together on one worker (their
# module fixtures are built once); AMEM_TEST_WORKERS=0 runs everything in this process
exec .venv/bin/python -m pytest -q -n "${AMEM_TEST_WORKERS:-auto}" --dist loadfile \
    "${select[@]}" "$@"
