#!/usr/bin/env bash
# idpool's benchmark: see test/bench/bench.py (or scripts/bench.sh --help).
#
#   scripts/bench.sh [--quick] [--profile] [--build DIR] [--out DIR]
#                    [--api-only | --no-api]
#
# --api-only runs only the ID API against nginx (test/bench/api.py, which
# also runs on its own: python3 test/bench/api.py --help); it needs
# nginx-light and wrk.
# The orchestration and the number crunching are one Python program (standard
# library only) driving the C load generator; this wrapper keeps the command.
# PYTHON names the interpreter (default python3).
exec "${PYTHON:-python3}" "$(dirname "$0")/../test/bench/bench.py" "$@"
