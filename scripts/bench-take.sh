#!/usr/bin/env bash
# The cost of idpool_take against plain LPOP, same batch size, same Redis,
# side by side in one run: test/bench/take.py.
#
#   scripts/bench-take.sh [RUNS] [BATCH] [REQUESTS]
#
# PYTHON names the interpreter (default python3).
exec "${PYTHON:-python3}" "$(dirname "$0")/../test/bench/take.py" "$@"
