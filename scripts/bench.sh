#!/usr/bin/env bash
# idpool's benchmark: see test/bench/bench.py (or scripts/bench.sh --help).
#
#   scripts/bench.sh [--quick] [--profile] [--pin] [--build DIR] [--out DIR]
#                    [--api-only | --no-api] [--client-only | --no-client]
#   scripts/bench.sh --cluster [--quick] [--build DIR] [--out DIR]
#
# --api-only runs only the ID API against nginx (test/bench/api.py, which
# also runs on its own: python3 test/bench/api.py --help); it needs
# nginx-light and wrk.
# --client-only runs only the client libraries (test/bench/client.py, also
# on its own: python3 test/bench/client.py --help): idpool_next() against an
# in-process atomic counter, its latency under sustained load, and the
# Python client against itertools.count() (that part needs python3-redis);
# --no-client leaves that section out of the full run.
# --cluster runs only the Redis Cluster section (test/bench/cluster.py) on a
# throwaway Cluster of three primaries with a replica each.
# The orchestration and the number crunching are one Python program (standard
# library only) driving the C load generator; this wrapper keeps the command.
# PYTHON names the interpreter (default python3).
exec "${PYTHON:-python3}" "$(dirname "$0")/../test/bench/bench.py" "$@"
