#!/usr/bin/env bash
# How fast one idpoold fills one application's pool, and how many MySQL
# writes it makes per million IDs while clients drain it: test/bench/refill.py.
#
#   scripts/bench-refill.sh [RUNS] [POOL] [DRAIN_IDS]
#
# PYTHON names the interpreter (default python3); BUILD the build directory.
exec "${PYTHON:-python3}" "$(dirname "$0")/../test/bench/refill.py" "$@"
