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
# The suite's temporary folders (every store, home, server data directory and browser profile
# it makes) go to a private folder in RAM when /dev/shm is a tmpfs with room: on this machine's
# disk (ext4 mounted with discard) the same tests spent a third of their CPU in the kernel and
# waited on it besides (four heavy test files: 67.5 s on disk, 39.6 s in RAM). The few tests of
# what a disk does that tmpfs does not (holes an open reads, pages a close evicts) still run on
# the disk: tests/conftest.py's disk_tmp_path, in AMEM_TEST_DISK_TMPDIR. AMEM_TEST_TMPDIR=DIR
# puts the folders in DIR instead; AMEM_TEST_TMPDIR=disk leaves TMPDIR as it is.
choose_tmpdir() {
    local shm=/dev/shm free_kb stale
    # a run killed outright leaves its folder; it is removed once its process is gone
    for stale in "$shm"/amem-tests.*/; do
        [ -O "$stale" ] && [ -f "$stale/.owner" ] || continue
        kill -0 "$(cat "$stale/.owner")" 2> /dev/null || rm -rf "$stale"
    done
    [ "$(stat -f -c %T "$shm" 2> /dev/null)" = tmpfs ] || return 1
    free_kb=$(df -Pk "$shm" | awk 'NR == 2 {print $4}')
    [ "${free_kb:-0}" -ge $(( 8 * 1024 * 1024 )) ] || return 1  # the suite's peak, with room
    mktemp -d "$shm/amem-tests.XXXXXX"
}
made=""
case "${AMEM_TEST_TMPDIR:-}" in
    disk) ;;
    "") if made=$(choose_tmpdir); then
            # traversable as /tmp is (PostgreSQL's tests run initdb as its own user in a
            # folder of theirs here); not listable, and what the tests make inside is 0700
            chmod 711 "$made"
            echo $$ > "$made/.owner"
            # the disk's own folder, for the tests of what a disk does (above)
            export AMEM_TEST_DISK_TMPDIR="${TMPDIR:-/tmp}"
            export TMPDIR="$made"
            trap 'rm -rf "$made"' EXIT
        fi ;;
    *) mkdir -p "$AMEM_TEST_TMPDIR" && export TMPDIR="$AMEM_TEST_TMPDIR" ;;
esac
.venv/bin/python -m pytest -q -n "${AMEM_TEST_WORKERS:-$(( cores * 2 ))}" --dist loadfile \
    "${select[@]}" "$@"
