#!/usr/bin/env bash
# How fast one idpoold fills one application's pool, and how many MySQL
# writes (lease reservations) it makes per million IDs while clients drain it.
#
#   scripts/bench-refill.sh [RUNS] [POOL] [DRAIN_IDS]
#
# Per run, on throwaway loopback servers (scripts/servers.sh) and a fresh
# application:
#   fill:  time from the first ID in the pool until it holds POOL IDs
#          -> IDs/s pushed into Redis by the daemon (fenced pushes included);
#   drain: idpool-load on two connections takes DRAIN_IDS IDs (LPOP 1000)
#          while the daemon refills -> lease rows written per million IDs, empty pops.
# Prints one line per run and the medians. Defaults: 5 runs, 2000000, 20000000.
set -euo pipefail

RUNS=${1:-5}
POOL=${2:-2000000}
DRAIN=${3:-20000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}

[[ -x $BUILD/idpoold && -x $BUILD/test/idpool-load ]] || {
    [[ -d $BUILD ]] || meson setup "$BUILD" "$ROOT" >/dev/null
    ninja -C "$BUILD" >/dev/null
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-bench.XXXXXX")
DPID=
cleanup() {
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    "$ROOT/scripts/servers.sh" stop "$WORK" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
"$ROOT/scripts/servers.sh" start "$WORK" >/dev/null
# shellcheck disable=SC1091
source "$WORK/env"
R() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
Q() { mariadb -h 127.0.0.1 -P "$MYSQL_PORT" -u root -N -B idpool -e "$1"; }
ms() { echo $((${EPOCHREALTIME/[,.]/} / 1000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "bench-refill: pool=$POOL drain=$DRAIN runs=$RUNS cpu=$(nproc)x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
: >"$WORK/fill" && : >"$WORK/writes"
for run in $(seq 1 "$RUNS"); do
    key=bench$run
    pool="idpool:{$key}:pool"
    # max_size_per_second only sizes the default pool; here the pool is explicit.
    Q "INSERT INTO application (entity_key, step, max_size_per_second, max_pool_size, max_size_per_times)
       VALUES ('$key', 1000, 100000000, $POOL, 1000)"
    "$BUILD/idpoold" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" --http '' \
        --log-level warn 2>>"$WORK/idpoold.log" &
    DPID=$!
    deadline=$(($(ms) + 60000))
    until (($(R LLEN "$pool") > 0)); do
        (($(ms) < deadline)) || { echo "no IDs after 60 s" >&2; exit 1; }
        sleep 0.001
    done
    t0=$(ms)
    until (($(R LLEN "$pool") >= POOL)); do
        (($(ms) < deadline)) || { echo "pool not full after 60 s" >&2; exit 1; }
        sleep 0.002
    done
    t1=$(ms)
    fill=$((POOL * 1000 / (t1 - t0 > 0 ? t1 - t0 : 1)))
    leases0=$(Q "SELECT COUNT(*) FROM application_lease l JOIN application a ON a.id = l.application_id WHERE a.entity_key = '$key'")
    "$BUILD/test/idpool-load" --port "$REDIS_PORT" --mode lpop --key "$pool" --conns 2 \
        --count "$DRAIN" --batch 1000 --duration 120 >"$WORK/pop" 2>&1 || true
    leases1=$(Q "SELECT COUNT(*) FROM application_lease l JOIN application a ON a.id = l.application_id WHERE a.entity_key = '$key'")
    kill "$DPID" && wait "$DPID" || true
    DPID=
    empties=$(sed -n 's/^load: .* empties=\([0-9]*\).*/\1/p' "$WORK/pop")
    rates=$(sed -n 's/^load: .* ids_per_s=\([0-9]*\).*/\1/p' "$WORK/pop")
    writes=$(awk -v n=$((leases1 - leases0)) -v d="$DRAIN" 'BEGIN {printf "%.2f", n * 1e6 / d}')
    echo "run $run: fill ${fill} IDs/s ($POOL in $((t1 - t0)) ms); drain ${rates} IDs/s, $((leases1 - leases0)) leases = ${writes} MySQL writes per million IDs, ${empties} empty pops"
    echo "$fill" >>"$WORK/fill"
    echo "$writes" >>"$WORK/writes"
done
echo "median: fill $(median <"$WORK/fill") IDs/s pushed by idpoold; $(median <"$WORK/writes") MySQL writes per million IDs"
