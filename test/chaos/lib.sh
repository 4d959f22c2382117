# shellcheck shell=bash
# Harness of the chaos suite (issue 4): test/chaos/sNN_<name>.sh, run one by
# one by scripts/chaos.sh (or alone: `test/chaos/s01_sigstop.sh`, with
# CHAOS_BUILD=build-asan and CHAOS_PROFILE=quick|long in the environment).
# A scenario:
#
#   #!/usr/bin/env bash
#   source "$(dirname "$0")/lib.sh"
#   chaos_setup                          # servers up in a fresh $DIR
#   add_app user step=500 max_pool_size=5000 min_size_percent=50
#   chaos_daemon a; chaos_daemon b       # idpoold, own --instance and --http
#   alerts_start; sampler_start user
#   consumers_start user 2               # recorded, --reconnect consumers
#   ... inject the fault; fault_landed "fenced=$n" "((n > 0))"; heal ...
#   t0=$(now_ns); recovered user "$t0"   # R: pool back above low water
#   consumers_wait user "$CHAOS_IDS"     # the profile's amount of traffic
#   consumers_stop user; daemons_stop; drain user
#   check_app user                       # idpool-check: U M A L, fills CHECK
#   row                                  # the result row; exits 0 or 1
#
# A failed expectation (expect, fault_landed, a violation found by
# idpool-check, a sanitizer report, a daemon that does not exit 0 on
# SIGTERM) does not stop the scenario: it makes its row result=FAIL. Helpers
# of test/integration/lib.sh that call `fail` do abort it; the EXIT trap then
# still prints a FAIL row. Every wait is bounded; the EXIT trap stops every
# process the scenario started, and the servers, and removes $DIR
# (CHAOS_KEEP=1 or KEEP=1 keeps it).
#
# This file sources the tests' one shell library, test/integration/lib.sh
# (setup, add_app, app_params, start_daemon, kill_daemon, wait_until, rcli,
# sql, redis_stop/kill/start, free_port, log_has, log_count, pool_key,
# pool_ge, lease_dump, probe, proc_alive, reap ...), and adds only what is
# the chaos suite's own: profiles, rows, recorded consumers, check_app.
# Python helpers that talk to Redis (lockflip.py, the rollback watcher of
# rollback.py) run with lib.sh's $PYTHON (IDPOOL_PYTHON, default
# /usr/bin/python3, which has python3-redis).

CHAOS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IDPOOL_SOURCE_ROOT=${IDPOOL_SOURCE_ROOT:-$(cd "$CHAOS_LIB_DIR/../.." && pwd)}
# The build whose binaries run (scripts/chaos.sh --build DIR sets it).
CHAOS_BUILD=${CHAOS_BUILD:-$IDPOOL_SOURCE_ROOT/build}
[[ $CHAOS_BUILD == /* ]] || CHAOS_BUILD=$IDPOOL_SOURCE_ROOT/$CHAOS_BUILD
# lib.sh takes the binaries (IDPOOLD, IDPOOL_LOAD ...) from IDPOOL_BUILD.
IDPOOL_BUILD=$CHAOS_BUILD
export CHAOS_BUILD
[[ ${CHAOS_KEEP:-0} == 1 ]] && export KEEP=1

# shellcheck source=../integration/lib.sh
source "$IDPOOL_SOURCE_ROOT/test/integration/lib.sh"

# ------------------------------------------------------------- profiles ---
# CHAOS_IDS    IDs the consumers should pop per scenario (consumers_wait)
# CHAOS_RATE   requests/s of one consumer group (idpool-load --rate, all its
#              connections together); CHAOS_BATCH IDs per request
# CHAOS_POOL   max_pool_size of the applications popped at CHAOS_RATE (large
#              enough that refills keep up: quick 4000, long 20000)
# CHAOS_ROUNDS how many times a scenario repeats its fault (at least)
# CHAOS_MAX_S  hard bound on any consumer's life (idpool-load --duration)
# Any of them can be set in the environment to override the profile.
PROFILE=${CHAOS_PROFILE:-quick}
case $PROFILE in
quick)
    : "${CHAOS_IDS:=300000}" "${CHAOS_RATE:=150}" "${CHAOS_BATCH:=100}"
    : "${CHAOS_POOL:=4000}" "${CHAOS_ROUNDS:=1}" "${CHAOS_MAX_S:=300}"
    ;;
long)
    : "${CHAOS_IDS:=10000000}" "${CHAOS_RATE:=400}" "${CHAOS_BATCH:=100}"
    : "${CHAOS_POOL:=20000}" "${CHAOS_ROUNDS:=3}" "${CHAOS_MAX_S:=3600}"
    ;;
*)
    printf 'chaos: unknown profile %s (quick|long)\n' "$PROFILE" >&2
    exit 64
    ;;
esac
export PROFILE CHAOS_IDS CHAOS_RATE CHAOS_BATCH CHAOS_POOL CHAOS_ROUNDS CHAOS_MAX_S

# Scenario number and name from the file name: s01_sigstop.sh -> 01 sigstop.
CHAOS_SCRIPT=$(basename "$0" .sh)
CHAOS_NUM=${CHAOS_SCRIPT#s}
CHAOS_NUM=${CHAOS_NUM%%_*}
CHAOS_NAME=${CHAOS_SCRIPT#s"$CHAOS_NUM"_}

# Daemon settings every chaos daemon starts with (a scenario may change
# them before it starts its daemons, or pass more to chaos_daemon).
CHAOS_DAEMON_ARGS=(--tick-ms 50 --lock-ttl-ms 500 --reload-ms 1000
    --redis-timeout-ms 1000 --mysql-timeout-ms 2000 --log-level info)

# shellcheck disable=SC2034 # CHECK is for the scenarios
declare -A CHECK=()     # last check_app: ids duplicates order ... (see check_app)
declare -A CHECK_SUM=() # summed over every check_app of the scenario
declare -A HTTP_PORT=() # daemon name -> its --http port
declare -A DAEMON_GEN=() # daemon name -> how many times it was started
declare -A BG_PID=()    # helper name -> pid of a background idpool-load
declare -A BG_STOP=()   # helper name -> its stop file
declare -A BG_LOG=()    # helper name -> its stdout/stderr
declare -A CONS_GEN=()  # app -> consumer groups started so far
declare -A LEASE_EXCLUDE=() # app -> file of "lo hi" leases check_app leaves out
FAILURES=()             # what went wrong (a row with any is result=FAIL)
EVIDENCE=()             # proof the fault landed (the row's fault=...)
RECOVERY_MS=''          # the worst recovered time (the row's recovery_ms=)
ROW_DONE=0

# ------------------------------------------------------------- messages ---

# now_ns: CLOCK_MONOTONIC in ns (system-wide, so comparable with the t_*_ns
# of idpool-load's logs).
# ($PYTHON, /usr/bin/python3: the first python3 on PATH may be a slow shim, pyenv's
# took 4 s to start on a loaded machine and stretched every window it timed)
now_ns() { "$PYTHON" -c 'import time; print(time.monotonic_ns())'; }
# sleep_until T0_NS MS: sleeps until MS ms after T0_NS (not at all if past).
sleep_until() {
    local left=$((($1 - $(now_ns)) / 1000000 + $2))
    ((left <= 0)) || sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
}
ms_since() { echo $((($(now_ns) - $1) / 1000000)); }

# expect COND MSG: COND (evaluated) must hold; else MSG is a failure.
# expect, failure, fault_landed and recovered record a failure and return 0
# (the scenario goes on under set -e).
expect() {
    if ! eval "$1"; then
        FAILURES+=("$2")
        info "EXPECT FAILED: $2 ($1)"
    fi
    return 0
}
# failure MSG: records a failure (the scenario goes on).
failure() {
    FAILURES+=("$*")
    info "EXPECT FAILED: $*"
}

# fault_landed EVIDENCE [COND]: records proof that the fault happened, shown
# in the row as fault=EVIDENCE (no spaces). With COND, COND must hold, else
# it is a failure ("the fault did not land"). A row without any evidence is
# result=FAIL: a scenario must prove its fault.
fault_landed() {
    local ev=${1// /_}
    if [[ -n ${2:-} ]] && ! eval "$2"; then
        EVIDENCE+=("$ev!")
        failure "the fault did not land: $1 ($2)"
        return 0
    fi
    EVIDENCE+=("$ev")
    info "fault landed: $1"
}

# ---------------------------------------------------------- set up/down ---

# chaos_setup: servers in a fresh $DIR (see setup in the integration lib),
# the tools are checked, and the EXIT trap prints a FAIL row on an abort.
chaos_setup() {
    local bin
    for bin in "$IDPOOLD" "$IDPOOL_LOAD" "$IDPOOL_CHECK"; do
        [[ -x $bin ]] || {
            printf 'chaos: %s is not built (chaos.sh --build DIR)\n' "$bin" >&2
            exit 2
        }
    done
    command -v curl >/dev/null || {
        printf 'chaos: curl is not installed\n' >&2
        exit 2
    }
    info "chaos $CHAOS_NUM $CHAOS_NAME: profile $PROFILE ids=$CHAOS_IDS rate=$CHAOS_RATE" \
        "batch=$CHAOS_BATCH rounds=$CHAOS_ROUNDS, build $CHAOS_BUILD"
    CHAOS_T0=$(now_ns)
    setup
    trap chaos_exit EXIT
}

# EXIT trap: an aborted scenario still prints its (FAIL) row, then the
# integration lib's cleanup stops everything.
chaos_exit() {
    local rc=$?
    set +e
    trap - EXIT
    if ((ROW_DONE == 0)); then
        ((rc == 0)) && rc=1
        failure "aborted (exit status $rc) before its row"
        print_row
    fi
    bg_stop_all >/dev/null 2>&1
    (exit "$rc")
    cleanup
}

# -------------------------------------------------------------- daemons ---

# chaos_daemon NAME [ARGS...]: starts idpoold NAME with CHAOS_DAEMON_ARGS,
# --instance NAME.<n> (n counts its starts, so leases tell restarts apart)
# and --http on a fresh port (HTTP_PORT[NAME]). Prefix an environment
# assignment for a fault hook: IDPOOL_FAULT=locked:stop chaos_daemon a
chaos_daemon() {
    local name=$1 port
    shift
    DAEMON_GEN[$name]=$((${DAEMON_GEN[$name]:-0} + 1))
    port=$(free_port)
    HTTP_PORT[$name]=$port
    start_daemon "$name" "${CHAOS_DAEMON_ARGS[@]}" --instance "$name.${DAEMON_GEN[$name]}" \
        --http "127.0.0.1:$port" "$@"
}

# daemons_stop [NAME...]: SIGTERM to the daemons (default: all running);
# each must exit 0 within 10 s (else a failure, not an abort).
daemons_stop() {
    local names=("$@") n
    ((${#names[@]})) || names=("${!DAEMON_PID[@]}")
    for n in "${names[@]}"; do
        [[ -n ${DAEMON_PID[$n]:-} ]] || continue
        kill_daemon "$n" TERM 10
        expect "[[ ${DAEMON_STATUS[$n]} == 0 ]]" \
            "daemon $n exited with status ${DAEMON_STATUS[$n]} on SIGTERM"
    done
}

# crash_daemon NAME: kill -9; it must have died of it (status 137).
crash_daemon() {
    kill_daemon "$1" KILL
    expect "[[ ${DAEMON_STATUS[$1]} == 137 ]]" \
        "daemon $1: status ${DAEMON_STATUS[$1]} after kill -9, expected 137"
}

# wait_daemon_exit NAME TIMEOUT_S: waits until the daemon exited by itself
# (e.g. a kill fault hook); reaps it and records DAEMON_STATUS. 1 on timeout.
wait_daemon_exit() {
    local name=$1 pid st=0
    pid=${DAEMON_PID[$name]:?no daemon $name}
    wait_until "$2" proc_gone "$pid" || return 1
    wait "$pid" 2>/dev/null || st=$?
    daemon_reaped "$name" "$pid" "$st" "exited by itself"
}

# wait_daemon_stopped NAME TIMEOUT_S: until the daemon is stopped (state T),
# e.g. by a stop fault hook.
wait_daemon_stopped() {
    local pid=${DAEMON_PID[$1]:?no daemon $1}
    wait_until "$2" proc_stopped "$pid"
}

# http_get NAME PATH: GET from daemon NAME's status server (body on stdout).
http_get() {
    curl -s --max-time 3 "http://127.0.0.1:${HTTP_PORT[$1]:?no http port for $1}$2"
}

# json_field KEY: the first value of KEY anywhere in the JSON on stdin
# (depth first), printed raw; empty if absent.
json_field() {
    python3 -c '
import json, sys
def find(o, k):
    if isinstance(o, dict):
        if k in o:
            return o[k]
        o = list(o.values())
    if isinstance(o, list):
        for v in o:
            r = find(v, k)
            if r is not None:
                return r
    return None
try:
    v = find(json.load(sys.stdin), sys.argv[1])
except Exception:
    v = None
if v is not None:
    print(json.dumps(v) if isinstance(v, (dict, list)) else v)' "$1"
}

# app_stat NAME APP FIELD: a field of GET /v1/apps/APP from daemon NAME
# (e.g. fenced, pushed, leases); empty if unavailable.
app_stat() { http_get "$1" "/v1/apps/$2" | json_field "$3"; }

# fenced_count NAME APP: pushes of APP the daemon saw fenced off, from its
# status server, or from its log if that does not answer.
fenced_count() {
    local n
    n=$(app_stat "$1" "$2" fenced 2>/dev/null) || n=''
    [[ $n =~ ^[0-9]+$ ]] || n=$(log_count "$1" "app=$2 push fenced off")
    echo "${n:-0}"
}

# logs_count ERE: matching lines over the logs of every daemon started so far.
logs_count() {
    local n t=0
    for n in "${DAEMON_NAMES[@]}"; do t=$((t + $(log_count "$n" "$1"))); done
    echo "$t"
}

# ---------------------------------------- refill-stage faults (01, 02) ---
# A victim daemon's fault hook fires at a stage of a refill (IDPOOL_FAULT,
# src/daemon/fault.c) while the healthy daemons b and c serve `main`:
#   serve_main COL=VAL...               # main served, sampled, two consumers
#   each_stage HOOK ODD_TYPE INCREMENT_MAX on_stage
# where on_stage STAGE KEY X T0_NS checks what the scenario proves.

# serve_main COL=VAL...: application `main` (step 200, pool CHAOS_POOL, low
# water 50 %, and the columns given) served by the healthy daemons b and c
# (a long --reload-ms: they learn of a later application only by SIGHUP),
# filled to its low water, its length sampled and two consumers popping it;
# APPS=(main).
serve_main() {
    add_app main step=200 max_pool_size="$CHAOS_POOL" min_size_percent=50 "$@"
    APPS=(main)
    chaos_daemon b --reload-ms 600000
    chaos_daemon c --reload-ms 600000
    wait_until 10 pool_ge main $((CHAOS_POOL / 2)) || fail "main never filled"
    sampler_start main
    consumers_start main 2
}

# each_stage HOOK ODD_TYPE INCREMENT_MAX FN: STAGES, the refill stages a
# fault hook fires at (locked, reserved, pushing), CHAOS_ROUNDS times over;
# round R (from 1) of stage STAGE: stage_victim STAGE<R> x<R> STAGE HOOK TYPE
# INCREMENT_MAX (TYPE: ODD_TYPE in odd rounds, the other in even ones), then
# FN STAGE KEY X T0_NS, T0 being when the victim was seen hit.
each_stage() {
    local hook=$1 odd=$2 incr=$3 fn=$4 i r=0 stage type
    STAGES=()
    for ((i = 0; i < CHAOS_ROUNDS; i++)); do STAGES+=(locked reserved pushing); done
    for stage in "${STAGES[@]}"; do
        r=$((r + 1))
        type=$odd
        ((r % 2)) || type=$((3 - odd))
        stage_victim "$stage$r" "x$r" "$stage" "$hook" "$type" "$incr" || continue
        "$fn" "$stage" "$stage$r" "x$r" "$(now_ns)"
    done
}

# stage_victim KEY X STAGE HOOK TYPE INCREMENT_MAX: a fresh application KEY
# (increasing_type TYPE, step 200, pool 4000, low water 50 %) that only the
# victim daemon X knows at first, started with IDPOOL_FAULT=STAGE:HOOK; waits
# at most 15 s until the hook stopped it (stop) or ended it (kill). 1 (a
# failure recorded, X stopped) if it did not.
stage_victim() {
    local key=$1 x=$2 stage=$3 hook=$4
    # (|| fail: a caller's `|| continue` would keep set -e from stopping here)
    add_app "$key" increasing_type="$5" step=200 max_pool_size=4000 min_size_percent=50 \
        increment_max="$6" || fail "application $key not added"
    APPS+=("$key")
    IDPOOL_FAULT=$stage:$hook chaos_daemon "$x"
    if [[ $hook == stop ]]; then
        wait_daemon_stopped "$x" 15 && return 0
        failure "$stage: $x never stopped itself"
    else
        wait_daemon_exit "$x" 15 && return 0
        failure "$stage: $x never killed itself"
    fi
    daemons_stop "$x"
    return 1
}

# fault_fired NAME STAGE:HOOK: daemon NAME logged that its fault hook fired.
fault_fired() { log_has "$1" "fault injection: IDPOOL_FAULT=$2 fires now"; }

# ------------------------------------------------- consumers and helpers ---

# bg_run NAME CMD...: any helper in the background, managed like bg_start
# (the command must stop by itself once $DIR/NAME.stopfile exists).
bg_run() {
    local name=$1
    shift
    [[ -z ${BG_PID[$name]:-} ]] || fail "helper $name is already running"
    BG_STOP[$name]=$DIR/$name.stopfile
    BG_LOG[$name]=$DIR/$name.out
    rm -f "${BG_STOP[$name]}"
    "$@" </dev/null >"${BG_LOG[$name]}" 2>&1 &
    BG_PID[$name]=$!
    info "started $name (pid $!): $*"
}

# bg_start NAME ARGS...: idpool-load ARGS in the background with
# --stop-file $DIR/NAME.stopfile; stdout/stderr to $DIR/NAME.out. Its Redis:
# LOAD_TARGET (e.g. --sentinel ... --master ...), else --port $REDIS_PORT.
LOAD_TARGET=()
bg_start() {
    local name=$1 where=(--port "$REDIS_PORT")
    shift
    ((${#LOAD_TARGET[@]} == 0)) || where=("${LOAD_TARGET[@]}")
    bg_run "$name" "$IDPOOL_LOAD" "${where[@]}" "$@" --stop-file "$DIR/$name.stopfile"
}

# bg_stop NAME [TIMEOUT_S]: graceful stop (stop file, then SIGTERM, then
# SIGKILL; bounded); its exit status in BG_STATUS.
bg_stop() {
    local name=$1 timeout=${2:-10} pid
    BG_STATUS=''
    pid=${BG_PID[$name]:-}
    [[ -n $pid ]] || return 0
    touch "${BG_STOP[$name]}"
    if ! wait_until "$timeout" proc_gone "$pid" >/dev/null 2>&1; then
        info "$name (pid $pid) ignored its stop file; SIGTERM"
        kill -TERM "$pid" 2>/dev/null || true
        reap "$pid" 5 || true
    fi
    BG_STATUS=0
    wait "$pid" 2>/dev/null || BG_STATUS=$?
    unset "BG_PID[$name]"
    info "$name stopped, status $BG_STATUS: $(tail -n 1 "${BG_LOG[$name]}" 2>/dev/null)"
}

bg_stop_all() {
    local n
    for n in "${!BG_PID[@]}"; do bg_stop "$n" 5; done
}

# consumers_start APP N [idpool-load args]: N recorded consumers (one
# idpool-load, --conns N, LPOP batches of CHAOS_BATCH, CHAOS_RATE requests/s
# in all) that reconnect after errors and run until consumers_stop. Each
# call starts a new group: logs $DIR/APP.c<g>.<i>.bin. `--mode take` makes
# them idpool_take clients (the log header says which kind; idpool-check
# reports exposure per kind); `--backoff-ms 1:2` retries at once.
consumers_start() {
    local app=$1 n=$2 g
    shift 2
    g=${CONS_GEN[$app]:-0}
    CONS_GEN[$app]=$((g + 1))
    bg_start "cons.$app.$g" --mode lpop --key "$(pool_key "$app")" --conns "$n" --pipeline 1 \
        --batch "$CHAOS_BATCH" --rate "$CHAOS_RATE" --duration "$CHAOS_MAX_S" \
        --record "$DIR/$app.c$g" --reconnect --timeout-ms 1000 "$@"
}

# consumers_stop APP: stops every running consumer group of APP. A consumer
# that exits with a malformed ID (2) or any error status is a failure.
consumers_stop() {
    local app=$1 g
    for ((g = 0; g < ${CONS_GEN[$app]:-0}; g++)); do
        [[ -n ${BG_PID[cons.$app.$g]:-} ]] || continue
        bg_stop "cons.$app.$g"
        expect "[[ $BG_STATUS == 0 ]]" "consumers $app.$g exited with status $BG_STATUS"
    done
}

# popped APP[,APP...]: about how many IDs the consumers of the
# application(s) have popped so far (from the size of their logs, which
# idpool-load flushes every second; exact once they stopped).
popped() {
    local bytes=0 f s app
    for app in ${1//,/ }; do
        for f in "$DIR/$app".c*.bin; do
            [[ -e $f ]] || continue
            s=$(stat -c %s "$f")
            bytes=$((bytes + (s > 32 ? s - 32 : 0)))
        done
    done
    # A record is 24 bytes plus 8 per ID.
    echo $((bytes * CHAOS_BATCH / (8 * CHAOS_BATCH + 24)))
}

popped_ge() { (($(popped "$1") >= $2)); }

# popped_wait APP[,APP...] N MESSAGE: waits until the consumers popped N IDs
# in all; the bound scales with the profile's rate (three times the nominal
# time of one consumer group, at least 30 s). A timeout is a failure with
# MESSAGE.
popped_wait() {
    local timeout=$(($2 * 3 / (CHAOS_RATE * CHAOS_BATCH) + 10))
    ((timeout >= 30)) || timeout=30
    wait_until "$timeout" popped_ge "$1" "$2" ||
        failure "$3 (popped $(popped "$1") of $2 IDs in ${timeout}s)"
}

# consumers_wait APP[,APP...] TARGET [TIMEOUT_S]: lets the consumers run
# until they popped TARGET IDs in all (default timeout: TARGET at a tenth of
# the nominal rate, at least 60 s). A timeout is a failure (the pools were
# not served).
consumers_wait() {
    local app=$1 target=$2 timeout=${3:-}
    if [[ -z $timeout ]]; then
        timeout=$((target * 10 / (CHAOS_RATE * CHAOS_BATCH) + 1))
        ((timeout >= 60)) || timeout=60
    fi
    wait_until "$timeout" popped_ge "$app" "$target" ||
        failure "$app: consumers popped only $(popped "$app") of $target IDs in ${timeout}s"
}

# sampler_start APP [INTERVAL_MS]: samples LLEN of APP's pool to $DIR/APP.llen.
sampler_start() {
    bg_start "llen.$1" --mode llen --key "$(pool_key "$1")" --interval-ms "${2:-20}" \
        --out "$DIR/$1.llen" --reconnect --duration "$CHAOS_MAX_S" --timeout-ms 1000
}

# alerts_start: records every message on the alert channel to $DIR/alerts.txt.
alerts_start() {
    bg_start alerts --mode subscribe --key "$IDPOOL_KEY_PREFIX:alerts" --out "$DIR/alerts.txt" \
        --reconnect --duration "$CHAOS_MAX_S" --timeout-ms 1000
}

# alert_seen APP ALERT STATE: the alert recorder saw that event.
alert_seen() {
    [[ -r $DIR/alerts.txt ]] &&
        grep -F "\"alert\":\"$2\"" "$DIR/alerts.txt" | grep -F "\"app\":\"$1\"" |
        grep -qF "\"state\":\"$3\""
}

# alert_count APP ALERT STATE: how many such events were recorded.
alert_count() {
    [[ -r $DIR/alerts.txt ]] || {
        echo 0
        return
    }
    grep -F "\"alert\":\"$2\"" "$DIR/alerts.txt" | grep -F "\"app\":\"$1\"" |
        grep -cF "\"state\":\"$3\"" || true
}

# drain APP: pops what is left in APP's pool with one more recorded consumer
# (run it after daemons_stop), so the check covers the pool's content too.
drain() {
    local app=$1 n
    redis_of "$app"
    n=$(llen "$app")
    ((n > 0)) || return 0
    "$IDPOOL_LOAD" --port "$REDIS_PORT" --mode lpop --key "$(pool_key "$app")" --conns 1 \
        --pipeline 1 --batch 1000 --count "$n" --duration 30 --record "$DIR/$app.cdrain" \
        --timeout-ms 5000 >"$DIR/$app.drain.out" 2>&1 ||
        failure "$app: draining the pool ($n IDs) failed: $(tail -n 1 "$DIR/$app.drain.out")"
    info "$app: drained $n IDs left in the pool"
}

# ------------------------------------------------------------- recovery ---

# recovery_ms APP T0_NS [TIMEOUT_S]: waits (default 15 s) until the pool is
# at or above its low-water mark; prints the ms since T0_NS, or "timeout"
# (status 1).
recovery_ms() {
    local app=$1 t0=$2 timeout=${3:-15} deadline
    app_params "$app"
    deadline=$(($(now_us) + timeout * 1000000))
    while (($(now_us) < deadline)); do
        if pool_ge "$app" "$P_LOW"; then
            ms_since "$t0"
            return 0
        fi
        sleep 0.02
    done
    echo timeout
    return 1
}

# recovered APP T0_NS [TIMEOUT_S]: recovery_ms as an expectation (R); the
# worst time goes into the row's recovery_ms.
recovered() {
    local ms
    app_params "$1"
    if ms=$(recovery_ms "$@"); then
        info "$1: pool back above low water $P_LOW after $ms ms"
        LAST_RECOVERY_MS=$ms
        if [[ -z $RECOVERY_MS ]] || ((ms > RECOVERY_MS)); then RECOVERY_MS=$ms; fi
        return 0
    fi
    failure "R: $1's pool not back above low water within ${3:-15} s"
    RECOVERY_MS=timeout
}

# ---------------------------------------------------------------- check ---

# check_app APP [idpool-check args]: dumps APP's leases, runs idpool-check
# over every consumer log of APP (and the llen samples and alerts if
# recorded). Fills CHECK (ids consumers duplicates order cross_order arith
# unleased lease_overlaps gaps empty_pops below_low_ms exposed exposed_lpop
# exposed_take) and adds them
# to CHECK_SUM. A violation (exit 1) or an error (2) is a failure.
# LEASE_EXCLUDE[APP]=FILE ("lo hi" lines): leases that must never have been
# served are left out of the leases file, so any ID of theirs is unleased.
check_app() {
    local app=$1 st=0 args=() logs=() f kv line
    shift
    app_params "$app"
    lease_ranges "$app"
    if [[ -n ${LEASE_EXCLUDE[$app]:-} && -s ${LEASE_EXCLUDE[$app]} ]]; then
        # Ranges that must never be served (say, a commit with an unknown
        # outcome): left out, so an ID from them counts as unleased.
        grep -vxF -f "${LEASE_EXCLUDE[$app]}" "$DIR/$app.leases" >"$DIR/$app.leases.tmp" || true
        info "$app: $(($(wc -l <"$DIR/$app.leases") - $(wc -l <"$DIR/$app.leases.tmp"))) lease(s) left out of the check"
        mv -f "$DIR/$app.leases.tmp" "$DIR/$app.leases"
    fi
    for f in "$DIR/$app".c*.bin; do
        [[ -e $f ]] && logs+=("$f")
    done
    if ((${#logs[@]} == 0)); then
        failure "$app: no consumer logs to check"
        return 0
    fi
    args=(--type "$P_TYPE" --start-offset "$P_START" --delta "$P_DELTA" --remainder "$P_REM"
        --leases "$DIR/$app.leases")
    if [[ -s $DIR/$app.llen ]]; then
        args+=(--low-water "$P_LOW" --llen "$DIR/$app.llen")
    fi
    "$IDPOOL_CHECK" "${args[@]}" "$@" "${logs[@]}" >"$DIR/$app.check" 2>&1 || st=$?
    line=$(check_summary "$DIR/$app.check")
    info "$app: $line (status $st)"
    CHECK=()
    for kv in ${line#check: }; do
        # shellcheck disable=SC2034 # CHECK is for the scenarios
        [[ $kv == *=* ]] && CHECK[${kv%%=*}]=${kv#*=}
    done
    check_sum "$line"
    check_verdict "$app" "$st" "$line"
    return 0
}

# lease_ranges APP: APP's leases as idpool-check --leases reads them ("lo hi"
# lines, by lo) in $DIR/APP.leases.
lease_ranges() {
    lease_dump "$1" "$DIR/$1.leases.tsv"
    cut -f 1,2 "$DIR/$1.leases.tsv" | tr '\t' ' ' >"$DIR/$1.leases"
}

# check_summary REPORT: the last "check: key=value ..." line of an
# idpool-check report (status 1 if none).
check_summary() { grep '^check: ' "$1" | tail -n 1; }

# check_sum LINE [KEY...]: adds the numeric values of a check_summary LINE
# (only the KEYs given, if any) to CHECK_SUM.
check_sum() {
    local line=$1 kv k v
    shift
    for kv in ${line#check: }; do
        [[ $kv == *=* ]] || continue
        k=${kv%%=*} v=${kv#*=}
        (($# == 0)) || [[ " $* " == *" $k "* ]] || continue
        [[ $v =~ ^[0-9]+$ ]] && CHECK_SUM[$k]=$((${CHECK_SUM[$k]:-0} + v))
    done
    return 0
}

# check_verdict APP STATUS LINE: idpool-check's exit STATUS on APP (report
# $DIR/APP.check, summary LINE) as failures: 1 found violations, more an error,
# and a missing summary.
check_verdict() {
    local app=$1 st=$2 line=$3
    case $st in
    0) ;;
    1) failure "$app: idpool-check found violations: $line" ;;
    *)
        failure "$app: idpool-check failed (status $st): $(tail -n 3 "$DIR/$app.check" | tr '\n' ' ')"
        ;;
    esac
    [[ -n $line ]] || failure "$app: idpool-check printed no summary"
}

# apps_csv: the scenario's applications "${APPS[@]}" joined by commas (for
# consumers_wait and popped).
apps_csv() {
    local IFS=,
    echo "${APPS[*]}"
}

# finish_apps [key=val...]: the end of a scenario over "${APPS[@]}": their
# consumers and every daemon stopped, each pool drained and checked, then
# the row (with the given columns).
finish_apps() {
    local key
    for key in "${APPS[@]}"; do consumers_stop "$key"; done
    daemons_stop
    for key in "${APPS[@]}"; do
        drain "$key"
        check_app "$key"
    done
    row "$@"
}

# ------------------------------------------------------------------ row ---

# sanitizer_reports: daemon logs with an ASan/UBSan report or an internal
# error (reported_logs), as failures.
sanitizer_reports() {
    local n
    for n in $(reported_logs); do
        failure "sanitizer report or internal error in $n.log"
    done
}

# verify_ledger: idpoolctl verify over the scenario's ledger (MySQL only:
# check_app drained and checked the pools); a conflict, or a ledger it
# cannot read, is a failure.
verify_ledger() {
    local out st=0
    out=$("$IDPOOLCTL" verify --env "$IDPOOL_MYSQL_URL" 2>&1) || st=$?
    info "idpoolctl verify: $(tail -n 1 <<<"$out")"
    ((st == 0)) || failure "idpoolctl verify, status $st: $(head -n 5 <<<"$out" | tr '\n' ' ')"
}

# print_row [key=val...]: the result row (see row).
print_row() {
    local -A col=()
    local k kv ev res=ok order
    for k in ids duplicates arith unleased gaps empty_pops exposed exposed_lpop exposed_take; do
        col[$k]=${CHECK_SUM[$k]:-0}
    done
    order=$((${CHECK_SUM[order]:-0} + ${CHECK_SUM[cross_order]:-0}))
    col[order]=$order
    col[unleased]=$((${CHECK_SUM[unleased]:-0} + ${CHECK_SUM[lease_overlaps]:-0}))
    col[recovery_ms]=${RECOVERY_MS:--}
    ev=$(
        IFS=,
        echo "${EVIDENCE[*]}"
    )
    col[fault]=${ev:-none}
    local extra=()
    for kv in "$@"; do
        k=${kv%%=*}
        if [[ -v "col[$k]" ]]; then col[$k]=${kv#*=}; else extra+=("$kv"); fi
    done
    ((${#FAILURES[@]} == 0)) || res=FAIL
    printf 'chaos: %s %s ids=%s duplicates=%s order=%s arith=%s unleased=%s gaps=%s' \
        "$CHAOS_NUM" "$CHAOS_NAME" "${col[ids]}" "${col[duplicates]}" "${col[order]}" "${col[arith]}" \
        "${col[unleased]}" "${col[gaps]}"
    printf ' empty_pops=%s exposed=%s exposed_lpop=%s exposed_take=%s recovery_ms=%s' \
        "${col[empty_pops]}" "${col[exposed]}" "${col[exposed_lpop]}" "${col[exposed_take]}" \
        "${col[recovery_ms]}"
    ((${#extra[@]} == 0)) || printf ' %s' "${extra[@]}"
    printf ' secs=%s fault=%s result=%s\n' "$(($(ms_since "$CHAOS_T0") / 1000))" "${col[fault]}" "$res"
    for k in "${FAILURES[@]}"; do
        printf 'chaos:   %s FAIL: %s\n' "$CHAOS_NUM" "$k"
    done
    ROW_DONE=1
}

# row [key=val...]: prints the scenario's result row and exits: 0 if no
# failure was recorded, else 1. The counts come from CHECK_SUM; key=val
# overrides one or adds a column (e.g. window_ms=12). A scenario without
# fault evidence, or with a sanitizer report, fails; so does one where an
# idpool_take client received an ID twice, even inside an exposure window
# (README: idpool_take has no restart window).
row() {
    bg_stop_all >/dev/null 2>&1
    sanitizer_reports
    # After check_app (MySQL was up for its lease dump): the ledger, verified whole.
    [[ -z ${CHECK_SUM[ids]:-} ]] || verify_ledger
    ((${CHECK_SUM[exposed_take]:-0} == 0)) ||
        failure "idpool_take clients received ${CHECK_SUM[exposed_take]} IDs twice" \
            "inside the exposure window (the zero-window take)"
    ((${#EVIDENCE[@]})) || failure "no evidence that the fault landed"
    [[ -n ${CHECK_SUM[ids]:-} ]] || failure "nothing was checked (check_app never ran)"
    print_row "$@"
    ((${#FAILURES[@]} == 0)) || exit 1
    exit 0
}

# ------------------------------------- additions by engineer B (s07-s12) ---

# alerts_firing NAME APP: the alerts of APP daemon NAME has firing, as a
# JSON list from GET /v1/apps/APP ("[]" when none; empty if no answer).
alerts_firing() { app_stat "$1" "$2" alerts 2>/dev/null || true; }

# alerts_clear APP [NAME...]: no alert of APP is firing in the daemons
# (default: every running one); a daemon that does not answer is not clear.
# For wait_until: R wants every alert that fired resolved after a fault.
alerts_clear() {
    local app=$1 n
    shift
    local names=("$@")
    ((${#names[@]})) || names=("${!DAEMON_PID[@]}")
    for n in "${names[@]}"; do
        [[ $(alerts_firing "$n" "$app") == '[]' ]] || return 1
    done
}

# ---------------------------------- Redis rollbacks (07, 14, 17, 18) ---

# The watchers, log filter and stale and take counters of the rollback
# scenarios.
ROLLBACK_PY=$CHAOS_LIB_DIR/rollback.py

# The bound of a Redis-rollback window for plain LPOP clients, documented in
# docs/guarantees.md ("The restart window"): the daemon's reconnect backoff
# (at most 1 s, BACKOFF_MAX_MS in src/daemon/rds.c) plus its handshake and
# epoch sweep, a few round trips (500 ms allowed: an ASan daemon on a loaded
# 2-core machine). CHAOS_WINDOW_LIMIT_MS overrides it.
# shellcheck disable=SC2034 # for the scenarios
WINDOW_BOUND_MS=1500

# joined SEP WORD...: the words joined by SEP (for a row's per-round column).
joined() {
    local IFS=$1
    shift
    echo "$*"
}

run_id() { rcli INFO server | sed -n 's/^run_id:\([0-9a-f]*\).*/\1/p'; }
persistence() { rcli INFO persistence | sed -n "s/^$1:\([^[:space:]]*\).*/\1/p"; }

# save_rdb OUT: BGSAVE now; OUT becomes a Redis dir whose AOF is that
# snapshot alone (base file + manifest: what servers.sh's AOF Redis loads).
save_rdb() {
    local out=$1 last
    last=$(persistence rdb_last_bgsave_time_sec)
    wait_until 20 eval '[[ $(persistence rdb_bgsave_in_progress) == 0 ]]' ||
        fail "a BGSAVE is still running"
    rcli BGSAVE >/dev/null || fail "BGSAVE refused"
    wait_until 20 eval '[[ $(persistence rdb_bgsave_in_progress) == 0 &&
        $(persistence rdb_last_bgsave_status) == ok ]]' || fail "BGSAVE did not finish"
    [[ -s $DIR/redis/dump.rdb ]] || fail "no dump.rdb after BGSAVE (last save $last)"
    aof_base mv "$DIR/redis/dump.rdb" "$out"
}

# aof_base mv|cp RDB OUT: OUT becomes a Redis dir whose AOF is the snapshot
# RDB alone (base file + manifest: what servers.sh's AOF Redis loads).
aof_base() {
    mkdir -p "$3/appendonlydir"
    "$1" "$2" "$3/appendonlydir/appendonly.aof.1.base.rdb"
    printf 'file appendonly.aof.1.base.rdb seq 1 type b\n' \
        >"$3/appendonlydir/appendonly.aof.manifest"
}

# save_dump OUT: SAVE now (dump.rdb stays in place, for DEBUG RELOAD
# NOSAVE); OUT gets a copy as the base of its AOF, for probe.
save_dump() {
    rm -f "$DIR/redis/dump.rdb"
    rcli SAVE >/dev/null || fail "SAVE refused"
    [[ -s $DIR/redis/dump.rdb ]] || fail "no dump.rdb after SAVE"
    aof_base cp "$DIR/redis/dump.rdb" "$1"
}

# save_aof OUT: a copy of Redis' data directory as it is on disk now (AOF
# base, increments and manifest). The AOF was rewritten just before, so the
# copy is small; automatic rewrites are off, so the files do not change
# under the copy except by appends (a torn last command is truncated on
# load, aof-load-truncated).
save_aof() {
    cp -a "$DIR/redis" "$1"
    rm -f "$1/dump.rdb"
}

# save_old KIND APP: the data set of now in $DIR/old (KIND rdb: a BGSAVE
# snapshot; aof: the AOF files; dump: SAVE, dump.rdb left in place), probed
# for APP (PROBE_EPOCH, PROBE_NEXT, $DIR/probe.pool). Aborts when the old
# meta carries no epoch: the watchers would see it "gone" at once.
save_old() {
    rm -rf "$DIR/old"
    case $1 in
    rdb) save_rdb "$DIR/old" ;;
    aof) save_aof "$DIR/old" ;;
    dump) save_dump "$DIR/old" ;;
    esac
    probe "$DIR/old" "$2" 10 "the old data set"
    [[ -n $PROBE_EPOCH ]] || fail "$2: the old data set's meta has no epoch"
    info "$2: the old data set ($1): meta next $PROBE_NEXT, epoch $PROBE_EPOCH," \
        "pool of $(grep -c . "$DIR/probe.pool") IDs"
}

# check_rollback APP FROM TO: U, A, L over all logs with the exposure window
# [FROM, TO] (as check_app does, but --type trend: the order is judged next);
# M over the logs without the records sent inside the window (a monotonic
# APP only).
check_rollback() {
    local app=$1 from=$2 to=$3 f n left=0 line st=0 kv logs=() mlogs=()
    app_params "$app"
    lease_ranges "$app"
    mkdir -p "$DIR/m.$app"
    for f in "$DIR/$app".c*.bin; do
        [[ -e $f ]] || continue
        logs+=("$f")
        n=$(python3 "$ROLLBACK_PY" filter "$from" "$to" "$f" "$DIR/m.$app/${f##*/}") ||
            fail "filtering $f failed"
        left=$((left + n))
        # a buffering client's handouts need not be ordered across consumers
        [[ $f == *.buffered.* ]] || mlogs+=("$DIR/m.$app/${f##*/}")
    done
    ((${#logs[@]})) || fail "$app: no consumer logs"
    local common=(--start-offset "$P_START" --delta "$P_DELTA" --remainder "$P_REM"
        --leases "$DIR/$app.leases")
    # U A L, exposure
    "$IDPOOL_CHECK" --type trend "${common[@]}" --exposure "$from:$to" "${logs[@]}" \
        >"$DIR/$app.check" 2>&1 || st=$?
    line=$(check_summary "$DIR/$app.check")
    info "$app: U A L: $line (status $st)"
    check_sum "$line" ids duplicates arith unleased lease_overlaps gaps empty_pops exposed exposed_lpop \
        exposed_take
    check_verdict "$app" "$st" "$line"
    [[ $P_TYPE == monotonic ]] || return 0
    # M, outside the window
    st=0
    info "$app: M checked without the $left records sent inside the window"
    # --allow-empty: a consumer may have sent everything inside the window
    # (its whole log was checked above).
    "$IDPOOL_CHECK" --type monotonic --allow-empty "${common[@]}" "${mlogs[@]}" >"$DIR/$app.mcheck" 2>&1 ||
        st=$?
    line=$(check_summary "$DIR/$app.mcheck")
    info "$app: M outside the window: $line (status $st)"
    check_sum "$line" order cross_order
    for kv in ${line#check: }; do
        case ${kv%%=*} in
        order | cross_order)
            ((${kv#*=} == 0)) || failure "$app: M violated outside the exposure window: $line"
            ;;
        esac
    done
    ((st <= 1)) || failure "$app: idpool-check (M) failed, status $st: $(tail -n 2 "$DIR/$app.mcheck")"
    [[ -n $line ]] || failure "$app: idpool-check (M) printed no summary"
}

# rollback_apps PREFIX ROUNDS: one monotonic application per round
# (PREFIX1..), served by daemons a and b, filled above low water. Their
# takes are not rate-limited (max_size_per_second), so that idpool_take
# consumers pop as fast as LPOP ones.
rollback_apps() {
    round_apps_add "$1" "$2"
    chaos_daemon a
    chaos_daemon b
    round_apps_filled "$1" "$2"
}

# round_apps_add PREFIX ROUNDS: the applications PREFIX1..ROUNDS of a
# rollback or failover scenario (round_app_add); round_apps_filled PREFIX
# ROUNDS: each is above its low-water mark (apps_filled).
round_apps_add() {
    local r
    for ((r = 1; r <= $2; r++)); do round_app_add "$1$r"; done
}
round_apps_filled() {
    local r
    for ((r = 1; r <= $2; r++)); do apps_filled "$1$r"; done
}

# round_app_add APP...: applications of a round (monotonic unless
# ROUND_APP_TYPE=2, step 1000, pool 30000, low water 50 %, takes not
# rate-limited). apps_filled APP...: each is above its low-water mark
# (the daemons filled it), read where its pool lives (redis_of).
round_app_add() {
    local app
    for app in "$@"; do
        add_app "$app" step=1000 max_pool_size=30000 min_size_percent=50 increment_max=3 \
            max_size_per_second=1000000 increasing_type="${ROUND_APP_TYPE:-1}"
    done
}
apps_filled() {
    local app
    for app in "$@"; do
        app_params "$app"
        redis_of "$app"
        wait_until 20 pool_ge "$app" "$P_LOW" || fail "$app never filled"
    done
}

# restore_watched APP DEAD_RUN_ID: Redis (already killed) comes back from
# the data set in $DIR/old, while the window watcher polls APP's meta (for
# at most 60 s: on a loaded machine the harness itself may take long to
# start the daemons; the bound is checked from their start); T_FROM is when
# the restart began. (Start it again yourself.)
restore_watched() {
    rm -f "$DIR/watch"
    "$PYTHON" "$ROLLBACK_PY" watch "$REDIS_PORT" "$(meta_key "$1")" "$PROBE_EPOCH" "$2" \
        "$DIR/watch" 60 &
    WATCHER=$!
    rm -rf "$DIR/redis"
    mv "$DIR/old" "$DIR/redis"
    T_FROM=$(now_ns)
}

# window_read APP LIMIT_MS [SINCE_NS]: waits for the watcher; W_STATE
# (discarded, replaced, timeout), W_ACCEPT, W_TO (ns) and WINDOW (ms, Redis
# serving again, past LOADING, to the restored meta gone), which must stay
# within LIMIT_MS; with SINCE_NS (e.g. when the daemons were started
# again: without a daemon the window lasts until one runs), W_BOUNDED, the
# part of the window after SINCE_NS, must.
window_read() {
    wait_until 65 test -s "$DIR/watch" || failure "$1: the window watcher did not report"
    wait "$WATCHER" 2>/dev/null || true
    window_parse "$@"
}

# window_parse APP LIMIT_MS [SINCE_NS]: reads $DIR/watch (see window_read).
window_parse() {
    local app=$1 polls t_from since=${3:-0}
    W_STATE=missing W_ACCEPT=0 W_TO=0 polls=0 t_from=''
    [[ -s $DIR/watch ]] && read -r W_STATE W_ACCEPT W_TO polls t_from <"$DIR/watch"
    [[ -z $t_from ]] || T_FROM=$t_from
    ((W_ACCEPT > 0)) || W_ACCEPT=$T_FROM
    ((W_TO > 0)) || W_TO=$(now_ns)
    WINDOW=$(((W_TO - W_ACCEPT) / 1000000))
    ((since > W_ACCEPT)) || since=$W_ACCEPT
    W_BOUNDED=$(((W_TO - since) / 1000000))
    expect "((W_BOUNDED <= $2))" \
        "$app: exposure window $W_BOUNDED ms (of $WINDOW), above the documented bound ($2 ms)"
    info "$app: window $WINDOW ms: Redis served again $(((W_ACCEPT - T_FROM) / 1000000)) ms after" \
        "the fault began, the old meta $W_STATE after $polls polls"
}

# started_ns NAME: when daemon NAME's current process started (the time of
# its last "idpoold ... starting" log line), on the CLOCK_MONOTONIC scale of
# now_ns; empty if it has not logged it.
started_ns() {
    local ts
    ts=$(grep -E '^[^ ]+ info +idpoold .* starting' "$DIR/$1.log" 2>/dev/null | tail -n 1 |
        cut -d' ' -f1)
    [[ -n $ts ]] || return 0
    python3 -c '
import datetime, sys, time
t = datetime.datetime.strptime(sys.argv[1], "%Y-%m-%dT%H:%M:%S.%fZ")
wall = int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000) * 1000000
print(wall - (time.time_ns() - time.monotonic_ns()))' "$ts"
}

# run_watched PORT APP OLD_EPOCH LIMIT_MS CMD...: the fault CMD inside a
# running Redis at PORT (DEBUG RELOAD NOSAVE, REPLICAOF NO ONE), sent by the
# watcher, which then polls APP's meta there until its epoch is no longer
# OLD_EPOCH (at most 20 s). T_FROM: CMD sent; then as window_read.
run_watched() {
    local port=$1 app=$2 old=$3 limit=$4
    shift 4
    rm -f "$DIR/watch"
    T_FROM=$(now_ns)
    "$PYTHON" "$ROLLBACK_PY" run "$port" "$(meta_key "$app")" "$old" "$DIR/watch" 20 "$@" ||
        failure "$app: the watcher of '$*' failed"
    window_parse "$app" "$limit"
}

# A round of a rollback scenario (07, 14, 17, 18), on its own application
# (idpool-check takes one exposure window), with PER_ROUND IDs to pop:
#   round_begin APP          # consumers start; N0: popped before the fault
#   save_old ... APP         # the old data set, probed
#   pop_past APP             # the consumers hand out what it still holds
#   ... the fault, a watcher (window_read / run_watched) ...
#   round_end R APP FROM TO  # consumers stop; takes_exposed; STALE
#   fault_landed "...stale=$STALE..."
# and at the end rollback_finish [key=val...].
WINDOWS=() TAKES=() REFUSED=() ROUND_APP=() ROUND_WINDOW=() STALE_SUM=0

# round_begin APP: two LPOP and two idpool_take consumers of APP that retry
# every millisecond (they pop the moment Redis serves again; the backoff
# is CONSUMER_BACKOFF, min:max ms), until they
# popped a quarter of PER_ROUND; N0 is what they popped by then.
# ROUND_LPOP=0: no LPOP consumers.
CONSUMER_BACKOFF=1:2
round_begin() {
    info "round on $1"
    app_params "$1"
    ((${ROUND_LPOP:-1} == 0)) || consumers_start "$1" 2 --backoff-ms "$CONSUMER_BACKOFF"
    consumers_start "$1" 2 --mode take --backoff-ms "$CONSUMER_BACKOFF"
    popped_wait "$1" $((PER_ROUND / 4)) "$1: consumers starved"
    N0=$(popped "$1")
}

# pop_past APP: the consumers pop a third of a pool more (past N0), so that
# IDs of the old data set (its pool's head) are handed out before the fault.
pop_past() {
    wait_until 20 popped_ge "$1" $((N0 + P_MAX / 3)) || failure "$1: consumers starved"
}

# round_end R APP FROM TO [REFUSALS]: the consumers pop on (PER_ROUND, at least a pool
# past N0) and stop; the take consumers' exposure to the window [FROM, TO]
# (takes_exposed) and STALE, the IDs of $DIR/probe.pool popped by requests
# sent before FROM, are counted. WINDOWS (WINDOW), TAKES, REFUSED,
# STALE_SUM, ROUND_APP[R] and ROUND_WINDOW[R] keep the round for
# rollback_finish.
round_end() {
    local r=$1 app=$2 from=$3 to=$4
    consumers_wait "$app" "$((PER_ROUND > N0 + P_MAX ? PER_ROUND : N0 + P_MAX))"
    consumers_stop "$app"
    takes_exposed "$app" "$from" "$to" "${5:-}"
    WINDOWS+=("$WINDOW") TAKES+=("$TAKES_IN") REFUSED+=("$REFUSED_IN")
    STALE=$(python3 "$ROLLBACK_PY" stale "$DIR/probe.pool" "$from" "$DIR/$app".c*.bin)
    STALE_SUM=$((STALE_SUM + STALE))
    ROUND_APP[r]=$app
    ROUND_WINDOW[r]="$from:$to"
}

# rollback_finish [key=val...]: every daemon stopped, the applications of
# the rounds (round_end) drained and checked with their windows
# (check_rollback), and the row: window_ms (the worst), windows_ms,
# window_limit_ms, takes and refused (per round), stale and the columns
# given.
rollback_finish() {
    local r w max=0
    daemons_stop
    for r in "${!ROUND_APP[@]}"; do
        drain "${ROUND_APP[r]}"
        check_rollback "${ROUND_APP[r]}" "${ROUND_WINDOW[r]%%:*}" "${ROUND_WINDOW[r]#*:}"
    done
    for w in "${WINDOWS[@]}"; do ((w <= max)) || max=$w; done
    row window_ms="$max" windows_ms="$(joined / "${WINDOWS[@]}")" \
        window_limit_ms="$WINDOW_LIMIT_MS" takes="$(joined / "${TAKES[@]}")" \
        refused="$(joined / "${REFUSED[@]}")" stale="$STALE_SUM" "$@"
}

# takes_exposed APP FROM TO [REFUSALS]: the positive control of the
# zero-window take: the idpool_take consumers of APP sent requests inside
# [FROM, TO] (the window) and IDPOOL_EPOCH refused some of them (their
# .refused logs). TAKES_IN and REFUSED_IN get the counts; none is a failure
# (no refusal is not one with REFUSALS=optional: a window where the takes
# may never meet a stale pool).
takes_exposed() {
    local app=$1
    takes_in "$app" "$2" "$3"
    info "$app: idpool_take consumers sent $TAKES_IN requests inside the window," \
        "$REFUSED_IN refused with IDPOOL_EPOCH"
    expect "((TAKES_IN > 0))" "$app: no idpool_take request inside the window (the takes were idle)"
    [[ ${4:-} == optional ]] ||
        expect "((REFUSED_IN > 0))" \
            "$app: no IDPOOL_EPOCH refusal inside the window (the takes never met the stale pool)"
}

# takes_in APP FROM TO: TAKES_IN, the requests APP's idpool_take consumers
# sent inside [FROM, TO], and REFUSED_IN, how many of them IDPOOL_EPOCH
# refused (rollback.py takes over their pop logs and .refused logs).
takes_in() {
    local logs=() f
    for f in "$DIR/$1".c*.bin "$DIR/$1".c*.refused; do
        [[ -e $f ]] && logs+=("$f")
    done
    read -r TAKES_IN REFUSED_IN < <(python3 "$ROLLBACK_PY" takes "$2" "$3" "${logs[@]}") ||
        TAKES_IN=0 REFUSED_IN=0
}

# ------------------------------------------------------------ failovers ---
# A primary lost under load and another promoted: behind Sentinel (19-24)
# or in a Cluster (25-). What their drivers, sentinel_scenario and
# cluster_scenario, share: once, failover_rounds (the settings) and
# failover_daemons URL (two refilling daemons and an issuer); each round,
# on its application APP:
#   failover_consumers APP URL   # consumers of every kind, popping
#   failover_probe OLD APP       # the old primary's copy of APP
#   failover_strike KIND OLD MEMBER APP  # the fault, watched; R
#   round_end R APP T_FROM TO REFUSALS
#   failover_times APP BUDGET    # detect_ms, first_take_ms, budget_ms
#   failover_landed APP NOTE [COND]
# and at the end failover_finish [key=val...].

# failover_rounds: ROUNDS (CHAOS_ROUNDS), PER_ROUND (the IDs a round pops)
# and the budget of a switch as clients feel it: BUDGET_MS (1000) plus
# SLACK_MS (CHAOS_FAILOVER_SLACK_MS: default 1500 in the quick profile, 0
# in the long one).
failover_rounds() {
    ROUNDS=$CHAOS_ROUNDS
    PER_ROUND=$((CHAOS_IDS / ROUNDS))
    WINDOW_LIMIT_MS=- # the window includes the promotion: budget_ms is what is bounded
    BUDGET_MS=1000
    if [[ $PROFILE == quick ]]; then SLACK_MS=${CHAOS_FAILOVER_SLACK_MS:-1500}; else SLACK_MS=${CHAOS_FAILOVER_SLACK_MS:-0}; fi
    DETECTS=() FIRSTS=() LOWS=() BUDGETS=()
}

# failover_daemons URL: daemons a and b refilling, i only issuing IDs
# (--refill off, --api on API_PORT), all on URL; TOKEN, a token of the
# issuer for every application.
failover_daemons() {
    chaos_daemon a --redis "$1"
    chaos_daemon b --redis "$1"
    API_PORT=$(free_port)
    chaos_daemon i --redis "$1" --refill off --api "127.0.0.1:$API_PORT"
    TOKEN=$("$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" --json tokens add \
        "chaos$CHAOS_NUM" --apps '*' | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["token"])') ||
        fail "tokens add"
}

# failover_consumers APP URL: consumers of APP of every kind, each
# following the primary by itself: idpool-load LPOP and FCALL takes
# (round_begin, on LOAD_TARGET), libidpool and the Python client on URL,
# and the issuer (libidpool's HTTP transport); returns once the first
# popped a quarter of PER_ROUND (N0: what they popped by then).
failover_consumers() {
    round_begin "$1"
    client_consumers_start "$1" "$2"
    client_consumers_start "$1" "http://$TOKEN@127.0.0.1:$API_PORT"
    py_consumers_start "$1" "$2"
}

# failover_probe OLD APP: the old primary's (at port OLD) copy of APP: its
# meta's epoch, PROBE_EPOCH, and its pool, $DIR/probe.pool (the stale IDs
# a promoted replica may hold).
failover_probe() {
    PROBE_EPOCH=$(redis-cli -p "$1" HGET "$(meta_key "$2")" epoch)
    redis-cli -p "$1" LRANGE "$(pool_key "$2")" 0 -1 >"$DIR/probe.pool"
}

# failover_strike KIND OLD MEMBER APP: the fault of a round on APP, whose
# primary is at port OLD (servers.sh's MEMBER), KIND sentinel or cluster:
# DISCARDS0 counted (failover_landed), KIND's watcher started
# (KIND_watch OLD APP PROBE_EPOCH), T_FROM, the scenario's hook KIND_fault
# OLD MEMBER APP (it may set T_FROM again, at the fault itself), the
# watcher read (failover_watch_read), the new primary checked and R
# waited for (failover_switched), then the hook KIND_after OLD MEMBER APP.
failover_strike() {
    local kind=$1
    shift
    DISCARDS0=$(pool_discards "$3")
    "${kind}_watch" "$1" "$3" "$PROBE_EPOCH"
    T_FROM=$(now_ns)
    "${kind}_fault" "$@"
    failover_watch_read "$3"
    failover_switched "$3"
    "${kind}_after" "$@"
}

# failover_watch_read APP: waits for the watcher (sentinel_watch,
# cluster_watch): W_STATE, T_DETECT (the switch), W_TO (ns: the old meta
# gone from the new primary), W_NEW (the new primary's port).
failover_watch_read() {
    local polls t_from
    wait_until 35 test -s "$DIR/watch" || failure "$1: the failover watcher did not report"
    wait "$WATCHER" 2>/dev/null || true
    W_STATE=missing T_DETECT=0 W_TO=0 W_NEW=''
    [[ -s $DIR/watch ]] && read -r W_STATE T_DETECT W_TO polls W_NEW t_from <"$DIR/watch"
    ((W_TO > 0)) || W_TO=$(now_ns)
    info "$1: the primary is $W_NEW, named $(((T_DETECT - T_FROM) / 1000000)) ms after the fault;" \
        "the old meta $W_STATE there after $(((W_TO - T_FROM) / 1000000)) ms ($polls polls)"
}

# failover_switched APP: the old pool on the new primary W_NEW was
# discarded (else a failure); W_EPOCH, the epoch validated there (before
# the sweep that ended the watch), and W_ID, its server id, are read;
# REDIS_PORT becomes W_NEW, and R is waited for there (recovered, 30 s at
# most; its time kept for low_water_ms).
failover_switched() {
    local app=$1
    expect "[[ $W_STATE == discarded || $W_STATE == replaced ]]" \
        "$app: the old pool on the new primary was not discarded (watcher: $W_STATE)"
    [[ -n $W_NEW ]] || fail "$app: no new primary"
    W_EPOCH=$(redis-cli -p "$W_NEW" FCALL_RO idpool_validated 0)
    W_ID=$(redis_server_id "$W_NEW")
    REDIS_PORT=$W_NEW
    LAST_RECOVERY_MS=timeout
    recovered "$app" "$T_FROM" 30
    LOWS+=("$LAST_RECOVERY_MS")
}

# failover_times APP BUDGET: the round's times (after round_end): DETECT,
# the fault (T_FROM) to the switch (T_DETECT), and first_take_ms; with
# BUDGET=1, budget_ms = first_take_ms - detect_ms must be within BUDGET_MS
# + SLACK_MS. None served after the fault is a failure.
failover_times() {
    local app=$1 first
    DETECT=$(((T_DETECT - T_FROM) / 1000000))
    first=$(first_take_ms "$app" "$T_FROM")
    DETECTS+=("$DETECT") FIRSTS+=("$first")
    if [[ $first == none ]]; then
        failure "$app: no take was served after the fault"
    elif [[ $2 == 1 ]]; then
        BUDGETS+=($((first - DETECT)))
        expect "((first - DETECT <= BUDGET_MS + SLACK_MS))" \
            "$app: the first take came $((first - DETECT)) ms after the switch (budget $BUDGET_MS + $SLACK_MS ms)"
    fi
}

# failover_landed APP NOTE [COND]: the evidence of a round (fault_landed
# NOTE): the new primary was validated under its own server id, not
# under the old epoch, the daemons discarded the pool it inherited (more
# discards of APP logged than DISCARDS0, counted before the fault: an
# earlier round's may have discarded it already), and COND holds.
failover_landed() {
    fault_landed "$2" "[[ '$W_EPOCH' == '$W_ID':* && '$W_EPOCH' != '$PROBE_EPOCH' ]] &&
         (($(pool_discards "$1") > $DISCARDS0)) ${3:+&& $3}"
}

# pool_discards APP: how many times the daemons logged a discard of APP's
# pool (a restart, failover or rollback detected) so far.
pool_discards() { logs_count "app=$1 redis restart or failover detected"; }

# failover_finish [key=val...]: rollback_finish, with the medians of the
# rounds' times and the columns given.
failover_finish() {
    rollback_finish detect_ms="$(median "${DETECTS[@]}")" first_take_ms="$(median "${FIRSTS[@]}")" \
        low_water_ms="$(median "${LOWS[@]}")" budget_ms="$(median "${BUDGETS[@]:-0}")" \
        budget_limit_ms=$((BUDGET_MS + SLACK_MS)) "$@"
}

# first_take_ms APP T0_NS: ms from T0_NS to when takes of APP were served
# again (the end of the longest pause in served takes after T0_NS, any
# direct take consumer: every take of idpool-load goes to Redis, while the
# buffered clients' logs, *.buffered.*, show IDs their buffers held, and a
# stale one's, *.stale.*, takes on a partitioned primary), or "none".
first_take_ms() {
    local t logs=()
    for f in "$DIR/$1".c*.bin; do [[ $f == *.buffered.* || $f == *.stale.* ]] || logs+=("$f"); done
    t=$("$PYTHON" "$ROLLBACK_PY" first_take "$2" "${logs[@]}")
    if ((t > 0)); then echo $(((t - $2) / 1000000)); else echo none; fi
}

# client_consumers_start APP ENV [idpool-clientload args]: one recorded
# libidpool consumer of APP (idpool-clientload, kind take) through ENV (a
# Redis, Sentinel or Cluster URL: libidpool; http://TOKEN@host:port: an
# issuer), taking 100 IDs every 5 ms and retrying every error after 1 ms,
# until consumers_stop (a consumer group like consumers_start's:
# $DIR/APP.c<g>.buffered.0.bin: a client that buffers IDs hands out ones it
# took before a pop of another consumer completed, so check_rollback leaves
# "buffered" logs out of the M check).
IDPOOL_CLIENTLOAD=${IDPOOL_CLIENTLOAD:-$CHAOS_BUILD/test/idpool-clientload}
client_consumers_start() {
    local app=$1 env=$2 g
    shift 2
    g=${CONS_GEN[$app]:-0}
    CONS_GEN[$app]=$((g + 1))
    bg_run "cons.$app.$g" "$IDPOOL_CLIENTLOAD" --take 100 --pause-ms 5 --ids 1000000000 \
        --timeout-ms 1000 --record "$DIR/$app.c$g.buffered" --stop-file "$DIR/cons.$app.$g.stopfile" "$@" \
        "$app" "$env"
}

# py_consumers_start APP ENV: one recorded Python client consumer of APP
# (pytake.py: App.next_n(100) every 5 ms, errors retried), a consumer group
# like consumers_start's.
py_consumers_start() {
    local app=$1 g
    g=${CONS_GEN[$app]:-0}
    CONS_GEN[$app]=$((g + 1))
    bg_run "cons.$app.$g" env PYTHONPATH="$IDPOOL_SOURCE_ROOT/src/python" "$PYTHON" \
        "$CHAOS_LIB_DIR/pytake.py" "$app" "$2" "$DIR/$app.c$g.buffered.0.bin" \
        "$DIR/cons.$app.$g.stopfile"
}

# redis_info PORT SECTION FIELD: one field of INFO SECTION of the Redis at PORT.
redis_info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | sed -n "s/^$3://p"; }

# primary_kill9 OLD MEMBER: the primary at port OLD (servers.sh's MEMBER)
# killed (-9), T_FROM just before; returns once the process is gone.
primary_kill9() {
    local old=$1 member=$2 pid
    pid=$(redis_info "$old" server process_id)
    T_FROM=$(now_ns)
    kill -KILL "$pid" || fail "could not kill $member (pid $pid)"
    wait_until 5 proc_gone "$pid" || fail "$member (pid $pid) survived kill -9"
}

# median N...: the median of the numbers given (the lower one of two).
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# ------------------------------------------------------------- Sentinel ---
# The Sentinel scenarios (19-24): a Sentinel set of scripts/servers.sh (the
# primary, replica1, replica2, sentinel1..3); every daemon and consumer
# follows the primary through the sentinels. REDIS_PORT follows the
# primary too (the harness' helpers read pools there).

# sentinel_setup: chaos_setup with a Sentinel set; LOAD_TARGET makes every
# idpool-load consumer follow the sentinels; SENTINEL_PORTS (a,b,c).
sentinel_setup() {
    SERVERS_SENTINEL=1 chaos_setup
    # Each reconnect asks the sentinels: retrying every millisecond, the
    # consumers would storm them (a sentinel that answers its PINGs late
    # sees a healthy primary down and fails over again)
    CONSUMER_BACKOFF=5:50
    SENTINEL_PORTS=$SENTINEL1_PORT,$SENTINEL2_PORT,$SENTINEL3_PORT
    LOAD_TARGET=(--sentinel "127.0.0.1:$SENTINEL1_PORT,127.0.0.1:$SENTINEL2_PORT,127.0.0.1:$SENTINEL3_PORT"
        --master "$SENTINEL_MASTER")
    # shellcheck disable=SC2034 # the scenarios': servers.sh's name of a port
    declare -gA MEMBER_OF=([$REDIS_PORT]=redis [$REPLICA1_PORT]=replica1 [$REPLICA2_PORT]=replica2)
}

# sentinel_daemon NAME [ARGS...]: chaos_daemon on the Sentinel URL.
sentinel_daemon() {
    local name=$1
    shift
    chaos_daemon "$name" --redis "$IDPOOL_REDIS_SENTINEL_URL" "$@"
}

# sentinel_primary: the port a majority of the sentinels name (empty if none).
sentinel_primary() {
    local p
    for p in ${SENTINEL_PORTS//,/ }; do
        redis-cli -p "$p" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" 2>/dev/null | tail -n 1
    done | sort | uniq -c | awk '$1 >= 2 { print $2 }'
}

# settled_primary: a majority of sentinels name a primary whose ROLE says
# so; REDIS_PORT becomes its port.
settled_primary() {
    local p
    p=$(sentinel_primary)
    [[ -n $p && $(redis-cli -p "$p" ROLE 2>/dev/null | head -n 1) == master ]] || return 1
    REDIS_PORT=$p
}

# sentinel_watch OLD_PORT APP OLD_EPOCH: rollback.py's sentinel watcher in
# the background (start it just before the fault; failover_watch_read
# waits for it): detect_ms ends when a majority of the sentinels name
# another primary.
sentinel_watch() {
    rm -f "$DIR/watch"
    "$PYTHON" "$ROLLBACK_PY" sentinel "$SENTINEL_PORTS" "$SENTINEL_MASTER" "$1" "$(meta_key "$2")" \
        "$3" "$DIR/watch" 30 &
    WATCHER=$!
}

# sentinel_scenario PREFIX REFUSALS: the rounds of a Sentinel scenario, one
# monotonic application PREFIX<r> each, two refilling daemons and an
# issuer-only one on the Sentinel URL (failover_daemons). Each round,
# consumers of every kind pop (failover_consumers, idpool-load following
# the sentinels), then the scenario's hooks run:
#   sentinel_prepare OLD MEMBER APP  (optional) instead of pop_past (the
#                                    consumers pop past a third of the pool)
#   sentinel_probe OLD APP           (optional) the stale copy: PROBE_EPOCH
#                                    and $DIR/probe.pool (default:
#                                    failover_probe, OLD's)
#   sentinel_fault OLD MEMBER APP    the fault, T_FROM just before (or set
#                                    by the hook at the fault); sets FAULT_NOTE
#   sentinel_after OLD MEMBER APP    after the switch (the old primary back);
#                                    T_OLD_GONE: when the old primary
#                                    stopped serving, if it ran on
# (OLD: the primary's port, MEMBER: its servers.sh name). A watcher times
# the switch (detect_ms: a majority of the sentinels name another primary)
# and the sweep on the new primary (the window's end); first_take_ms (the
# fault to the first take of a direct take consumer answered with IDs,
# sent after it), low_water_ms; budget_ms = first_take_ms - detect_ms
# within 1000 + CHAOS_FAILOVER_SLACK_MS (failover_rounds; not checked with
# SENTINEL_BUDGET=0, where the old primary serves on).
# SENTINEL_STALE_REQUIRED=1: the evidence needs stale > 0 (the new primary
# held IDs handed out before the fault). REFUSALS: takes_exposed's
# (optional or required). Evidence: a majority of sentinels named another
# primary, validated under its own server id, and the inherited pool was
# discarded.
sentinel_scenario() {
    local prefix=$1 refusals=$2 r app old member to
    failover_rounds
    round_apps_add "$prefix" "$ROUNDS"
    failover_daemons "$IDPOOL_REDIS_SENTINEL_URL"
    round_apps_filled "$prefix" "$ROUNDS"
    for ((r = 1; r <= ROUNDS; r++)); do
        app=$prefix$r
        old=$(sentinel_primary)
        [[ $old == "$REDIS_PORT" ]] || fail "the sentinels name $old, the harness $REDIS_PORT"
        member=${MEMBER_OF[$old]}
        failover_consumers "$app" "$IDPOOL_REDIS_SENTINEL_URL"
        if declare -F sentinel_prepare >/dev/null; then
            sentinel_prepare "$old" "$member" "$app"
        else
            pop_past "$app"
        fi
        if declare -F sentinel_probe >/dev/null; then
            sentinel_probe "$old" "$app"
        else
            failover_probe "$old" "$app"
        fi
        T_OLD_GONE=0
        failover_strike sentinel "$old" "$member" "$app"
        # the primary now (a loaded machine may see more failovers than the
        # one inflicted: the daemons and consumers follow them too)
        wait_until 30 settled_primary || failure "$app: no primary the sentinels agree on"
        [[ $REDIS_PORT == "$W_NEW" ]] || info "$app: the sentinels moved on to $REDIS_PORT"
        # LPOP exposure: the fault to the sweep, or to when the old primary
        # stopped serving if that came later (a manual failover)
        to=$((T_OLD_GONE > W_TO ? T_OLD_GONE : W_TO))
        WINDOW=$(((to - T_FROM) / 1000000))
        round_end "$r" "$app" "$T_FROM" "$to" "$refusals"
        failover_times "$app" "${SENTINEL_BUDGET:-1}"
        failover_landed "$app" "$FAULT_NOTE,new=${MEMBER_OF[$W_NEW]},detect_ms=$DETECT,stale=$STALE" \
            "((${SENTINEL_STALE_REQUIRED:-0} == 0 || STALE > 0))"
    done
    failover_finish
}

# -------------------------------------------------------------- Cluster ---
# The Cluster scenarios (25-): the Cluster of scripts/servers.sh (node1..6,
# three primaries with a replica each, cluster-node-timeout 1500 ms); every
# daemon and consumer follows the slot table by itself. Each round's
# application lives on one primary, its control on another.

# redis_of APP: REDIS_PORT becomes the port of the Redis holding APP's
# pool: the primary of its slot on a Cluster (CLUSTER=1); else unchanged
# (one Redis, or Sentinel's primary, which REDIS_PORT follows).
CLUSTER=0
redis_of() {
    ((CLUSTER == 0)) || REDIS_PORT=$(cluster_owner "$(pool_key "$1")")
}

# cluster_setup: chaos_setup with a Cluster; LOAD_TARGET makes every
# idpool-load consumer follow the slot table from the seeds (--cluster).
cluster_setup() {
    SERVERS_CLUSTER=1 chaos_setup
    CLUSTER=1
    # A consumer retrying every millisecond while the cluster is down
    # (CLUSTERDOWN on every primary) would load the nodes whose gossip
    # decides the failover
    CONSUMER_BACKOFF=5:50
    LOAD_TARGET=(--cluster "${IDPOOL_REDIS_CLUSTER_URL#redis-cluster://}")
}

# cluster_round_apps: the applications of the rounds, chosen by their
# keys' slots (cluster_apps): round r's, VICTIM[r], on the r-th primary
# (by port), and its control, CONTROL[r], on the next one; at most three
# rounds (one a primary).
cluster_round_apps() {
    local i primaries
    ((ROUNDS <= 3)) || fail "a Cluster scenario runs one round a primary, three at most (not $ROUNDS)"
    declare -gA APP_OF=()
    cluster_apps ck
    mapfile -t primaries < <(printf '%s\n' "${!APP_OF[@]}" | sort -n)
    for ((i = 0; i < ROUNDS; i++)); do VICTIM[i + 1]=${APP_OF[${primaries[i]}]}; done
    APP_OF=()
    cluster_apps cc
    for ((i = 0; i < ROUNDS; i++)); do CONTROL[i + 1]=${APP_OF[${primaries[(i + 1) % 3]}]}; done
    round_app_add "${VICTIM[@]}" "${CONTROL[@]}"
}

# cluster_watch OLD_PORT APP OLD_EPOCH: rollback.py's cluster watcher in
# the background (start it just before the fault; failover_watch_read
# waits for it): detect_ms ends when a majority of the surviving nodes
# (all but OLD_PORT) name another primary of APP's slot (CLUSTER SLOTS).
cluster_watch() {
    cluster_watcher_start "$1" "$2" "$3" "$DIR/watch" 30
    WATCHER=$!
}

# cluster_watcher_start OLD_PORT APP OLD_EPOCH FILE SECONDS: rollback.py's
# cluster watcher of APP's slot in the background, on every node but
# OLD_PORT, reporting to FILE within SECONDS ($! is its pid).
cluster_watcher_start() {
    local p ports=()
    for p in $(cluster_ports); do [[ $p == "$1" ]] || ports+=("$p"); done
    rm -f "$4"
    "$PYTHON" "$ROLLBACK_PY" cluster "$(joined , "${ports[@]}")" "$1" "$(cluster_slot "$(pool_key "$2")")" \
        "$(meta_key "$2")" "$3" "$4" "$5" &
}

# cluster_control APP PORT EPOCH DISCARDS: the positive and negative
# control of a round, APP on the surviving primary at PORT, whose
# consumers ran through the victim's window [T_FROM, W_TO] and were
# stopped: they took inside it (CTL_TAKES), yet APP saw no window: its
# meta there still carries EPOCH (never swept), the daemons logged no
# discard of its pool beyond the DISCARDS before the round (an earlier
# round may have killed the primary it had then), no take of it was
# refused with IDPOOL_EPOCH; CTL_FIRSTS gets the end of its longest pause
# in served takes after the fault (the cluster down meanwhile).
cluster_control() {
    local app=$1 now
    takes_in "$app" "$T_FROM" "$W_TO"
    CTL_TAKES=$TAKES_IN
    expect "((CTL_TAKES > 0))" "control $app: no idpool_take request inside the window"
    now=$(now_ns)
    takes_in "$app" 0 "$now"
    expect "((REFUSED_IN == 0))" "control $app: $REFUSED_IN takes refused with IDPOOL_EPOCH (a window)"
    expect "[[ '$(cluster_cli "$2" HGET "$(meta_key "$app")" epoch)' == '$3' ]]" \
        "control $app: its meta on $2 is no longer of epoch $3 (swept: a window)"
    expect "(($(pool_discards "$app") == $4))" "control $app: a daemon discarded its pool (a window)"
    CTL_FIRSTS+=("$(first_take_ms "$app" "$T_FROM")")
}

# cluster_scenario REFUSALS: the rounds of a Cluster scenario
# (cluster_round_apps: at most three), two refilling daemons and an
# issuer-only one on the Cluster URL (failover_daemons). Each round,
# consumers of every kind pop the round's application APP and its control
# (failover_consumers, idpool-load following the slot table), then the
# scenario's hooks run:
#   cluster_fault OLD MEMBER APP     the fault on the primary of APP's slot
#                                    (OLD: its port, MEMBER: its servers.sh
#                                    name), T_FROM just before; sets
#                                    FAULT_NOTE
#   cluster_after OLD MEMBER APP     after the switch (the old primary back)
# A watcher times the switch (detect_ms: a majority of the surviving nodes
# name another primary of the slot) and the sweep on the new primary (the
# window's end); first_take_ms, low_water_ms, budget_ms = first_take_ms -
# detect_ms within BUDGET_MS + SLACK_MS: 2000 ms, as the daemons and the
# clients read the slot table at most once a second (core/cluster.h), plus
# the slack of failover_rounds. The control must see no window at all
# (cluster_control; checked with none: U A L M over everything).
# REFUSALS: takes_exposed's (optional or required). Evidence: the new
# primary validated under its own server id, the inherited pool
# discarded, and the control's takes inside the window (control_takes).
cluster_scenario() {
    local refusals=$1 r app ctl old member port epoch discards
    CTL_FIRSTS=()
    failover_rounds
    BUDGET_MS=2000
    cluster_round_apps
    failover_daemons "$IDPOOL_REDIS_CLUSTER_URL"
    apps_filled "${VICTIM[@]}" "${CONTROL[@]}"
    for ((r = 1; r <= ROUNDS; r++)); do
        app=${VICTIM[r]} ctl=${CONTROL[r]}
        old=$(cluster_owner "$(pool_key "$app")")
        member=$(cluster_node "$old")
        port=$(cluster_owner "$(pool_key "$ctl")")
        [[ $port != "$old" ]] || fail "control $ctl is on $app's primary $old"
        # the control first: round_begin's N0 and P_MAX must be the round's application's
        failover_consumers "$ctl" "$IDPOOL_REDIS_CLUSTER_URL"
        failover_consumers "$app" "$IDPOOL_REDIS_CLUSTER_URL"
        pop_past "$app"
        failover_probe "$old" "$app"
        epoch=$(cluster_cli "$port" HGET "$(meta_key "$ctl")" epoch)
        [[ -n $epoch ]] || fail "control $ctl: no epoch in its meta on $port"
        discards=$(pool_discards "$ctl")
        failover_strike cluster "$old" "$member" "$app"
        WINDOW=$(((W_TO - T_FROM) / 1000000))
        round_end "$r" "$app" "$T_FROM" "$W_TO" "$refusals"
        consumers_stop "$ctl"
        cluster_control "$ctl" "$port" "$epoch" "$discards"
        failover_times "$app" 1
        failover_landed "$app" "$FAULT_NOTE,new=$(cluster_node "$W_NEW"),detect_ms=$DETECT,stale=$STALE,control_takes=$CTL_TAKES"
    done
    # The controls: checked without a window (U A L, and M over every
    # unbuffered log), then the rounds' applications with theirs.
    daemons_stop
    for ctl in "${CONTROL[@]}"; do
        drain "$ctl"
        check_rollback "$ctl" 0 0
    done
    failover_finish control_first_take_ms="$(median "${CTL_FIRSTS[@]}")"
}

# ---------------------------------------------------------------------------
# New nodes and partitions (chaos 28, 29)

# cluster_bus_port PORT: the cluster bus port of the node at PORT (its
# CLUSTER NODES line: 127.0.0.1:PORT@BUS).
cluster_bus_port() {
    local _id addr _rest
    while read -r _id addr _rest; do
        addr=${addr%%,*}
        if [[ ${addr#*:} == "$1"@* ]]; then
            echo "${addr#*@}"
            return 0
        fi
    done < <(cluster_cli "$1" CLUSTER NODES)
    fail "cluster_bus_port: no node on port $1"
}

# cluster_src_addr PORT ADDR: the node at PORT opens its connections from
# ADDR (bind-source-addr, a loopback address; it announces 127.0.0.1 still,
# cluster-announce-ip: else the others would take the address its links
# come from for its own, where it does not listen), and its cluster-bus links
# to the other nodes are killed (DEBUG CLUSTERLINK KILL to) so that it
# opens them again from there: nftables can then cut the links this node
# opened (their source port is any) by ADDR. Waits until as many links
# from ADDR are established as the node knows other nodes; prints how many.
cluster_src_addr() {
    local port=$1 addr=$2 id self n=0 hex a b c d
    [[ $(cluster_cli "$port" CONFIG SET cluster-announce-ip 127.0.0.1 bind-source-addr "$addr") == OK ]] ||
        fail "bind-source-addr on $port"
    self=$(cluster_cli "$port" CLUSTER MYID)
    while read -r id _; do
        [[ $id == "$self" ]] && continue
        cluster_cli "$port" DEBUG CLUSTERLINK KILL to "$id" >/dev/null || fail "DEBUG CLUSTERLINK KILL on $port"
        n=$((n + 1))
    done < <(cluster_cli "$port" CLUSTER NODES)
    IFS=. read -r a b c d <<<"$addr"
    hex=$(printf '%02X%02X%02X%02X' "$d" "$c" "$b" "$a")
    # shellcheck disable=SC2016 # awk's
    wait_until 10 eval "((\$(awk -v h=$hex: 'index(\$2, h) == 1 && \$4 == \"01\"' /proc/net/tcp | wc -l) >= n))" ||
        failure "$port: its cluster links did not come back from $addr"
    awk -v h="$hex:" 'index($2, h) == 1 && $4 == "01"' /proc/net/tcp | wc -l
}

# cluster_partition PORT BUS ADDR UID (inside a namespace, netns.sh's
# table): the node at PORT cut off: every packet to and from its client
# port PORT and its bus port BUS, and from and to ADDR (the links it opened
# itself: cluster_src_addr), dropped and counted (netns.sh's dropped),
# except on the connections to PORT that processes of UID opened (the
# stale clients; marked by conntrack at their packets). cluster_heal PORT
# undoes it (netns.sh's heal), and the node at PORT opens its connections
# from the default address again: Redis' protected mode takes only
# 127.0.0.1 for loopback, and refuses a replica's sync from 127.0.0.2.
cluster_heal() {
    heal
    [[ $(cluster_cli "$1" CONFIG SET bind-source-addr "") == OK ]] || failure "bind-source-addr reset on $1"
}
cluster_partition() {
    nft add rule inet chaos out tcp dport "$1" meta skuid "$4" ct mark set 1
    nft add rule inet chaos out tcp dport "$1" ct mark != 1 counter drop
    nft add rule inet chaos out tcp sport "$1" ct mark != 1 counter drop
    nft add rule inet chaos out tcp dport "$2" counter drop
    nft add rule inet chaos out tcp sport "$2" counter drop
    nft add rule inet chaos out ip saddr "$3" counter drop
    nft add rule inet chaos out ip daddr "$3" counter drop
}

# A stale client (chaos 22's, on a Cluster node): an idpool_take consumer
# of the old primary's port only (no slot table), run as STALE_UID so that
# cluster_partition lets it through. stale_dir: $DIR/stale, where it
# writes its logs from a copy of idpool-load (the build directory may not
# be readable to it). stale_start PORT APP: it takes STALE_RATE requests a
# second from APP's pool on PORT (STALE_NAME, STALE_PREFIX); returns once
# it got IDs. stale_cli PORT ARGS: redis-cli as STALE_UID.
# stale_state_is PORT STATE: the node's cluster_state is STATE.
# stale_errorstat PORT ERR: its errorstat_ERR count. stale_served T0 T1:
# the stale takes sent at or after T0 that were answered with IDs by T1.
# stale_finish: its logs moved to $DIR (checked with the application's).
stale_dir() {
    chmod o+x "$DIR"
    STALE_DIR=$DIR/stale
    mkdir "$STALE_DIR"
    cp "$IDPOOL_LOAD" "$STALE_DIR/idpool-load"
    chown "$STALE_UID" "$STALE_DIR"
}
stale_start() {
    local app=$2
    STALE_NAME=cons.$app.${CONS_GEN[$app]:-0}
    STALE_PREFIX=$STALE_DIR/$app.c${CONS_GEN[$app]:-0}.stale
    CONS_GEN[$app]=$((${CONS_GEN[$app]:-0} + 1))
    bg_run "$STALE_NAME" setpriv --reuid="$STALE_UID" --regid="$STALE_UID" --clear-groups \
        "$STALE_DIR/idpool-load" --port "$1" --mode take --key "$(pool_key "$app")" --conns 1 \
        --pipeline 1 --batch "$CHAOS_BATCH" --rate "$STALE_RATE" --duration "$CHAOS_MAX_S" \
        --record "$STALE_PREFIX" --reconnect --timeout-ms 1000 --backoff-ms "$CONSUMER_BACKOFF" \
        --stop-file "$DIR/$STALE_NAME.stopfile"
    wait_until 10 eval "[[ -s $STALE_PREFIX.0.bin ]] && ((\$(stat -c %s $STALE_PREFIX.0.bin) > 32))" ||
        failure "$app: the stale consumer took nothing before the partition"
}
stale_cli() { setpriv --reuid="$STALE_UID" --regid="$STALE_UID" --clear-groups redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
stale_state_is() { [[ $(stale_cli "$1" CLUSTER INFO 2>/dev/null) == *cluster_state:$2$'\r'* ]]; }
stale_errorstat() {
    local n
    n=$(stale_cli "$1" INFO errorstats 2>/dev/null | tr -d '\r' | sed -n "s/^errorstat_$2:count=\([0-9]*\).*/\1/p")
    echo "${n:-0}"
}
stale_served() { "$PYTHON" "$ROLLBACK_PY" served "$1" "$2" "$STALE_PREFIX.0.bin"; }
stale_finish() { mv "$STALE_PREFIX".* "$DIR/"; }

# node_join: a seventh cluster node, started alone (servers.sh cluster-add:
# NEW_NAME, NEW_PORT, NEW_BUS) and met with plain CLUSTER MEET from node1,
# as an operator adds a primary without redis-cli --cluster add-node (which
# copies the function library): NEW_BARE=1 when it has no idpool library
# and no ACL user but default before it is met. Returns once every node
# knows seven nodes and the new one is a primary without slots, the
# cluster ok on every node.
node_join() {
    local lib users
    read -r NEW_NAME NEW_PORT NEW_BUS < <("$SERVERS" cluster-add "$DIR") || fail "servers.sh cluster-add"
    [[ -n $NEW_BUS ]] || fail "servers.sh cluster-add printed no node"
    lib=$(cluster_cli "$NEW_PORT" FUNCTION LIST LIBRARYNAME idpool)
    users=$(cluster_cli "$NEW_PORT" ACL USERS)
    NEW_BARE=0
    [[ -z $lib && $users == default ]] && NEW_BARE=1
    expect "((NEW_BARE == 1))" "$NEW_NAME is not bare: library [$lib], users [$users]"
    [[ $(cluster_cli "$NODE1_PORT" CLUSTER MEET 127.0.0.1 "$NEW_PORT" "$NEW_BUS") == OK ]] ||
        fail "CLUSTER MEET $NEW_NAME"
    wait_until 20 cluster_known "$(cluster_ports) $NEW_PORT" 7 ||
        failure "not every node knows $NEW_NAME (7 nodes)"
    expect "[[ \$(cluster_role $NEW_PORT) == master && \$(cluster_owner_count $NEW_PORT) == 0 ]]" \
        "$NEW_NAME is no primary without slots"
    # the new node too (cluster_ok asks node1..node6): until it has heard
    # of every slot it answers CLUSTERDOWN, also to the RESTORE of a MIGRATE
    wait_until 20 eval "[[ \$(cluster_cli $NEW_PORT CLUSTER INFO) == *cluster_state:ok* ]] && cluster_ok" ||
        failure "the cluster is not ok on every node after $NEW_NAME joined"
    info "$NEW_NAME (port $NEW_PORT, bus $NEW_BUS) met; bare=$NEW_BARE"
}

# node_remove: the new node forgotten (CLUSTER FORGET on node1..node6)
# and stopped, with commands in flight; returns once every node knows six
# nodes, the cluster ok on every node.
node_remove() {
    local id p
    id=$(cluster_cli "$NEW_PORT" CLUSTER MYID)
    wait_until 10 cluster_owned_by "$SLOT" "$OLD" || failure "slot $SLOT is not $OLD's on every node"
    expect "((\$(cluster_owner_count $NEW_PORT) == 0))" \
        "$NEW_NAME still owns slots"
    for p in $(cluster_ports); do
        [[ $(cluster_cli "$p" CLUSTER FORGET "$id") == OK ]] || failure "CLUSTER FORGET $NEW_NAME on $p"
    done
    "$SERVERS" stop "$DIR" "$NEW_NAME" >/dev/null || failure "could not stop $NEW_NAME"
    wait_until 20 cluster_known "$(cluster_ports)" 6 || failure "a node still knows $NEW_NAME"
    wait_until 20 cluster_ok || failure "the cluster is not ok on every node after $NEW_NAME left"
    info "$NEW_NAME forgotten and stopped"
}

# cluster_known PORTS N: every node at PORTS (one word each) knows N nodes.
cluster_known() {
    local p
    for p in $1; do
        [[ $(cluster_cli "$p" CLUSTER INFO 2>/dev/null) == *cluster_known_nodes:$2$'\r'* ]] || return 1
    done
}

# cluster_owner_count PORT: the slots the node at PORT serves (CLUSTER
# INFO of its own: cluster_slots_assigned counts the whole cluster's, so
# its line of CLUSTER NODES, myself).
cluster_owner_count() {
    cluster_cli "$1" CLUSTER NODES | awk '/myself/ { n = 0; for (i = 9; i <= NF; i++) if ($i !~ /^\[/) n++; print n }'
}

# library_on PORT: the idpool function library is loaded on PORT.
library_on() { [[ $(cluster_cli "$1" FUNCTION LIST LIBRARYNAME idpool 2>/dev/null) == *idpool* ]]; }

# node_errors PORT PREFIX: error replies of the node at PORT that began
# with PREFIX (errorstat_PREFIX): ERR on a node without the library counts
# the FCALLs that found no function ("ERR Function not found"), TRYAGAIN
# the commands it could not serve on a slot half moved.
node_errors() {
    local n
    n=$(cluster_cli "$1" INFO errorstats 2>/dev/null | tr -d '\r' | sed -n "s/^errorstat_$2:count=\([0-9]*\).*/\1/p")
    echo "${n:-0}"
}

# slot_move SLOT SRC DST HOLD: SLOT moves from the primary at SRC to the
# one at DST as a reshard moves it: IMPORTING on DST, MIGRATING on SRC,
# its keys MIGRATEd (GETKEYSINSLOT again until none is left: a lock may
# appear meanwhile), then, with HOLD=1, held half-way until DST answered
# a command redirected there (an FCALL that found no function, or
# TRYAGAIN: a pool emptied meanwhile is a key missing on both sides), or
# has the library (10 s at most; HELD_MS, HELD_NOTE), then SETSLOT NODE
# on DST, SRC and every other primary of node1..node6. SRC may refuse
# ("only with masters"): a primary whose last slot went is made a replica
# of the node that took it (cluster-allow-replica-migration), as
# redis-cli --cluster reshard allows too (SRC_DEMOTED=1).
slot_move() {
    local slot=$1 src=$2 dst=$3 i keys e0 t0 r p id
    [[ $(cluster_cli "$dst" CLUSTER SETSLOT "$slot" IMPORTING "$(cluster_cli "$src" CLUSTER MYID)") == OK ]] ||
        fail "SETSLOT $slot IMPORTING on $dst"
    [[ $(cluster_cli "$src" CLUSTER SETSLOT "$slot" MIGRATING "$(cluster_cli "$dst" CLUSTER MYID)") == OK ]] ||
        fail "SETSLOT $slot MIGRATING on $src"
    # shellcheck disable=SC2034 # read by the eval below
    e0=$(($(node_errors "$dst" ERR) + $(node_errors "$dst" TRYAGAIN)))
    for ((i = 0; i < 20; i++)); do
        # (an empty array: redis-cli prints an empty line)
        mapfile -t keys < <(cluster_cli "$src" CLUSTER GETKEYSINSLOT "$slot" 100 | sed '/^$/d')
        ((${#keys[@]})) || break
        r=$(cluster_cli "$src" MIGRATE 127.0.0.1 "$dst" "" 0 5000 KEYS "${keys[@]}")
        [[ $r == OK || $r == NOKEY ]] || fail "MIGRATE of ${keys[*]}: $r"
    done
    ((${#keys[@]} == 0)) || failure "slot $slot: keys left on $src after 20 MIGRATEs"
    # shellcheck disable=SC2034 # the scenario's
    HELD_MS=0 HELD_NOTE=none
    if (($4)); then
        t0=$(now_ns)
        wait_until 10 eval "((\$(node_errors $dst ERR) + \$(node_errors $dst TRYAGAIN) > e0)) || library_on $dst" ||
            failure "slot $slot held half-way for 10 s: no command redirected to $dst"
        # shellcheck disable=SC2034 # the scenario's
        HELD_MS=$(ms_since "$t0") HELD_NOTE="err:$(node_errors "$dst" ERR)/tryagain:$(node_errors "$dst" TRYAGAIN)"
    fi
    id=$(cluster_cli "$dst" CLUSTER MYID)
    [[ $(cluster_cli "$dst" CLUSTER SETSLOT "$slot" NODE "$id") == OK ]] || fail "SETSLOT $slot NODE on $dst"
    r=$(cluster_cli "$src" CLUSTER SETSLOT "$slot" NODE "$id")
    # shellcheck disable=SC2034 # the scenario's
    SRC_DEMOTED=0
    if [[ $r == *"only with masters"* ]]; then
        # shellcheck disable=SC2034 # the scenario's
        SRC_DEMOTED=1
    else
        [[ $r == OK ]] || fail "SETSLOT $slot NODE on $src: $r"
    fi
    for p in $(cluster_ports); do
        if [[ $p != "$src" && $p != "$dst" && $(cluster_role "$p" 2>/dev/null) == master ]]; then
            [[ $(cluster_cli "$p" CLUSTER SETSLOT "$slot" NODE "$id") == OK ]] || fail "SETSLOT $slot NODE on $p"
        fi
    done
}

# ------------------------------------------- Slot migrations (chaos 26, 27) ---
# A slot of busy applications moved from one primary (SRC) to another (DST)
# under load: by redis-cli --cluster reshard (26) or by hand, held half-way
# (27). What they share:
#   migration_slots SRC N          # MIG_SLOTS: the N slots reshard takes from SRC
#   migration_apps PREFIX K SLOTS  # MIG_APPS: K applications on distinct SLOTS
#   migration_owned SLOT PORT      # every node names PORT the slot's primary
#   migration_watch SRC APP EPOCH  # a watcher per application (rollback.py cluster)
#   migration_watch_read APP       # MIG_END[APP]: the old meta gone on DST
#   migration_left SRC APP         # no key of APP left on SRC
#   migration_redirects            # MIG_REDIR: ASK/MOVED/TRYAGAIN seen so far
# (issuer's idpool_cluster_redirects_total, idpool-load's reply_* counters).

# migration_slots SRC N: MIG_SLOTS, the first N slots of the primary at
# SRC in slot order (those redis-cli --cluster reshard takes from a single
# source: clusterManagerComputeReshardTable walks a source's slots upwards).
migration_slots() {
    local lo hi _rest s
    MIG_SLOTS=()
    while read -r lo hi _rest; do
        for ((s = lo; s <= hi && ${#MIG_SLOTS[@]} < $2; s++)); do MIG_SLOTS+=("$s"); done
    done < <(migration_ranges "$1")
    ((${#MIG_SLOTS[@]} == $2)) || fail "$1 holds fewer than $2 slots"
}

# migration_ranges PORT: the slot ranges "lo hi" of the primary at PORT,
# sorted (CLUSTER NODES, as PORT sees it).
migration_ranges() {
    local _id addr _flags _master _ps _pr _epoch _link slots r
    while read -r _id addr _flags _master _ps _pr _epoch _link slots; do
        addr=${addr#*:}
        [[ ${addr%%@*} == "$1" ]] || continue
        for r in $slots; do
            [[ $r != \[* ]] || continue
            echo "${r%-*} ${r#*-}"
        done
    done < <(cluster_cli "$1" CLUSTER NODES) | sort -n
}

# migration_apps PREFIX K SLOT...: MIG_APPS, K applications named PREFIX<i>
# whose keys hash to K distinct slots among SLOT... (CLUSTER KEYSLOT of the
# hash tag, the application's name), at most 20000 names tried.
migration_apps() {
    local prefix=$1 k=$2 i s
    shift 2
    local -A want=() used=()
    for s in "$@"; do want[$s]=1; done
    MIG_APPS=()
    i=0
    while read -r s; do
        i=$((i + 1))
        [[ -n ${want[$s]:-} && -z ${used[$s]:-} ]] || continue
        used[$s]=1
        MIG_APPS+=("$prefix$i")
        ((${#MIG_APPS[@]} < k)) || break
    done < <(for ((j = 1; j <= 20000; j++)); do echo "CLUSTER KEYSLOT $prefix$j"; done |
        cluster_cli "$(cluster_any)")
    ((${#MIG_APPS[@]} == k)) || fail "no $k applications $prefix<i> on distinct slots of $*"
}

# migration_owned SLOT PORT: every live node names PORT the primary of SLOT.
migration_owned() { cluster_owned_by "$1" "$2"; }

# migration_watch SRC APP EPOCH: rollback.py's cluster watcher of APP
# ($DIR/watch.APP), started before the migration: t_detect when a majority
# of the nodes but SRC name another primary of APP's slot, the end when
# that primary's meta of APP no longer carries EPOCH (the source node's:
# discarded by the daemons' sweep, then written under the new primary's
# epoch). MIG_WATCHERS gets its pid.
declare -A MIG_WATCHERS=() MIG_END=() MIG_DETECT=()
migration_watch() {
    cluster_watcher_start "$1" "$2" "$3" "$DIR/watch.$2" 60
    MIG_WATCHERS[$2]=$!
}

# migration_watch_read APP: waits for APP's watcher; MIG_DETECT[APP] (ns:
# the slot named DST's by a majority), MIG_END[APP] (ns: the old meta gone
# there; now if it never went: a failure), MIG_STATE, MIG_NEW (the port).
migration_watch_read() {
    local state=missing detect=0 to=0 polls=0 new='' _t
    wait_until 65 test -s "$DIR/watch.$1" || failure "$1: the migration watcher did not report"
    wait "${MIG_WATCHERS[$1]}" 2>/dev/null || true
    [[ -s $DIR/watch.$1 ]] && read -r state detect to polls new _t <"$DIR/watch.$1"
    expect "[[ $state == discarded || $state == replaced ]]" \
        "$1: the pool that arrived with the source's epoch was not discarded (watcher: $state)"
    ((to > 0)) || to=$(now_ns)
    # shellcheck disable=SC2034 # read by the scenarios
    MIG_END[$1]=$to MIG_DETECT[$1]=$detect MIG_STATE=$state MIG_NEW=$new
}

# migration_left SRC APP: how many keys of APP's slot are left on the
# primary at SRC (CLUSTER COUNTKEYSINSLOT; every key of a slot is one
# application's or another's sharing it).
migration_left() { cluster_cli "$1" CLUSTER COUNTKEYSINSLOT "$(cluster_slot "$(pool_key "$2")")"; }

# migration_keys PORT APP: APP's keys on the primary at PORT (pool, meta,
# lock: those that exist), space-separated.
migration_keys() {
    cluster_cli "$1" CLUSTER GETKEYSINSLOT "$(cluster_slot "$(pool_key "$2")")" 100 | grep -F "{$2}" |
        sed 's/.*://' | sort | tr '\n' ' '
}

# migration_redirects: MIG_REDIR "moved/ask/tryagain", the redirects met
# so far by the issuer, daemon i (idpool_cluster_redirects_total in its
# /metrics, on its --http port); MIG_LOAD_REDIR "moved/ask/tryagain", those the idpool-load
# consumers counted (reply_moved, reply_ask, reply_tryagain) and
# MIG_LIB_REDIR "moved/asked/retries", libidpool's consumers (moved=,
# asked=, cluster_retries=), from their last lines in $DIR/cons.*.out
# (printed when they stop).
migration_redirects() {
    local k m v vals=()
    m=$(curl -fsS --max-time 3 "http://127.0.0.1:${HTTP_PORT[i]}/metrics" 2>/dev/null || true)
    for k in moved ask tryagain; do
        v=$(awk -v k="$k" 'index($0, "idpool_cluster_redirects_total{") == 1 &&
            index($0, "kind=\"" k "\"") { s += $NF } END { print s + 0 }' <<<"$m")
        vals+=("$v")
    done
    # shellcheck disable=SC2034 # read by the scenarios
    MIG_REDIR=$(joined / "${vals[@]}")
    # shellcheck disable=SC2034 # read by the scenarios
    read -r MIG_LOAD_REDIR MIG_LIB_REDIR < <(cat "$DIR"/cons.*.out 2>/dev/null | awk '
        function f(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2) + 0; return 0 }
        /^load:/ { lm += f("reply_moved"); la += f("reply_ask"); lt += f("reply_tryagain") }
        /^clientload:/ { cm += f("moved"); ca += f("asked"); cr += f("cluster_retries") }
        END { printf "%d/%d/%d %d/%d/%d\n", lm, la, lt, cm, ca, cr }')
}

# migration_refusals APP: TAKES_IN and REFUSED_IN (takes_in) of APP's take
# consumers inside its migration window [T_FROM, MIG_END[APP]].
migration_refusals() { takes_in "$1" "$T_FROM" "${MIG_END[$1]}"; }

# migration_trio PREFIX SLOT...: MIG_APPS, three applications PREFIX<i>
# whose keys share one slot among SLOT... (MIG_SLOT), at most 20000 names
# tried.
migration_trio() {
    local prefix=$1 i=0 s
    shift
    local -A want=() on=()
    for s in "$@"; do want[$s]=1; done
    MIG_APPS=()
    while read -r s; do
        i=$((i + 1))
        [[ -n ${want[$s]:-} ]] || continue
        on[$s]+=" $prefix$i"
        # shellcheck disable=SC2206 # names without blanks
        MIG_APPS=(${on[$s]})
        if ((${#MIG_APPS[@]} == 3)); then
            # shellcheck disable=SC2034 # read by the scenarios
            MIG_SLOT=$s
            return 0
        fi
    done < <(for ((j = 1; j <= 20000; j++)); do echo "CLUSTER KEYSLOT $prefix$j"; done |
        cluster_cli "$(cluster_any)")
    fail "no three applications $prefix<i> share a slot"
}

# migration_ends: SRC, the primary of slot 0, and DST, that of slot 16383
# (ports), the source and target of a migration, and their ids SRC_ID, DST_ID.
migration_ends() {
    SRC=$(cluster_primary_of_slot 0)
    DST=$(cluster_primary_of_slot 16383)
    [[ -n $SRC && -n $DST && $SRC != "$DST" ]] || fail "no source and destination primaries ($SRC, $DST)"
    # shellcheck disable=SC2034 # the scenario's
    SRC_ID=$(cluster_cli "$SRC" CLUSTER MYID) DST_ID=$(cluster_cli "$DST" CLUSTER MYID)
}

# migration_consumers APP...: the consumers of every kind on each (N0_OF[APP]
# their round's start), then each one's pool popped past (pop_past).
migration_consumers() {
    local app
    for app in "$@"; do
        failover_consumers "$app" "$IDPOOL_REDIS_CLUSTER_URL"
        N0_OF[$app]=$N0
    done
    for app in "$@"; do
        N0=${N0_OF[$app]}
        pop_past "$app"
    done
}

# migration_watch_all T APP...: each application's watcher read
# (migration_watch_read: MIG_END[APP]); W_TO the latest of T and those ends.
migration_watch_all() {
    local app
    W_TO=$1
    shift
    for app in "$@"; do
        migration_watch_read "$app"
        if ((MIG_END[$app] > W_TO)); then W_TO=${MIG_END[$app]}; fi
    done
}

# migration_recovered T APP...: R on DST for each application, from T
# (ns); LOWS gets each one's low-water time (recovered: an upper bound, a
# pool is looked at when its turn comes).
migration_recovered() {
    local app t=$1
    shift
    for app in "$@"; do
        REDIS_PORT=$DST
        LAST_RECOVERY_MS=timeout
        recovered "$app" "$t" 30
        LOWS+=("$LAST_RECOVERY_MS")
    done
}

# migration_rounds APP...: the row's round of each application a migration
# moved, over its window [T_FROM, MIG_END[APP]] (migration_watch_read), with
# its N0_OF and the probe of its pool on the source; REFUSED_SUM: the
# IDPOOL_EPOCH refusals counted inside the windows.
migration_rounds() {
    local app r=0
    REFUSED_SUM=0
    for app in "$@"; do
        r=$((r + 1))
        N0=${N0_OF[$app]}
        cp "$DIR/probe.$app.pool" "$DIR/probe.pool"
        WINDOW=$(((MIG_END[$app] - T_FROM) / 1000000))
        round_end "$r" "$app" "$T_FROM" "${MIG_END[$app]}" optional
        REFUSED_SUM=$((REFUSED_SUM + REFUSED_IN))
    done
}

# migration_served APP FROM TO: how many takes of APP's client-library
# consumers (libidpool on the Cluster and through the ID API, the Python
# client: the ones that follow ASK; idpool-load does not) were sent inside
# [FROM, TO] and answered with IDs by TO.
migration_served() {
    "$PYTHON" "$ROLLBACK_PY" served "$2" "$3" "$DIR/$1".c*.buffered.*.bin
}
