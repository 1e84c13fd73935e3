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
# Compile the project's modules once: an editable install leaves them as sources, and where
# PYTHONDONTWRITEBYTECODE is set (this machine, CI) no process writes their bytecode, so each
# of the suite's ~2,000 `amem` subprocesses compiled every module it imports again (0.63 s of
# CPU for `amem list` against 0.44 s compiled). compileall writes whatever that variable says.
.venv/bin/python -m compileall -q -j 0 amem lcm tools scheduler benchmarks > /dev/null
# two workers per core (pytest-xdist): many tests wait on a subprocess, a server or a deadline,
# and one worker per core left the CPU a quarter idle (the whole suite on 2 cores: 2 workers
# 147% CPU, 689 s; 3 workers 170%, 620 s; 4 workers 179%, 598 s). A test file's tests run
# together on one worker (their module fixtures are built once); AMEM_TEST_WORKERS=0 runs
# everything in this process.
cores=$(nproc 2>/dev/null || echo 1)
exec .venv/bin/python -m pytest -q -n "${AMEM_TEST_WORKERS:-$(( cores * 2 ))}" --dist loadfile \
    "${select[@]}" "$@"
