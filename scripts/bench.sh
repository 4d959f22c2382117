#!/usr/bin/env bash
# idpool's benchmark: how close the real daemon comes to what one Redis can
# do, measured side by side in one run on throwaway loopback servers.
#
#   scripts/bench.sh [--quick] [--profile] [--build DIR] [--out DIR]
#
#   --quick      3 runs of short windows, ramp steps held 4 s (about 4 min on
#                2 cores); the default is 5 runs of 10 s, steps held 10 s
#   --build DIR  where idpoold and test/idpool-load are (default build/);
#                a missing DIR is set up with -Dbuildtype=release; ninja runs
#   --out DIR    results directory (default bench-results/<UTC timestamp>/)
#   --profile    also profile (after the measured runs, not counted in them):
#                perf sched of an idle and a refill latency window (how long
#                redis-server and the clients waited for a CPU), Redis'
#                command times and slow log in the refill window, the same
#                two windows with the probe at SCHED_FIFO (chrt), perf record
#                of redis-server and idpoold during an e2e hold, and
#                callgrind of idpoold filling an empty pool; reports in
#                profile/ of the results directory (needs perf: linux-perf)
#
# Starts its own redis-server + mariadbd (scripts/servers.sh, AOF everysec)
# and idpoold on 127.0.0.1 and measures:
#   1. ceiling: RPUSH of pre-formatted IDs (1000 per command), LPOP from a
#      prefilled list (batch 1 and 100), ceiling = 1 / (1/push + 1/pop100);
#      idpoold's fenced push: how fast it fills an empty large pool;
#   2. end to end: the daemon refilling one large pool while idpool-load
#      drains it (LPOP 100) on a rate ramp; sustained = the highest step
#      with zero empty pops; e2e_ratio = sustained / ceiling (goal >= 0.8);
#   3. latency of single-ID LPOP at a fixed rate, idle vs. while another
#      pool is drained and refilled; p999_ratio = refill / idle (<= 1.5);
#   4. scale: 10,000 idle applications (daemon CPU and RSS, goal < 5 % of a
#      core); 1,000 applications drained at once (refill keeps up);
#   5. MySQL writes (lease rows) per million IDs during the drain (<= 10);
#   6. baselines: an INCRBY counter with the same batch size, raw LPOP.
# Results: raw outputs, results.md (a table for BENCHMARKS.md), ramp.png and
# latency.png in the results directory. The last line printed is
#   bench: e2e_ratio=X p999_ratio=Y sustained_ids_per_s=Z ceiling_ids_per_s=W mysql_writes_per_million=V idle_cpu_pct=U
# Exit status: 0 measured (whether or not the goals hold), 1 error, 64 usage.
# Environment: IDPOOLD, IDPOOL_LOAD (binaries; default from --build);
# BENCH_RUNS, BENCH_WINDOW_S, BENCH_HOLD_S, BENCH_SCALE_APPS, BENCH_LOAD_APPS;
# BENCH_HOG_RATE (IDs/s of the latency phase's drain; default the sustained rate).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIB=$ROOT/test/bench/benchlib.py
T_START=${EPOCHREALTIME/[,.]/}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit "${1:-64}"
}

PROFILE=default
PROF=0
BUILD=$ROOT/build
OUT=''
while (($#)); do
    case $1 in
    --quick) PROFILE=quick ;;
    --profile) PROF=1 ;;
    --build) (($# >= 2)) || usage; BUILD=$2; shift ;;
    --build=*) BUILD=${1#*=} ;;
    --out) (($# >= 2)) || usage; OUT=$2; shift ;;
    --out=*) OUT=${1#*=} ;;
    -h | --help) usage 0 ;;
    *) echo "bench: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done

# ------------------------------------------------------------- profile ---

if [[ $PROFILE == quick ]]; then
    RUNS=3 WIN=3 HOLD=4 RAMP_STEP=0.15 REFINE=1 FENCED_POOL=3000000 LOAD_WIN=8 LAT_FLAT=0
else
    RUNS=5 WIN=10 HOLD=10 RAMP_STEP=0.10 REFINE=2 FENCED_POOL=3000000 LOAD_WIN=10 LAT_FLAT=1
fi
RUNS=${BENCH_RUNS:-$RUNS}
WIN=${BENCH_WINDOW_S:-$WIN}
HOLD=${BENCH_HOLD_S:-$HOLD}
SCALE_APPS=${BENCH_SCALE_APPS:-10000}
LOAD_APPS=${BENCH_LOAD_APPS:-1000}
CEIL_CONNS=4         # connections of the ceiling and baseline clients
CEIL_PIPELINE=8      # requests in flight per connection there
E2E_CONNS=4          # connections draining the end-to-end pool ...
E2E_PIPELINE=8       # ... with this many requests in flight each (open loop)
E2E_POOL_S=3         # end-to-end pool: this many seconds of the ceiling
E2E_MIN_PCT=90       # ... refilled below this % (a refill is >= 0.3 s of demand,
                     # well inside the daemon's 1 s lock TTL)
E2E_STEP=10000       # ... in steps of this many IDs
ID_BASE=100000000000000000 # current_offset of the pushed applications: IDs of
                     # 18 digits, as long as the ceiling's (16..19 digits;
                     # Redis' cost per ID grows with its length)
RAMP_START=0.30      # first ramp step, as a fraction of the ceiling
RAMP_MAX=1.20        # the ramp never asks for more than this x ceiling
LAT_RATE=5000        # single-ID LPOP requests/s of the latency client (one
LAT_PIPELINE=64      # connection; sent on schedule even while replies are late)
HOG_CONNS=4          # latency phase: connections draining the other list, one
                     # request in flight each
SCALE_POOL=1000      # the scale phase's applications: pool, step, min %
SCALE_STEP=100
SCALE_MIN_PCT=50
LOAD_COUNT=20        # 1,000 apps under load: IDs per app per call ...
LOAD_INTERVAL=0.1    # ... one call every this many seconds (200 IDs/s each,
                     # nominal); a window (LOAD_WIN) lasts long enough for
                     # every pool to need several refills

# ------------------------------------------------------------- helpers ---

say() { printf 'bench: %s\n' "$*"; }
die() {
    printf 'bench: error: %s\n' "$*" >&2
    exit 1
}
now_us() { echo "${EPOCHREALTIME/[,.]/}"; }
now_ms() { echo $(($(now_us) / 1000)); }
now_ns() { python3 "$LIB" now-ns; } # CLOCK_MONOTONIC, as in idpool-load's files
calc() { awk "BEGIN { printf \"%.6g\", $* }"; }
calc0() { awk "BEGIN { printf \"%.0f\", $* }"; }

# wait_until SECONDS WHAT CMD...: polls CMD every 50 ms; dies on timeout.
wait_until() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$(($(now_ms) + limit * 1000))
    until "$@"; do
        (($(now_ms) < deadline)) || die "timed out after ${limit} s waiting for $what"
        sleep 0.05
    done
}

measure() { echo "$1 $2" >>"$OUT/measure.txt"; }
info() { echo "$1 $2" >>"$OUT/info.txt"; }

R() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
Q() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root -N -B idpool -e "$1"; }
Q_file() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root -N -B idpool <"$1"; }
pool_key() { echo "idpool:{$1}:pool"; }
llen() { R LLEN "$(pool_key "$1")"; }
llen_ge() { local n; n=$(llen "$1" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]] && ((n >= $2)); }
leases_of() { # leases of the applications whose key matches a LIKE pattern
    Q "SELECT COUNT(*) FROM application_lease l JOIN application a ON a.id = l.application_id
       WHERE a.entity_key LIKE '$1'"
}

# cpu_ticks PID: utime + stime of a process, in clock ticks.
cpu_ticks() {
    local s
    s=$(<"/proc/$1/stat")
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    echo $((${12} + ${13}))
}
CLK_TCK=$(getconf CLK_TCK)
# cpu_pct TICKS0 TICKS1 US0 US1: % of one core between two readings.
cpu_pct() { awk "BEGIN { printf \"%.2f\", ($2 - $1) * 100 / $CLK_TCK / (($4 - $3) / 1e6) }"; }
rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# running PID: a child of this script that has not exited (a zombie has).
running() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [[ ${s%% *} != Z ]]
}
# stop_pid PID [SECONDS]: TERM, bounded wait, KILL; reaps it. Only for
# children not reaped yet (their pid cannot have been reused).
stop_pid() {
    local pid=$1 limit=${2:-10} i
    if running "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < limit * 20; i++)); do
            running "$pid" || break
            sleep 0.05
        done
        running "$pid" && kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null || true
}

# load NAME ARGS...: runs idpool-load (bounded by --duration + 60 s), output
# in $OUT/raw/NAME.txt; dies if it fails.
load() {
    local name=$1 out=$OUT/raw/$1.txt
    shift
    if ! timeout --foreground -k 5 "$LOAD_LIMIT" "$IDPOOL_LOAD" --port "$REDIS_PORT" "$@" >"$out" 2>&1; then
        tail -n 5 "$out" >&2
        die "idpool-load $* failed (see $out)"
    fi
}
LOAD_LIMIT=120
# kv NAME FIELD: a field of idpool-load's summary line in $OUT/raw/NAME.txt.
kv() {
    local v
    v=$(grep '^load:' "$OUT/raw/$1.txt" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p")
    [[ -n $v ]] || die "no $2= in $OUT/raw/$1.txt"
    echo "$v"
}

# llen sampler of one pool in the background: sampler_start KEY FILE; _stop.
SAMPLER_PID=''
sampler_start() {
    "$IDPOOL_LOAD" --port "$REDIS_PORT" --mode llen --key "$(pool_key "$1")" \
        --interval-ms "${3:-20}" --duration 3600 --out "$2" >>"$OUT/raw/sampler.txt" 2>&1 &
    SAMPLER_PID=$!
}
sampler_stop() {
    [[ -n $SAMPLER_PID ]] && stop_pid "$SAMPLER_PID" 5
    SAMPLER_PID=''
}

# The daemon under test; one at a time (DAEMON_WRAP: a command it runs
# under; DAEMON_ARGS: more options).
DPID=''
DAEMON_WRAP=()
DAEMON_ARGS=()
HTTP=''
daemon_start() { # NAME
    local port
    port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
    HTTP=127.0.0.1:$port
    "${DAEMON_WRAP[@]}" "$IDPOOLD" "${DAEMON_ARGS[@]}" --redis "$IDPOOL_REDIS_URL" \
        --mysql "$IDPOOL_MYSQL_URL" --http "$HTTP" \
        --instance "bench-$1" --log-level warn </dev/null >>"$OUT/idpoold-$1.log" 2>&1 &
    DPID=$!
    wait_until 30 "idpoold to answer on $HTTP" \
        curl -sf -o /dev/null --max-time 2 "http://$HTTP/healthz"
}
daemon_stop() {
    [[ -n $DPID ]] && stop_pid "$DPID" 10
    DPID=''
}
# reload: the daemon re-reads the rows now; wait until it serves APP (or until
# it no longer does, with "gone").
app_served() { curl -sf --max-time 2 "http://$HTTP/v1/apps/$1" | grep -q '"served": *true'; }
app_gone() { ! app_served "$1"; }
reload_until() { # served|gone APP
    kill -HUP "$DPID"
    wait_until 20 "idpoold to see the change of $2" "app_$1" "$2"
}

# pool_settled KEY MIN: the pool holds >= MIN IDs and did not change in 300 ms
# (no refill in flight).
pool_settled() {
    local a b
    a=$(llen "$1") && ((a >= $2)) || return 1
    sleep 0.3
    b=$(llen "$1") && [[ $a == "$b" ]]
}

cleanup() {
    local rc=$? pid
    trap - EXIT INT TERM
    # every background child still unreaped: daemon, sampler, drain client
    for pid in $(jobs -p); do stop_pid "$pid" 5; done
    if [[ -n ${WORK:-} ]]; then
        "$ROOT/scripts/servers.sh" stop "$WORK" >/dev/null 2>&1 || true
        rm -rf "$WORK"
    fi
    ((rc == 0)) || printf 'bench: failed (exit %d); partial results in %s\n' "$rc" "${OUT:-?}" >&2
    exit "$rc"
}

# ---------------------------------------------------------------- setup ---

for tool in redis-cli mariadb gnuplot curl python3 meson ninja timeout; do
    command -v "$tool" >/dev/null || die "$tool not found (see scripts/packages.txt)"
done
if ((PROF)); then
    command -v perf >/dev/null || die "--profile needs perf (apt-get install linux-perf)"
    command -v valgrind >/dev/null || die "--profile needs valgrind"
fi
BUILD=$(cd "$(dirname "$BUILD")" && pwd)/$(basename "$BUILD")
if [[ ! -d $BUILD ]]; then
    say "setting up $BUILD (release)"
    meson setup "$BUILD" "$ROOT" -Dbuildtype=release >/dev/null
fi
# IDPOOLD / IDPOOL_LOAD in the environment name the binaries instead.
TARGETS=()
[[ -n ${IDPOOLD:-} ]] || TARGETS+=(idpoold)
[[ -n ${IDPOOL_LOAD:-} ]] || TARGETS+=(test/idpool-load)
if ((${#TARGETS[@]})); then
    ninja -C "$BUILD" "${TARGETS[@]}" >/dev/null || die "build failed in $BUILD"
fi
IDPOOLD=${IDPOOLD:-$BUILD/idpoold}
IDPOOL_LOAD=${IDPOOL_LOAD:-$BUILD/test/idpool-load}
[[ -x $IDPOOLD && -x $IDPOOL_LOAD ]] || die "idpoold or test/idpool-load missing in $BUILD"
BUILDTYPE=$(sed -n 's/.*"name": "buildtype", "value": "\([a-z]*\)".*/\1/p' \
    "$BUILD/meson-info/intro-buildoptions.json" 2>/dev/null | head -n 1)

OUT=${OUT:-$ROOT/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
: >"$OUT/measure.txt"
: >"$OUT/info.txt"
# tee outlives a Ctrl-C of the script, so the last lines reach bench.log
exec > >(trap '' INT TERM; exec tee "$OUT/bench.log") 2>&1

trap cleanup EXIT
trap 'exit 130' INT TERM
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idpool-bench.XXXXXX")

cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
mem_gib=$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
machine="$(nproc) x $cpu_model, $mem_gib GiB, $(uname -sr)"
# shellcheck disable=SC1091
[[ -r /etc/os-release ]] && machine+=", $(. /etc/os-release && echo "$PRETTY_NAME")"
redis_v=$(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')
maria_v=$(mariadbd --version 2>/dev/null | sed -n 's/.* Ver \([^ -]*\).*/\1/p' ||
    /usr/sbin/mariadbd --version | sed -n 's/.* Ver \([^ -]*\).*/\1/p')
commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
dirty=$(git -C "$ROOT" status --porcelain -- src include 2>/dev/null | head -c 1)
versions="Redis $redis_v (AOF everysec), MariaDB $maria_v, idpool $commit${dirty:+ (src modified)}, build ${BUILDTYPE:-?}. Clients, Redis, MariaDB and idpoold share the machine."
say "profile $PROFILE: $RUNS runs, ${WIN} s windows, ramp steps held ${HOLD} s; results in $OUT"
say "machine: $machine"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews every number)"
info load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
say "versions: $versions"
info profile "$PROFILE"
info command "scripts/bench.sh$([[ $PROFILE == quick ]] && echo ' --quick')"
info machine "$machine"
info versions "$versions"
info date "$(date -u '+%Y-%m-%d %H:%M UTC')"
info runs "$RUNS"
info window_s "$WIN"
info hold_s "$HOLD"
info ceil_conns "$CEIL_CONNS"
info ceil_pipeline "$CEIL_PIPELINE"
if [[ $PROFILE == quick ]]; then
    info hold_note " (--quick: shorter than the 10 s of the full run)"
    info note "--quick profile: short windows and ramp steps held only $HOLD s; run without --quick for numbers to publish."
fi

"$ROOT/scripts/servers.sh" start "$WORK" >"$OUT/raw/servers.txt" 2>&1 ||
    { cat "$OUT/raw/servers.txt" >&2; die "servers did not start"; }
# shellcheck disable=SC1091
source "$WORK/env"
REDIS_PID=$(tr -dc 0-9 <"$WORK/redis.pid")
# An AOF rewrite (a fork copying the whole data set) in the middle of a
# window would measure the fork, not idpool: rewrites are off for the run.
R CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
say "servers up: redis 127.0.0.1:$REDIS_PORT, mariadb 127.0.0.1:$MYSQL_PORT"

# ----------------------------------------------------- 1. ceiling, baselines

say "1. ceiling: RPUSH 1000 IDs/command, LPOP batch 1 and 100, INCRBY; $CEIL_CONNS connections, pipeline $CEIL_PIPELINE"
CK='bench:{ceiling}:list'
CC='bench:{ceiling}:counter'
C_ARGS=(--conns "$CEIL_CONNS" --pipeline "$CEIL_PIPELINE")
for run in $(seq "$RUNS"); do
    R UNLINK "$CK" "$CC" >/dev/null
    load "push.$run" --mode rpush --key "$CK" --batch 1000 "${C_ARGS[@]}" --duration "$WIN"
    push=$(kv "push.$run" ids_per_s)
    have=$(R LLEN "$CK")
    # Pops stop at a count below what the list holds, so none finds it empty.
    load "pop1.$run" --mode lpop --key "$CK" --batch 1 "${C_ARGS[@]}" --duration "$WIN" \
        --count $((have / 4))
    have=$(R LLEN "$CK")
    load "pop100.$run" --mode lpop --key "$CK" --batch 100 "${C_ARGS[@]}" --duration "$WIN" \
        --count $((have - have / 10))
    R UNLINK "$CK" >/dev/null
    load "incrby1.$run" --mode incrby --key "$CC" --batch 1 "${C_ARGS[@]}" --duration "$WIN"
    load "incrby100.$run" --mode incrby --key "$CC" --batch 100 "${C_ARGS[@]}" --duration "$WIN"
    pop1=$(kv "pop1.$run" ids_per_s)
    pop100=$(kv "pop100.$run" ids_per_s)
    for n in pop1 pop100; do
        e=$(kv "$n.$run" empties)
        ((e == 0)) || say "warning: $e empty pops in the $n ceiling run $run (list ran dry)"
    done
    comb=$(calc0 "1 / (1 / $push + 1 / $pop100)")
    measure ceiling.push "$push"
    measure ceiling.pop1 "$pop1"
    measure ceiling.pop100 "$pop100"
    measure ceiling.combined "$comb"
    measure base.incrby1 "$(kv "incrby1.$run" ids_per_s)"
    measure base.incrby100 "$(kv "incrby100.$run" ids_per_s)"
    say "  run $run: push $push, pop1 $pop1, pop100 $pop100 -> ceiling $comb IDs/s;" \
        "INCRBY 1 $(kv "incrby1.$run" ids_per_s), INCRBY 100 $(kv "incrby100.$run" ids_per_s) IDs/s"
done
R UNLINK "$CK" "$CC" >/dev/null
read -r CEILING _ < <(python3 "$LIB" get "$OUT/measure.txt" ceiling.combined)
CEILING=${CEILING%.*}

# ------------------------------------------------ 1b. the fenced push path

say "1b. idpoold's fenced push: fill of an empty $FENCED_POOL-ID pool"
info fenced_pool "$FENCED_POOL"
daemon_start main
for run in $(seq "$RUNS"); do
    app=fenced$run
    Q "INSERT INTO application (entity_key, step, max_pool_size, min_size_percent,
        max_size_per_second, max_size_per_times, current_offset)
       VALUES ('$app', 1000, $FENCED_POOL, 80, 100000000, 1000, $ID_BASE)"
    sampler_start "$app" "$OUT/raw/fenced.$run.llen" 10
    kill -HUP "$DPID"
    # Filled: above low water and no longer growing (a refill fenced off
    # midway leaves it short of full until the pool next drops below low water).
    wait_until 120 "the $app pool to fill" pool_settled "$app" $((FENCED_POOL * 80 / 100))
    sampler_stop
    have=$(llen "$app")
    curl -sf --max-time 5 "http://$HTTP/v1/apps/$app" >"$OUT/raw/fenced.$run.json" || true
    fenced=$(sed -n 's/.*"fenced": *\([0-9]*\).*/\1/p' "$OUT/raw/fenced.$run.json" | head -n 1)
    read -r rate ms < <(python3 "$LIB" fillrate "$OUT/raw/fenced.$run.llen" "$have") ||
        die "no fill rate from $OUT/raw/fenced.$run.llen"
    measure fenced.fill "$rate"
    measure fenced.fenced_off "${fenced:-0}"
    say "  run $run: $have IDs in $ms ms = $rate IDs/s${fenced:+; pushes fenced off: $fenced}"
    Q "UPDATE application SET deleted_at = 1 WHERE entity_key = '$app'"
    reload_until gone "$app"
    R UNLINK "$(pool_key "$app")" "idpool:{$app}:meta" >/dev/null
done

# ------------------------------------------------------------ 2. end to end

E2E_POOL=$(((CEILING * E2E_POOL_S / E2E_STEP + 1) * E2E_STEP))
((E2E_POOL >= 1000000)) || E2E_POOL=1000000
((E2E_POOL <= 50000000)) || E2E_POOL=50000000
E2E_LOW=$((E2E_POOL * E2E_MIN_PCT / 100))
say "2. end to end: pool of $E2E_POOL IDs (step $E2E_STEP, IDs from $ID_BASE, refilled below $E2E_MIN_PCT %), LPOP 100 on $E2E_CONNS connections, ramp from $RAMP_START x ceiling in steps of $RAMP_STEP, each held ${HOLD} s"
((HOLD >= 10)) || say "  (--quick: steps held ${HOLD} s, not the 10 s of the full run)"
info e2e_pool "$E2E_POOL"
info e2e_step "$E2E_STEP"
info e2e_min_pct "$E2E_MIN_PCT"
info e2e_conns "$E2E_CONNS"
info e2e_pipeline "$E2E_PIPELINE"
Q "INSERT INTO application (entity_key, step, max_pool_size, min_size_percent,
    max_size_per_second, max_size_per_times, current_offset)
   VALUES ('e2e', $E2E_STEP, $E2E_POOL, $E2E_MIN_PCT, 100000000, 1000, $ID_BASE)"
reload_until served e2e
wait_until 120 "the e2e pool to fill" pool_settled e2e "$E2E_LOW"
LEASES0=$(leases_of e2e)
E2E_IDS=0

T0_NS=$(now_ns)
sampler_start e2e "$OUT/raw/ramp.llen" 20
: >"$OUT/ramp.txt"
: >"$OUT/raw/ramp.steps"
STEP_N=0
# ramp_step IDS_PER_S: holds that rate for HOLD s; sets STEP_OK. A step is
# held when it had zero empty pops, reached 97 % of the target, and the pool
# kept up: its lowest point in the last third of the step is no more than 5 %
# of the pool below its lowest point in the first third (a pool of several
# seconds of demand could otherwise hide a refill falling behind).
ramp_step() {
    local target=$1 name start end got e first last why=''
    STEP_N=$((STEP_N + 1))
    name=ramp.$STEP_N
    start=$(now_ns)
    load "$name" --mode lpop --key "$(pool_key e2e)" --batch 100 --conns "$E2E_CONNS" \
        --pipeline "$E2E_PIPELINE" --rate "$(calc "$target / 100")" --duration "$HOLD" \
        --timeline "$OUT/raw/$name.timeline"
    end=$(now_ns)
    echo "$start $target $OUT/raw/$name.timeline" >>"$OUT/raw/ramp.steps"
    got=$(kv "$name" ids_per_s)
    e=$(kv "$name" empties)
    E2E_IDS=$((E2E_IDS + $(kv "$name" ids)))
    read -r first last < <(awk -v s="$start" -v e="$end" '
        $1 >= s && $1 <= e {
            if ($1 < s + (e - s) / 3 && (a == "" || $2 < a)) a = $2
            if ($1 > e - (e - s) / 3 && (b == "" || $2 < b)) b = $2
        }
        END { print a + 0, b + 0 }' "$OUT/raw/ramp.llen")
    echo "$target $got $e $first $last" >>"$OUT/ramp.txt"
    ((e == 0)) || why+=", empty pops"
    awk -v g="$got" -v t="$target" 'BEGIN { exit !(g >= 0.97 * t) }' || why+=", rate not reached"
    ((last + E2E_POOL / 20 >= first)) || why+=", pool shrinking"
    STEP_OK=$([[ -z $why ]] && echo 1 || echo 0)
    say "  step $STEP_N: target $target IDs/s -> $got IDs/s, $e empty pops," \
        "pool low $first -> $last$([[ -z $why ]] || echo " -> not held (${why#, })")"
}
GOOD=0
BAD=''
frac=$RAMP_START
while awk -v f="$frac" -v m="$RAMP_MAX" 'BEGIN { exit !(f <= m + 1e-9) }'; do
    target=$(calc0 "$frac * $CEILING")
    ramp_step "$target"
    if ((STEP_OK)); then
        GOOD=$target
    else
        BAD=$target
        break
    fi
    frac=$(calc "$frac + $RAMP_STEP")
done
# Back off: bisect between the last good and the first bad step, each try
# starting from a settled full pool.
if [[ -n $BAD ]]; then
    for _ in $(seq "$REFINE"); do
        wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
        try=$(calc0 "($GOOD + $BAD) / 2")
        ramp_step "$try"
        if ((STEP_OK)); then GOOD=$try; else BAD=$try; fi
    done
fi
SUSTAINED=$GOOD
measure e2e.sustained "$SUSTAINED"
say "  sustained: $SUSTAINED IDs/s held for ${HOLD} s (ceiling $CEILING) -> e2e_ratio $(awk "BEGIN { printf \"%.2f\", $SUSTAINED / $CEILING }")"

# Confirmation: the sustained rate, held RUNS more times, with CPU readings.
if ((SUSTAINED > 0)); then
    for run in $(seq "$RUNS"); do
        wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
        d0=$(cpu_ticks "$DPID") r0=$(cpu_ticks "$REDIS_PID") u0=$(now_us)
        echo "$(now_ns) $SUSTAINED $OUT/raw/confirm.$run.timeline" >>"$OUT/raw/ramp.steps"
        load "confirm.$run" --mode lpop --key "$(pool_key e2e)" --batch 100 \
            --conns "$E2E_CONNS" --pipeline "$E2E_PIPELINE" --rate "$(calc "$SUSTAINED / 100")" \
            --duration "$HOLD" --timeline "$OUT/raw/confirm.$run.timeline"
        d1=$(cpu_ticks "$DPID") r1=$(cpu_ticks "$REDIS_PID") u1=$(now_us)
        E2E_IDS=$((E2E_IDS + $(kv "confirm.$run" ids)))
        measure e2e.confirm "$(kv "confirm.$run" ids_per_s)"
        measure e2e.confirm_empties "$(kv "confirm.$run" empties)"
        measure e2e.daemon_cpu_pct "$(cpu_pct "$d0" "$d1" "$u0" "$u1")"
        measure e2e.redis_cpu_pct "$(cpu_pct "$r0" "$r1" "$u0" "$u1")"
        measure e2e.client_cpu_pct "$(awk -v c="$(kv "confirm.$run" cpu_ms)" \
            -v s="$(kv "confirm.$run" secs)" 'BEGIN { printf "%.2f", c / 10 / s }')"
        say "  confirm $run: $(kv "confirm.$run" ids_per_s) IDs/s, $(kv "confirm.$run" empties) empty pops;" \
            "CPU idpoold $(cpu_pct "$d0" "$d1" "$u0" "$u1") %, redis $(cpu_pct "$r0" "$r1" "$u0" "$u1") %"
    done
fi
sampler_stop
python3 "$LIB" ramp "$OUT" "$T0_NS" "$OUT/raw/ramp.llen" "$OUT/raw/ramp.steps"

# ---------------------------------------------------- 3. latency under refill

HOG_RATE=${BENCH_HOG_RATE:-$SUSTAINED}
((HOG_RATE > 0)) || HOG_RATE=$(calc0 "$CEILING * $RAMP_START")
say "3. latency: LPOP (1 ID) at $LAT_RATE/s, open loop, ${WIN} s windows: idle; another list drained at $HOG_RATE IDs/s without refill; the e2e pool drained at that rate and refilled$( ((LAT_FLAT)) && echo '; drained flat out')"
((LAT_FLAT)) || say "  (--quick: no 'drained flat out' condition)"
info lat_rate "$LAT_RATE"
info lat_pipeline "$LAT_PIPELINE"
info lat_hog_rate "$HOG_RATE"
info e2e_sustained "$SUSTAINED"
info hog_conns "$HOG_CONNS"
# The latency client pops from a plain list that nothing refills, prefilled
# with what all its windows need (and a margin).
LAT_KEY='bench:{lat}:list'
HOG_KEY='bench:{drain}:list'
load lat-fill --mode rpush --key "$LAT_KEY" --batch 1000 --conns 1 --pipeline 8 \
    --count $((LAT_RATE * (WIN + 2) * 4 * RUNS * 5 / 4)) --duration 60
LAT_ARGS=(--mode lpop --key "$LAT_KEY" --batch 1 --pipeline "$LAT_PIPELINE" --rate "$LAT_RATE"
    --duration "$WIN")
lat_record() { # CONDITION RUN
    local n=lat.$1.$2 f
    for f in p50_us p99_us p999_us max_us; do measure "lat.$1.$f" "$(kv "$n" "$f")"; done
    (($(kv "$n" empties) == 0)) || say "warning: the latency list ran dry in $n"
    say "  run $2 $1: p50 $(kv "$n" p50_us) p99 $(kv "$n" p99_us) p99.9 $(kv "$n" p999_us) µs${3:-}"
}
# lat_during CONDITION RUN KEY [DRAIN ARGS]: the latency window while KEY is
# drained (one request in flight per connection, like application servers).
lat_during() {
    local cond=$1 run=$2 key=$3 hog
    shift 3
    timeout --foreground -k 5 "$LOAD_LIMIT" "$IDPOOL_LOAD" --port "$REDIS_PORT" --mode lpop --key "$key" \
        --batch 100 --conns "$HOG_CONNS" "$@" --duration "$((WIN + 1))" \
        >"$OUT/raw/hog.$cond.$run.txt" 2>&1 &
    hog=$!
    sleep 0.5
    load "lat.$cond.$run" "${LAT_ARGS[@]}" --hist "$OUT/raw/lat.$cond.$run.hist"
    wait "$hog" || die "the drain of $key failed (see $OUT/raw/hog.$cond.$run.txt)"
    [[ $key != "$(pool_key e2e)" ]] || E2E_IDS=$((E2E_IDS + $(kv "hog.$cond.$run" ids)))
    measure "lat.$cond.drain_ids_per_s" "$(kv "hog.$cond.$run" ids_per_s)"
    lat_record "$cond" "$run" " (drain: $(kv "hog.$cond.$run" ids_per_s) IDs/s, $(kv "hog.$cond.$run" empties) empty pops)"
}
for run in $(seq "$RUNS"); do
    # idle: no refill running anywhere (the e2e pool settled above low water)
    wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
    load "lat.idle.$run" "${LAT_ARGS[@]}" --hist "$OUT/raw/lat.idle.$run.hist"
    lat_record idle "$run"
    # drain only: the same drain from a prefilled list, nothing refilled
    load "drain-fill.$run" --mode rpush --key "$HOG_KEY" --batch 1000 "${C_ARGS[@]}" \
        --count "$(calc0 "$HOG_RATE * ($WIN + 1) * 1.2 / 1000 * 1000")" --duration 120
    lat_during drain "$run" "$HOG_KEY" --rate "$(calc "$HOG_RATE / 100")"
    R UNLINK "$HOG_KEY" >/dev/null
    wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
    lat_during refill "$run" "$(pool_key e2e)" --rate "$(calc "$HOG_RATE / 100")"
    if ((LAT_FLAT)); then
        wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
        lat_during flat "$run" "$(pool_key e2e)"
    fi
done
for cond in idle drain refill flat; do
    python3 "$LIB" ccdf "$OUT/lat-$cond.ccdf" "$OUT"/raw/lat."$cond".*.hist
done
LEASES1=$(leases_of e2e)
curl -sf --max-time 5 "http://$HTTP/v1/apps/e2e" >"$OUT/raw/e2e-app.json" || true
fenced=$(sed -n 's/.*"fenced": *\([0-9]*\).*/\1/p' "$OUT/raw/e2e-app.json" | head -n 1)
measure e2e.fenced_off "${fenced:-0}"
measure mysql.leases $((LEASES1 - LEASES0))
measure mysql.ids "$E2E_IDS"
say "5. MySQL: $((LEASES1 - LEASES0)) lease reservations for $E2E_IDS IDs drained from e2e" \
    "= $(calc "($LEASES1 - $LEASES0) * 1e6 / $E2E_IDS") per million"

# ------------------------------------------------ profiles (--profile only)

# sched_delays FILE: per task kind, how long its wakeups waited for a CPU
# (perf sched timehist's "sch delay"): count, p50, p99, p99.9, max, sum (ms).
sched_delays() {
    perf sched timehist -i "$1" 2>/dev/null | awk '
        $3 ~ /^(redis-server|idpoold|idpool-load|idpool-lat)\[/ && $5 ~ /^[0-9.]+$/ {
            t = $3; sub(/\[.*/, "", t); d[t, ++n[t]] = $5; s[t] += $5 }
        END {
            for (t in n) {
                m = n[t]; delete v
                for (i = 1; i <= m; i++) v[i] = d[t, i]
                asort(v)
                printf "%-13s wakeups %7d  sch delay ms: p50 %.3f p99 %.3f p99.9 %.3f max %.3f sum %.1f\n",
                    t, m, v[int(m * 0.5) + 1], v[int(m * 0.99) + 1], v[int(m * 0.999) + 1], v[m], s[t]
            }
        }' | sort
}
if ((PROF)); then
    PD=$OUT/profile
    mkdir -p "$PD"
    # the latency client under a name of its own (perf sched tells tasks by name)
    ln -sf "$IDPOOL_LOAD" "$WORK/idpool-lat"
    # the same probe at SCHED_FIFO priority: its own wait for a CPU taken out
    printf '#!/bin/sh\nexec chrt -f 10 "%s" "$@"\n' "$IDPOOL_LOAD" >"$WORK/idpool-lat-fifo"
    chmod +x "$WORK/idpool-lat-fifo"
    # prof_window COND PROBE: one latency window (idle*: nothing else runs;
    # refill*: the e2e pool drained at HOG_RATE and refilled) with the probe
    # binary PROBE; the plain windows under perf sched, the refill ones with
    # Redis' command times and slow log.
    prof_window() {
        local cond=$1 probe=$2 ppid='' hog=''
        wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
        if [[ $probe == "$WORK/idpool-lat" ]]; then
            perf sched record -o "$PD/sched-$cond.data" -- sleep "$((WIN + 1))" \
                >"$PD/sched-$cond.log" 2>&1 &
            ppid=$!
            sleep 0.5
        fi
        R CONFIG RESETSTAT >/dev/null
        R SLOWLOG RESET >/dev/null
        if [[ $cond == refill* ]]; then
            timeout --foreground -k 5 "$LOAD_LIMIT" "$IDPOOL_LOAD" --port "$REDIS_PORT" \
                --mode lpop --key "$(pool_key e2e)" --batch 100 --conns "$HOG_CONNS" \
                --rate "$(calc "$HOG_RATE / 100")" --duration "$WIN" >"$OUT/raw/prof.hog.$cond.txt" 2>&1 &
            hog=$!
        fi
        IDPOOL_LOAD=$probe load "prof.lat.$cond" "${LAT_ARGS[@]}"
        [[ -z $hog ]] || wait "$hog" || die "the drain of e2e failed (see $OUT/raw/prof.hog.$cond.txt)"
        if [[ $cond == refill* ]]; then
            { R INFO commandstats; echo "slowlog (> 500 µs):"; R SLOWLOG GET 20; } \
                >"$PD/redis-$cond.txt"
        fi
        say "  $cond: LPOP p50 $(kv "prof.lat.$cond" p50_us) p99 $(kv "prof.lat.$cond" p99_us)" \
            "p99.9 $(kv "prof.lat.$cond" p999_us) µs"
        if [[ $cond == refill* ]]; then
            say "    Redis, µs per call: $(tr -d '\r' <"$PD/redis-$cond.txt" | sed -n \
                's/^cmdstat_\(exec\|rpush\|lpop\|fcall\):.*usec_per_call=\([0-9.]*\).*/\1 \2/p' |
                paste -sd, | sed 's/,/, /g'); commands over 500 µs: $(R SLOWLOG LEN)"
        fi
        if [[ -n $ppid ]]; then
            wait "$ppid" || die "perf sched record failed (see $PD/sched-$cond.log)"
            sched_delays "$PD/sched-$cond.data" >"$PD/sched-$cond.txt"
            perf sched latency -i "$PD/sched-$cond.data" --sort max 2>/dev/null |
                head -n 20 >>"$PD/sched-$cond.txt" || true
            say "    waiting for a CPU (idpool-lat: this probe, idpool-load: the drain):"
            sed 's/^/bench:     /' <(sched_delays "$PD/sched-$cond.data")
            rm -f "$PD/sched-$cond.data"
        fi
    }
    say "profile: latency windows (not measured above): idle and refill under perf sched; the same with the probe at SCHED_FIFO"
    R CONFIG SET slowlog-log-slower-than 500 >/dev/null
    prof_window idle "$WORK/idpool-lat"
    prof_window refill "$WORK/idpool-lat"
    if chrt -f 10 true 2>/dev/null; then
        prof_window idle-fifo "$WORK/idpool-lat-fifo"
        prof_window refill-fifo "$WORK/idpool-lat-fifo"
    else
        say "  (chrt -f not permitted here: no SCHED_FIFO windows)"
    fi
    say "profile: perf record -g of redis-server and idpoold over one e2e hold at $SUSTAINED IDs/s"
    wait_until 120 "the e2e pool to refill" pool_settled e2e "$E2E_LOW"
    perf record -F 499 -g -p "$REDIS_PID,$DPID" -o "$PD/e2e.perf.data" -- sleep "$HOLD" \
        >"$PD/e2e-perf.log" 2>&1 &
    ppid=$!
    load prof.e2e --mode lpop --key "$(pool_key e2e)" --batch 100 --conns "$E2E_CONNS" \
        --pipeline "$E2E_PIPELINE" --rate "$(calc "$SUSTAINED / 100")" --duration "$HOLD"
    wait "$ppid" || die "perf record failed (see $PD/e2e-perf.log)"
    for comm in redis-server idpoold; do
        perf report -i "$PD/e2e.perf.data" --stdio --no-children --comms "$comm" \
            --percentage relative --sort dso,symbol -g none --percent-limit 0.5 2>/dev/null |
            grep -v '^$' >"$PD/e2e-$comm.txt" || true
        say "  $comm, top symbols (% of its samples): $(grep -E '^ +[0-9.]+%' "$PD/e2e-$comm.txt" |
            head -n 8 | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $4, $1 }')"
    done
    rm -f "$PD/e2e.perf.data"
fi
daemon_stop
if ((PROF)); then
    say "profile: callgrind of idpoold filling an empty pool of 500,000 IDs"
    Q "DELETE FROM application"
    R FLUSHALL >/dev/null
    Q "INSERT INTO application (entity_key, step, max_pool_size, min_size_percent,
       max_size_per_second, max_size_per_times, current_offset)
       VALUES ('cg', 10000, 500000, 90, 100000000, 1000, $ID_BASE)"
    # valgrind slows it down ~50x: a lock TTL that outlasts the whole fill
    DAEMON_WRAP=(valgrind --tool=callgrind "--callgrind-out-file=$PD/callgrind.out")
    DAEMON_ARGS=(--lock-ttl-ms 120000)
    daemon_start callgrind
    wait_until 300 "the cg pool to fill under callgrind" llen_ge cg 500000
    daemon_stop
    DAEMON_WRAP=() DAEMON_ARGS=()
    callgrind_annotate --inclusive=no "$PD/callgrind.out" 2>/dev/null | head -n 40 >"$PD/callgrind.txt" || true
    total=$(sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' "$PD/callgrind.txt" | tr -d ,)
    say "  $(calc0 "${total:-0} / 500000") instructions per ID pushed (start-up and checks included); top functions in $PD/callgrind.txt:"
    grep -E '^ *[0-9,]+ .*\(' "$PD/callgrind.txt" | head -n 8 | sed 's/^/bench:     /'
fi

# ------------------------------------------------------------------ 4. scale

say "4. scale: $SCALE_APPS applications (pool $SCALE_POOL, step $SCALE_STEP) idle; then $LOAD_APPS of them drained at $(calc0 "$LOAD_COUNT / $LOAD_INTERVAL") IDs/s each"
info scale_apps "$SCALE_APPS"
info scale_pool "$SCALE_POOL"
info scale_step "$SCALE_STEP"
info load_apps "$LOAD_APPS"
info load_count "$LOAD_COUNT"
info load_calls_per_s "$(calc0 "1 / $LOAD_INTERVAL")"
Q "DELETE FROM application"
R FLUSHALL >/dev/null
# One multi-row INSERT: s000000, s000001, ...
seq 0 $((SCALE_APPS - 1)) | awk -v p="$SCALE_POOL" -v s="$SCALE_STEP" -v m="$SCALE_MIN_PCT" '
    BEGIN { printf "INSERT INTO application (entity_key, step, max_pool_size, min_size_percent, max_size_per_second, max_size_per_times) VALUES " }
    { printf "%s(\"s%06d\", %d, %d, %d, 1000, %d)", (NR > 1 ? "," : ""), $1, s, p, m, s }
    END { print "" }' >"$WORK/apps.sql"
Q_file "$WORK/apps.sql"
# Bench helpers inside Redis (not part of idpool): count the pools holding at
# least N IDs; pop COUNT IDs from each of N pools in one call.
R FUNCTION LOAD REPLACE "#!lua name=idpool_bench
local function key(i) return string.format('idpool:{s%06d}:pool', i) end
redis.register_function('bench_full', function(_, a)
  local n, want, full = tonumber(a[1]), tonumber(a[2]), 0
  for i = 0, n - 1 do
    if redis.call('LLEN', key(i)) >= want then full = full + 1 end
  end
  return full
end)
redis.register_function('bench_popmany', function(_, a)
  local n, count, ids, empties, minlen = tonumber(a[1]), a[2], 0, 0, -1
  for i = 0, n - 1 do
    local r = redis.call('LPOP', key(i), count)
    if r then ids = ids + #r else empties = empties + 1 end
    local l = redis.call('LLEN', key(i))
    if minlen < 0 or l < minlen then minlen = l end
  end
  return {ids, empties, minlen}
end)" >/dev/null
scale_full() { (($(R FCALL bench_full 0 "$SCALE_APPS" "$SCALE_POOL") >= SCALE_APPS)); }
u0=$(now_us)
daemon_start scale
wait_until 600 "$SCALE_APPS pools to fill" scale_full
fill_s=$(calc "($(now_us) - $u0) / 1e6")
measure scale.fill_s "$fill_s"
fenced=$(grep -c 'push fenced off' "$OUT/idpoold-scale.log" || true)
measure scale.fill_fenced "$fenced"
say "  $SCALE_APPS pools full after $fill_s s (daemon start included); refills fenced off meanwhile: $fenced"
sleep 2
for run in $(seq "$RUNS"); do
    d0=$(cpu_ticks "$DPID") r0=$(cpu_ticks "$REDIS_PID") u0=$(now_us)
    sleep "$WIN"
    d1=$(cpu_ticks "$DPID") r1=$(cpu_ticks "$REDIS_PID") u1=$(now_us)
    measure scale.idle_cpu_pct "$(cpu_pct "$d0" "$d1" "$u0" "$u1")"
    measure scale.idle_redis_cpu_pct "$(cpu_pct "$r0" "$r1" "$u0" "$u1")"
    measure scale.rss_mib "$(rss_mib "$DPID")"
    say "  idle $run: idpoold CPU $(cpu_pct "$d0" "$d1" "$u0" "$u1") % of a core, RSS $(rss_mib "$DPID") MiB;" \
        "redis CPU $(cpu_pct "$r0" "$r1" "$u0" "$u1") %"
done
# Run 0 warms up (not measured): each application's first lease was one pool,
# so the load starts with a lease reservation for every one of them.
calls=$(calc0 "$LOAD_WIN / $LOAD_INTERVAL")
for run in $(seq 0 "$RUNS"); do
    wait_until 60 "the loaded pools to refill" eval \
        "(( \$(R FCALL bench_full 0 $LOAD_APPS $((SCALE_POOL * SCALE_MIN_PCT / 100))) >= LOAD_APPS ))"
    l0=$(leases_of 's%')
    d0=$(cpu_ticks "$DPID") u0=$(now_us)
    timeout --foreground -k 5 $((LOAD_WIN * 3 + 30)) redis-cli -h 127.0.0.1 -p "$REDIS_PORT" \
        -r "$calls" -i "$LOAD_INTERVAL" FCALL bench_popmany 0 "$LOAD_APPS" "$LOAD_COUNT" \
        >"$OUT/raw/scale-load.$run.txt" || die "the load on $LOAD_APPS pools failed"
    d1=$(cpu_ticks "$DPID") u1=$(now_us)
    l1=$(leases_of 's%')
    read -r ids empties minlen ncalls < <(awk 'NR % 3 == 1 { i += $1 } NR % 3 == 2 { e += $1 }
        NR % 3 == 0 { if (m == "" || $1 < m) m = $1; n++ } END { print i + 0, e + 0, m + 0, n + 0 }' \
        "$OUT/raw/scale-load.$run.txt")
    rate=$(calc0 "$ids / (($u1 - $u0) / 1e6)")
    cpu=$(cpu_pct "$d0" "$d1" "$u0" "$u1")
    if ((run > 0)); then
        measure scale.load_pops $((ncalls * LOAD_APPS))
        measure scale.load_ids_per_s "$rate"
        measure scale.load_empties "$empties"
        measure scale.load_minlen "$minlen"
        measure scale.load_cpu_pct "$cpu"
        measure scale.load_leases $((l1 - l0))
        measure scale.load_ids "$ids"
    fi
    say "  load $([[ $run == 0 ]] && echo 'warm-up' || echo "$run"): $ids IDs at $rate IDs/s from" \
        "$LOAD_APPS pools, $empties empty pops of $((ncalls * LOAD_APPS)), smallest pool $minlen;" \
        "idpoold CPU $cpu %; $((l1 - l0)) leases"
done
daemon_stop

# ------------------------------------------------------------ plots, report

GNUPLOT_LIB=$ROOT/test/bench
gnuplot -e "dir='$OUT'" "$GNUPLOT_LIB/ramp.gp" 2>"$OUT/raw/gnuplot.txt" ||
    say "warning: ramp.png failed (see raw/gnuplot.txt)"
gnuplot -e "dir='$OUT'" "$GNUPLOT_LIB/latency.gp" 2>>"$OUT/raw/gnuplot.txt" ||
    say "warning: latency.png failed (see raw/gnuplot.txt)"
info elapsed_s "$((($(now_us) - T_START) / 1000000))"
info load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
say "done in $((($(now_us) - T_START) / 1000000)) s; results: $OUT/results.md, ramp.png, latency.png"
python3 "$LIB" report "$OUT"
