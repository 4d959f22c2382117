#!/usr/bin/env bash
# The cost of idpool_take (limits enforced inside Redis) against plain LPOP,
# same batch size, same Redis, side by side in one run.
#
#   scripts/bench-take.sh [RUNS] [BATCH] [REQUESTS]
#
# On a throwaway loopback redis-server (scripts/servers.sh) with the idpool
# function library loaded, each run refills one pool with REQUESTS x BATCH
# IDs (so no pop ever finds it empty) and times REQUESTS pops with
# redis-benchmark (50 clients): LPOP KEY BATCH; a function that does nothing
# but that LPOP (the floor of any Redis Function that returns BATCH IDs:
# the Lua <-> RESP conversion of the reply); and FCALL idpool_take 2 POOL
# META BATCH with limits that never refuse. Prints IDs/s per run, then the
# medians and ratios.
# Defaults: 5 runs, batch 100, 20000 requests.
set -euo pipefail

RUNS=${1:-5}
BATCH=${2:-100}
REQS=${3:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-bench-take.XXXXXX")
cleanup() {
    "$ROOT/scripts/servers.sh" stop "$WORK" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
"$ROOT/scripts/servers.sh" start "$WORK" redis >/dev/null
# shellcheck disable=SC1091
source "$WORK/env"
R() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
R FUNCTION LOAD REPLACE "$(cat "$ROOT/src/idpool.lua")" >/dev/null
R FUNCTION LOAD REPLACE "#!lua name=idpool_bench
redis.register_function('bench_lpop', function(k, a) return redis.call('LPOP', k[1], a[1]) end)" >/dev/null

POOL='idpool:{bench}:pool'
META='idpool:{bench}:meta'
R HSET "$META" per_take "$BATCH" per_second 1000000000 >/dev/null
fill() { # REQS x BATCH IDs, 1000 per RPUSH, through redis-cli --pipe
    R DEL "$POOL" >/dev/null
    python3 - "$POOL" $((REQS * BATCH)) <<'EOF' | R --pipe >/dev/null
import sys
key, n = sys.argv[1].encode(), int(sys.argv[2])
out = sys.stdout.buffer
for lo in range(0, n, 1000):
    ids = [str(i).encode() for i in range(lo + 1, min(lo + 1000, n) + 1)]
    parts = [b"RPUSH", key] + ids
    out.write(b"*%d\r\n" % len(parts))
    for p in parts:
        out.write(b"$%d\r\n%s\r\n" % (len(p), p))
EOF
}
bench() { # prints requests/s
    redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 50 -n "$REQS" -q "$@" |
        tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1
}

echo "bench-take: batch=$BATCH requests=$REQS runs=$RUNS redis=$(redis-server --version | awk '{print $3}')"
: >"$WORK/lpop" && : >"$WORK/floor" && : >"$WORK/take"
for run in $(seq 1 "$RUNS"); do
    ids() { # benchmark "$@" on a full pool; IDs/s
        local rps
        fill
        rps=$(bench "$@")
        (($(R LLEN "$POOL") == 0)) || { echo "pool not drained exactly by $1" >&2; exit 1; }
        awk -v r="$rps" -v b="$BATCH" 'BEGIN {printf "%.0f", r * b}'
    }
    lp=$(ids LPOP "$POOL" "$BATCH")
    fl=$(ids FCALL bench_lpop 1 "$POOL" "$BATCH")
    tk=$(ids FCALL idpool_take 2 "$POOL" "$META" "$BATCH")
    echo "run $run: LPOP $lp IDs/s, LPOP-in-a-function $fl IDs/s, idpool_take $tk IDs/s"
    echo "$lp" >>"$WORK/lpop"
    echo "$fl" >>"$WORK/floor"
    echo "$tk" >>"$WORK/take"
done
ml=$(median <"$WORK/lpop")
mf=$(median <"$WORK/floor")
mt=$(median <"$WORK/take")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "median (batch $BATCH): LPOP $ml, LPOP-in-a-function $mf, idpool_take $mt IDs/s;" \
    "take/LPOP $(ratio "$mt" "$ml"), take/function-floor $(ratio "$mt" "$mf")"
