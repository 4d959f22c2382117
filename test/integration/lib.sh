# shellcheck shell=bash
# Harness for the integration tests test/integration/t_*.sh. Each test:
#
#   #!/usr/bin/env bash
#   source "$(dirname "$0")/lib.sh"
#   setup                       # servers up, $DIR, env loaded; 77 = SKIP
#   add_app user step=100
#   start_daemon a
#   wait_until 10 pool_ge user 1 || fail "pool never filled"
#   pop user 500 "$DIR/u" --type monotonic --dump "$DIR/ids.txt"
#   stop_daemon a               # fails unless it exits 0 within 10 s
#   pass "user pool filled and drained"
#
# meson sets IDPOOLD, IDPOOL_LOAD, IDPOOL_CHECK and IDPOOL_SOURCE_ROOT; run
# by hand they default to build/. Python helpers that talk to Redis run with
# $PYTHON (IDPOOL_PYTHON, default /usr/bin/python3: Debian's interpreter,
# which has python3-redis). KEEP=1 keeps $DIR. Every wait here is bounded.
set -euo pipefail

IDPOOL_SOURCE_ROOT=${IDPOOL_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
IDPOOLD=${IDPOOLD:-$IDPOOL_SOURCE_ROOT/build/idpoold}
IDPOOL_LOAD=${IDPOOL_LOAD:-$IDPOOL_SOURCE_ROOT/build/test/idpool-load}
IDPOOL_CHECK=${IDPOOL_CHECK:-$IDPOOL_SOURCE_ROOT/build/test/idpool-check}
IDPOOL_KEY_PREFIX=${IDPOOL_KEY_PREFIX:-idpool}
PYTHON=${IDPOOL_PYTHON:-/usr/bin/python3}
SERVERS=$IDPOOL_SOURCE_ROOT/scripts/servers.sh
# The tests' Python imports check() (and the rest of the harness) from test/lib.
PYTHONPATH=$IDPOOL_SOURCE_ROOT/test/lib${PYTHONPATH:+:$PYTHONPATH}
export IDPOOL_SOURCE_ROOT IDPOOLD IDPOOL_LOAD IDPOOL_CHECK PYTHON PYTHONPATH

declare -A DAEMON_PID=()    # name -> pid of a running daemon
declare -A DAEMON_STATUS=() # name -> exit status once stopped
DAEMON_NAMES=()             # every name ever started (for the logs)
DIR=''

# ------------------------------------------------------------- messages ---

info() { printf '# %s %s\n' "$(date +%T.%3N)" "$*" >&2; }
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
pass() { printf 'PASS: %s\n' "$*"; } # does not exit
# skip_part MSG: a part of a test cannot run here (a tool missing): noted,
# the test goes on; under scripts/test.sh in CI (IDPOOL_CI=1) a failure,
# as a skipped test is.
skip_part() {
    [[ ${IDPOOL_CI:-0} != 1 ]] || fail "$* (in CI nothing may be skipped)"
    info "$*"
}

skip() {
    printf 'SKIP: %s\n' "$*"
    exit 77
}

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
    [[ $1 == "$2" ]] || fail "${3:-assert_eq}: expected '$1', got '$2'"
}
assert_ne() {
    [[ $1 != "$2" ]] || fail "${3:-assert_ne}: did not expect '$2'"
}
# assert_ge A B [WHAT]: A >= B as integers (also _gt, _le).
assert_ge() { (($1 >= $2)) || fail "${3:-assert_ge}: expected $1 >= $2"; }
assert_gt() { (($1 > $2)) || fail "${3:-assert_gt}: expected $1 > $2"; }
assert_le() { (($1 <= $2)) || fail "${3:-assert_le}: expected $1 <= $2"; }

# wait_until TIMEOUT_S CMD...: polls CMD every 0.1 s; 1 (and a note) on
# timeout, so write `wait_until 5 cond || fail "why"`. TIMEOUT may be 0.5.
wait_until() {
    local timeout=$1 deadline
    shift
    deadline=$(($(now_us) + $(to_us "$timeout")))
    while :; do
        if "$@"; then
            return 0
        fi
        if (($(now_us) >= deadline)); then
            info "wait_until: timed out after ${timeout}s: $*"
            return 1
        fi
        sleep 0.1
    done
}

now_us() { echo "${EPOCHREALTIME/[,.]/}"; }
to_us() { # seconds, maybe fractional -> microseconds
    local s=$1 frac=000000
    if [[ $s == *.* ]]; then
        frac=${s#*.}000000
        frac=${frac:0:6}
        s=${s%%.*}
    fi
    echo $((10#${s:-0} * 1000000 + 10#$frac))
}

# True if PID is a live process (zombies count as dead).
proc_alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# True if PID is stopped (SIGSTOP, state T).
proc_stopped() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} == T ]]
}

# ---------------------------------------------------------- set up/down ---

# Starts throwaway servers in a fresh $DIR and loads their DIR/env
# (IDPOOL_REDIS_URL, IDPOOL_MYSQL_URL, REDIS_PORT, MYSQL_PORT, MYSQL_SOCKET).
# `setup redis` starts only redis-server (SERVERS_REDIS_ARGS: more of its
# arguments, see scripts/servers.sh).
setup() {
    local only=${1:-} bin
    for bin in redis-server redis-cli mariadbd mariadb-install-db mariadb; do
        command -v "$bin" >/dev/null 2>&1 || [[ -x /usr/sbin/$bin ]] ||
            skip "$bin is not installed"
    done
    DIR=$(mktemp -d "${TMPDIR:-/tmp}/idpool-test.XXXXXX")
    export DIR
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    info "work dir $DIR"
    "$SERVERS" start "$DIR" ${only:+"$only"} >/dev/null || fail "servers did not start"
    # shellcheck source=/dev/null
    source "$DIR/env"
}

# EXIT trap: stops what the test started, reports, removes $DIR.
cleanup() {
    local rc=$? name pid
    set +e
    trap - EXIT INT TERM
    [[ -n $DIR ]] || exit "$rc"
    for name in "${!DAEMON_PID[@]}"; do
        kill_daemon "$name" TERM 5 >/dev/null 2>&1
    done
    # Any other background job the test left behind.
    for pid in $(jobs -p); do
        kill -TERM "$pid" 2>/dev/null
        kill -CONT "$pid" 2>/dev/null
    done
    for pid in $(jobs -p); do
        wait_until 5 eval "! proc_alive $pid" >/dev/null 2>&1 || kill -KILL "$pid" 2>/dev/null
    done
    # A sanitizer report, or a broken invariant of the code (internal error), in any
    # daemon log fails the test.
    for name in "${DAEMON_NAMES[@]}"; do
        if grep -qE 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|internal error:' \
            "$DIR/$name.log" 2>/dev/null; then
            printf 'FAIL: sanitizer report or internal error in %s.log\n' "$name" >&2
            ((rc == 0 || rc == 77)) && rc=1
        fi
    done
    if ((rc != 0 && rc != 77)); then
        for name in "${DAEMON_NAMES[@]}"; do
            printf '\n----- %s.log (last 200 lines) -----\n' "$name" >&2
            tail -n 200 "$DIR/$name.log" >&2
        done
        printf '\n----- redis.log (last 20 lines) -----\n' >&2
        tail -n 20 "$DIR/redis.log" >&2
        printf '\n----- mysql.err (last 20 lines) -----\n' >&2
        tail -n 20 "$DIR/mysql.err" >&2
    fi
    if [[ -f $DIR/b/env ]]; then "$SERVERS" stop "$DIR/b" || rc=1; fi
    "$SERVERS" stop "$DIR" || rc=1
    if [[ ${KEEP:-0} == 1 ]]; then
        info "kept $DIR"
    else
        rm -rf "$DIR"
    fi
    exit "$rc"
}

# env_b: a second pair of servers (environment B, for the client
# libraries' failover) in $DIR/b, stopped by cleanup; sets B_REDIS, B_MYSQL,
# B_REDIS_PORT and B_MYSQL_PORT. sql_b runs SQL there, as sql does in A.
# shellcheck disable=SC2034 # the B_ variables are for the tests that source this
env_b() {
    "$SERVERS" start "$DIR/b" >/dev/null || fail "environment B did not start"
    B_REDIS=$(sed -n 's/^export IDPOOL_REDIS_URL=//p' "$DIR/b/env")
    B_MYSQL=$(sed -n 's/^export IDPOOL_MYSQL_URL=//p' "$DIR/b/env")
    B_REDIS_PORT=$(sed -n 's/^export REDIS_PORT=//p' "$DIR/b/env")
    B_MYSQL_PORT=$(sed -n 's/^export MYSQL_PORT=//p' "$DIR/b/env")
}
sql_b() {
    mariadb --no-defaults -h 127.0.0.1 -P "$B_MYSQL_PORT" -u root idpool -N -B -r -e "$1"
}

# two_environments KEY: environment B beside A (env_b; A_REDIS is A's URL),
# application KEY in both with delta 2 (remainder 0 in A, 1 in B: their IDs
# never collide) and a budget no client test reaches, and a refilling
# idpoold in each (daemons a and b).
# shellcheck disable=SC2034 # A_REDIS is for the tests that source this
two_environments() {
    local key=$1
    A_REDIS=$IDPOOL_REDIS_URL
    env_b
    add_app "$key" step=20000 max_pool_size=400000 max_size_per_times=1000 \
        max_size_per_second=50000000 delta=2 remainder=0
    sql_b "INSERT INTO application (entity_key, step, max_pool_size, max_size_per_times, max_size_per_second, delta, remainder) VALUES ($(sql_value "$key"), 20000, 400000, 1000, 50000000, 2, 1)" ||
        fail "row $key in environment B"
    start_daemon a --instance a --tick-ms 10
    start_daemon b --instance b --tick-ms 10 --redis "$B_REDIS" --mysql "$B_MYSQL"
}

# -------------------------------------------------------------- daemons ---

# start_daemon NAME [ARGS...]: idpoold in the background, log in $DIR/NAME.log.
start_daemon() {
    local name=$1
    shift
    [[ -x $IDPOOLD ]] || fail "idpoold not built: $IDPOOLD"
    [[ -z ${DAEMON_PID[$name]:-} ]] || fail "daemon $name is already running"
    "$IDPOOLD" --redis "$IDPOOL_REDIS_URL" --mysql "$IDPOOL_MYSQL_URL" \
        --http '' --log-level debug "$@" </dev/null >>"$DIR/$name.log" 2>&1 &
    DAEMON_PID[$name]=$!
    [[ " ${DAEMON_NAMES[*]} " == *" $name "* ]] || DAEMON_NAMES+=("$name")
    info "started $name (pid $!): idpoold $*"
}

daemon_pid() { echo "${DAEMON_PID[$1]:-}"; }
daemon_alive() { [[ -n ${DAEMON_PID[$1]:-} ]] && proc_alive "${DAEMON_PID[$1]}"; }
daemon_log() { echo "$DIR/$1.log"; }
# log_has NAME ERE: the daemon's log matches (grep -E).
log_has() { grep -qE -- "$2" "$DIR/$1.log" 2>/dev/null; }
# signal_daemon NAME SIG: just sends it (HUP, STOP, CONT, ...).
signal_daemon() { kill "-$2" "${DAEMON_PID[$1]:?no daemon $1}"; }

# stop_daemon NAME [TIMEOUT_S]: SIGTERM; fails unless it exits 0 in time.
stop_daemon() {
    local name=$1 timeout=${2:-10} st
    [[ -n ${DAEMON_PID[$name]:-} ]] || fail "stop_daemon: no daemon $name"
    kill_daemon "$name" TERM "$timeout"
    st=${DAEMON_STATUS[$name]}
    [[ $st == 0 ]] || fail "daemon $name exited with status $st on SIGTERM"
}

# kill_daemon NAME [SIG [TIMEOUT_S]]: sends SIG (default KILL), waits at most
# TIMEOUT (5 s; then SIGKILL), reaps it; the status is in DAEMON_STATUS[NAME].
kill_daemon() {
    local name=$1 sig=${2:-KILL} timeout=${3:-5} pid st=0
    pid=${DAEMON_PID[$name]:?no daemon $name}
    kill "-$sig" "$pid" 2>/dev/null || true
    # A stopped process keeps TERM pending: continue it, but only if it is
    # stopped. A stray SIGCONT while an ASan build exits cancels the SIGSTOP
    # LeakSanitizer's ptrace attach waits for, and the exit hangs for good.
    if proc_stopped "$pid"; then kill -CONT "$pid" 2>/dev/null || true; fi
    if ! wait_until "$timeout" eval "! proc_alive $pid" 2>/dev/null; then
        info "$name (pid $pid) still running ${timeout}s after SIG$sig; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        st=timeout
    fi
    if [[ $st == timeout ]]; then
        wait "$pid" 2>/dev/null || true
    else
        wait "$pid" 2>/dev/null || st=$?
    fi
    DAEMON_STATUS[$name]=$st
    unset "DAEMON_PID[$name]"
    info "$name (pid $pid) gone after SIG$sig, status $st"
}

# -------------------------------------------------------------- servers ---

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# sql "STATEMENTS": runs them in database idpool; tab-separated, no header,
# values raw (no \\ escaping).
sql() {
    mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool -N -B -r -e "$1"
}
# sql_file FILE: feeds a file to database idpool.
sql_file() {
    mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root idpool <"$1"
}

# Quotes a value for SQL: integers and NULL as they are, others as strings.
sql_value() {
    if [[ $1 =~ ^-?[0-9]+$ || $1 == NULL ]]; then
        printf %s "$1"
    else
        local v=${1//\\/\\\\}
        printf "'%s'" "${v//\'/\'\'}"
    fi
}

# add_app KEY [col=val ...]: inserts a row into application.
add_app() {
    local key=$1 cols="\`entity_key\`" vals kv
    shift
    vals=$(sql_value "$key")
    for kv in "$@"; do
        [[ $kv == *=* ]] || fail "add_app: expected col=val, got '$kv'"
        cols+=", \`${kv%%=*}\`"
        vals+=", $(sql_value "${kv#*=}")"
    done
    sql "INSERT INTO application ($cols) VALUES ($vals)"
}

# set_app KEY col=val ...: updates an application row (an operator's edit).
set_app() {
    local key=$1 set='' kv
    shift
    for kv in "$@"; do
        [[ $kv == *=* ]] || fail "set_app: expected col=val, got '$kv'"
        set+="${set:+, }\`${kv%%=*}\` = $(sql_value "${kv#*=}")"
    done
    sql "UPDATE application SET $set WHERE entity_key = $(sql_value "$key")"
}

# app_col KEY COLUMN: one column of an application row.
app_col() { sql "SELECT \`$2\` FROM application WHERE entity_key = $(sql_value "$1")"; }

# leases KEY: the application's leases from MySQL, "lo hi" lines ([lo, hi)),
# as idpool-check --leases reads them.
leases() { sql "SELECT lo, hi FROM application_lease WHERE application_id = $(app_col "$1" id)"; }

# redis_epoch: the epoch the daemons validated on this Redis process and store
# in meta's epoch field: "run_id:master_replid:nonce" (idpool_validated; empty
# before a daemon validated). A restart, a failover, a reload of the library
# or a restore into the process makes a new one.
redis_epoch() { rcli FCALL_RO idpool_validated 0; }

# redis_server_id: "run_id:master_replid" of this Redis process (INFO): a
# restart changes run_id, a promotion or demotion master_replid.
redis_server_id() {
    rcli INFO server replication | tr -d '\r' |
        awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r ":" m }'
}

# Restart, stop or crash one server; its port and data are kept.
redis_stop() { "$SERVERS" stop "$DIR" redis; }
redis_kill() { "$SERVERS" kill "$DIR" redis; }
redis_start() { "$SERVERS" start "$DIR" redis >/dev/null; }
mysql_stop() { "$SERVERS" stop "$DIR" mysql; }
mysql_kill() { "$SERVERS" kill "$DIR" mysql; }
mysql_start() { "$SERVERS" start "$DIR" mysql >/dev/null; }

# A free loopback TCP port (e.g. for --http 127.0.0.1:PORT).
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# ------------------------------------------------------------------ IDs ---

# redis_key KEY KIND: the Redis key of application KEY's KIND (pool, meta,
# lock), as src/core/keys.c names it (test/unit/test_pykeys.py checks).
redis_key() { echo "$IDPOOL_KEY_PREFIX:{$1}:$2"; }
pool_key() { redis_key "$1" pool; }
meta_key() { redis_key "$1" meta; }
lock_key() { redis_key "$1" lock; }
llen() { rcli LLEN "$(pool_key "$1")"; }
# pool_ge KEY N: the pool holds at least N IDs (for wait_until).
pool_ge() {
    local n
    n=$(llen "$1" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]] && ((n >= $2))
}

# pop KEY COUNT PREFIX [--batch B] [--timeout-ms T] [--stop-file F]
# [idpool-check options]: pops COUNT IDs from KEY's pool with idpool-load
# (LPOP, batch 100 unless given), recorded in the pop log PREFIX.0.bin, then
# checks that log with idpool-check and the options (e.g. --type monotonic,
# --start-offset N, --delta D --remainder R, --dump FILE for the IDs as
# text); the report is in PREFIX.check. Status: 0 all COUNT IDs arrived
# within T ms (10000) and the checks hold; 1 an error, or fewer IDs in time
# ("timeout" on stderr); 2 a check failed. With --stop-file it pops until F
# exists (at most 120 s) instead of for T ms.
pop() {
    local key=$1 count=$2 prefix=$3 batch=100 timeout_ms=10000 st=0 n check=() duration stop=()
    shift 3
    while (($#)); do
        case $1 in
        --batch) batch=$2 && shift 2 ;;
        --timeout-ms) timeout_ms=$2 && shift 2 ;;
        --stop-file) stop=(--stop-file "$2") && shift 2 ;;
        *) check+=("$1") && shift ;;
        esac
    done
    [[ -x $IDPOOL_LOAD && -x $IDPOOL_CHECK ]] ||
        fail "idpool-load or idpool-check not built: $IDPOOL_LOAD $IDPOOL_CHECK"
    rm -f "$prefix.0.bin"
    duration=$(awk -v t="$timeout_ms" 'BEGIN { printf "%.3f", t / 1000 }')
    ((${#stop[@]} == 0)) || duration=120
    "$IDPOOL_LOAD" --port "$REDIS_PORT" --mode lpop --key "$(pool_key "$key")" \
        --batch "$batch" --count "$count" --record "$prefix" --timeout-ms "$timeout_ms" \
        --duration "$duration" "${stop[@]}" >"$prefix.load" 2>&1 || st=$?
    if ((st != 0)); then
        printf 'pop %s: idpool-load exited with status %s: %s\n' "$key" "$st" \
            "$(tail -n 3 "$prefix.load" | tr '\n' ' ')" >&2
        return 1
    fi
    # --allow-empty: the number of IDs is checked below (a timeout says so).
    "$IDPOOL_CHECK" --allow-empty "${check[@]}" "$prefix.0.bin" >"$prefix.check" 2>&1 || st=$?
    if ((st == 1)); then
        printf 'pop %s: a check failed: %s\n' "$key" \
            "$(grep -E '^    |^check: ' "$prefix.check" | tr '\n' ' ')" >&2
        return 2
    elif ((st != 0)); then
        printf 'pop %s: idpool-check exited with status %s: %s\n' "$key" "$st" \
            "$(tail -n 3 "$prefix.check" | tr '\n' ' ')" >&2
        return 1
    fi
    n=$(sed -n 's/^check: ids=\([0-9]*\) .*/\1/p' "$prefix.check")
    if [[ $n != "$count" ]]; then
        printf 'pop %s: timeout: %s of %s IDs after %s ms\n' "$key" "${n:-?}" "$count" \
            "$timeout_ms" >&2
        return 1
    fi
}

# check_pops REPORT [idpool-check options] [LOG | --list FILE]...: runs
# idpool-check, its report to REPORT; non-zero, with the report's examples
# and last line on stderr, on a violation or unreadable input.
check_pops() {
    local report=$1 st=0
    shift
    "$IDPOOL_CHECK" "$@" >"$report" 2>&1 || st=$?
    ((st == 0)) && return 0
    printf 'idpool-check (status %s): %s\n' "$st" \
        "$(grep -E '^    |^check: |^idpool-check: ' "$report" | tail -n 12)" >&2
    return 1
}

# ids_text LOG...: the IDs of pop logs as decimal lines, in pop order.
ids_text() {
    local st=0
    "$IDPOOL_CHECK" --dump /dev/fd/3 "$@" 3>&1 >/dev/null || st=$?
    ((st <= 1)) || fail "ids_text: idpool-check cannot read $*"
}

# assert_unique FILE...: no ID occurs twice across the text dumps.
assert_unique() {
    local dups
    dups=$(sort -n -- "$@" | uniq -d | head -n 5)
    [[ -z $dups ]] || fail "duplicate IDs in $*: $(echo "$dups" | tr '\n' ' ')"
}

# assert_increasing FILE: the text dump is strictly increasing.
assert_increasing() {
    local err
    err=$(LC_ALL=C sort -n -u -c -- "$1" 2>&1) || fail "not strictly increasing: $err"
}

# count_ids FILE: number of IDs in a text dump.
count_ids() { wc -l <"$1" | tr -d ' '; }
