#!/usr/bin/env bash
# idpool's benchmark: see test/bench/bench.py (or scripts/bench.sh --help).
#
#   scripts/bench.sh [--quick] [--profile] [--build DIR] [--out DIR]
#
# The orchestration and the number crunching are one Python program (standard
# library only) driving the C load generator; this wrapper keeps the command.
# PYTHON names the interpreter (default python3).
exec "${PYTHON:-python3}" "$(dirname "$0")/../test/bench/bench.py" "$@"
