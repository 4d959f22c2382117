# shellcheck shell=bash
# The test suites' one shell library: the integration tests
# test/integration/t_*.sh source it, and so does the chaos suite's
# test/chaos/lib.sh, which adds only what is the chaos suite's own. Each test:
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
# Its parts: messages and asserts; waits and processes; servers up and down;
# daemons; Redis and MySQL (rcli, sql, add_app ...); key names and IDs (pop,
# check_pops ...); the fault tests' consumers and checks (consumer_start,
# check_ids, lease_dump, probe ...); idpoolctl runs (ctl_expect, out_has ...).
# The Python side of the same helpers is test/lib/harness.py.
#
# meson sets IDPOOLD, IDPOOLCTL, IDPOOL_LOAD, IDPOOL_CHECK and
# IDPOOL_SOURCE_ROOT; run by hand they default to the build directory
# IDPOOL_BUILD (build/). Python helpers that talk to Redis run with $PYTHON
# (IDPOOL_PYTHON, default /usr/bin/python3: Debian's interpreter, which has
# python3-redis). KEEP=1 keeps $DIR. Every wait here is bounded.
set -euo pipefail

IDPOOL_SOURCE_ROOT=${IDPOOL_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
IDPOOL_BUILD=${IDPOOL_BUILD:-$IDPOOL_SOURCE_ROOT/build}
IDPOOLD=${IDPOOLD:-$IDPOOL_BUILD/idpoold}
IDPOOLCTL=${IDPOOLCTL:-$IDPOOL_BUILD/idpoolctl}
IDPOOL_LOAD=${IDPOOL_LOAD:-$IDPOOL_BUILD/test/idpool-load}
IDPOOL_CHECK=${IDPOOL_CHECK:-$IDPOOL_BUILD/test/idpool-check}
IDPOOL_KEY_PREFIX=${IDPOOL_KEY_PREFIX:-idpool}
PYTHON=${IDPOOL_PYTHON:-/usr/bin/python3}
SERVERS=$IDPOOL_SOURCE_ROOT/scripts/servers.sh
# The tests' Python imports check() (and the rest of the harness) from test/lib;
# "$PYTHON" "$HARNESS_PY" SUBCOMMAND runs its helpers (hammer, subscribe,
# webhook, events, summary: see its doc).
PYTHONPATH=$IDPOOL_SOURCE_ROOT/test/lib${PYTHONPATH:+:$PYTHONPATH}
export HARNESS_PY=$IDPOOL_SOURCE_ROOT/test/lib/harness.py
export IDPOOL_SOURCE_ROOT IDPOOLD IDPOOLCTL IDPOOL_LOAD IDPOOL_CHECK PYTHON PYTHONPATH

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

# proc_state PID: the process' state letter (R, S, T, Z ...); 1 if none.
proc_state() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    echo "${stat%% *}"
}
# True if PID is a live process (zombies count as dead).
proc_alive() {
    local st
    st=$(proc_state "$1") && [[ $st != Z ]]
}
# True if PID is gone (or a zombie): for wait_until.
proc_gone() { ! proc_alive "$1"; }
# True if PID is stopped (SIGSTOP, state T).
proc_stopped() {
    local st
    st=$(proc_state "$1") && [[ $st == T ]]
}

# reap PID TIMEOUT_S: waits at most TIMEOUT for PID (a child) to end, else
# SIGKILLs it; 1 if it had to.
reap() {
    wait_until "$2" proc_gone "$1" >/dev/null 2>&1 && return 0
    kill -KILL "$1" 2>/dev/null || true
    return 1
}

# require_built NAME PATH: the binary PATH (NAME) is built, else a failure.
require_built() { [[ -x $2 ]] || fail "$1 not built: $2"; }
# require_redis_py: $PYTHON imports python3-redis, else a failure.
require_redis_py() { "$PYTHON" -c 'import redis' 2>/dev/null || fail "python3-redis is missing for $PYTHON"; }

# ---------------------------------------------------------- set up/down ---

# Starts throwaway servers in a fresh $DIR and loads their DIR/env
# (IDPOOL_REDIS_URL, IDPOOL_MYSQL_URL, REDIS_PORT, MYSQL_PORT, MYSQL_SOCKET).
# `setup redis` starts only redis-server (SERVERS_REDIS_ARGS: more of its
# arguments, see scripts/servers.sh); SERVERS_SENTINEL=1 setup a Sentinel
# set, SERVERS_CLUSTER=1 setup a Redis Cluster instead of the one Redis.
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
    for pid in $(jobs -p); do reap "$pid" 5; done
    # A sanitizer report, or a broken invariant of the code (internal error), in any
    # daemon log fails the test.
    for name in $(reported_logs); do
        printf 'FAIL: sanitizer report or internal error in %s.log\n' "$name" >&2
        ((rc == 0 || rc == 77)) && rc=1
    done
    if ((rc != 0 && rc != 77)); then
        for name in "${DAEMON_NAMES[@]}"; do
            printf '\n----- %s.log (last 200 lines) -----\n' "$name" >&2
            tail -n 200 "$DIR/$name.log" >&2
        done
        for name in redis node1 node2 node3 node4 node5 node6; do
            [[ $name == redis || -f $DIR/$name.log ]] || continue
            printf '\n----- %s.log (last 20 lines) -----\n' "$name" >&2
            tail -n 20 "$DIR/$name.log" >&2
        done
        printf '\n----- mysql.err (last 20 lines) -----\n' >&2
        tail -n 20 "$DIR/mysql.err" >&2
    fi
    # a test's second set of servers in a directory of its own ($DIR/b, ...)
    for d in "$DIR"/*/; do
        if [[ -f ${d}env ]]; then "$SERVERS" stop "${d%/}" || rc=1; fi
    done
    "$SERVERS" stop "$DIR" || rc=1
    if [[ ${KEEP:-0} == 1 ]]; then
        info "kept $DIR"
    else
        rm -rf "$DIR"
    fi
    exit "$rc"
}

# reported_logs: the names of the daemons whose log holds a sanitizer
# (ASan/UBSan) report or an internal error (a broken invariant of the code,
# e.g. a state change the refill cycle does not allow).
reported_logs() {
    local name
    for name in "${DAEMON_NAMES[@]}"; do
        grep -qE 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|internal error:' \
            "$DIR/$name.log" 2>/dev/null && echo "$name"
    done
    return 0
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
sql_b() { sql_at "$B_MYSQL_PORT" "$1"; }

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
    require_built idpoold "$IDPOOLD"
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
    if reap "$pid" "$timeout"; then
        wait "$pid" 2>/dev/null || st=$?
    else
        info "$name (pid $pid) still running ${timeout}s after SIG$sig; killed it"
        wait "$pid" 2>/dev/null || true
        st=timeout
    fi
    daemon_reaped "$name" "$pid" "$st" "gone after SIG$sig"
}

# daemon_reaped NAME PID STATUS WHAT: daemon NAME (PID, reaped) ended with
# STATUS: recorded in DAEMON_STATUS[NAME] and noted ("NAME (pid PID) WHAT").
daemon_reaped() {
    DAEMON_STATUS[$1]=$3
    unset "DAEMON_PID[$1]"
    info "$1 (pid $2) $4, status $3"
}

# -------------------------------------------------------------- servers ---

rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }

# mariadb_at PORT [ARGS...]: the mariadb client on database idpool of the
# loopback MariaDB at PORT.
mariadb_at() { mariadb --no-defaults -h 127.0.0.1 -P "$1" -u root idpool "${@:2}"; }
# sql_at PORT "STATEMENTS": runs them there; tab-separated, no header,
# values raw (no \\ escaping). sql (environment A) and sql_b (B) are it.
sql_at() { mariadb_at "$1" -N -B -r -e "$2"; }
sql() { sql_at "$MYSQL_PORT" "$1"; }
# sql_file FILE: feeds a file to database idpool.
sql_file() { mariadb_at "$MYSQL_PORT" <"$1"; }

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

# app_params APP: P_TYPE (monotonic|trend), P_START, P_DELTA, P_REM, P_MAX
# (max_pool_size), P_LOW (low-water mark) from the row, defaults applied;
# P_START is at least 1 (no ID is ever 0, whatever start_offset says).
# With MySQL down (a fault test), the row as last read.
declare -A APP_ROW=()
# shellcheck disable=SC2034 # the P_ variables are for the callers
app_params() {
    local t pct mps row
    if row=$(sql "SELECT increasing_type, start_offset, delta, remainder, max_pool_size,
        min_size_percent, max_size_per_second FROM application
        WHERE entity_key = $(sql_value "$1")" 2>&1); then
        APP_ROW[$1]=$row
    else
        [[ -n ${APP_ROW[$1]:-} ]] || fail "app_params: cannot read application $1: $row"
        row=${APP_ROW[$1]}
    fi
    read -r t P_START P_DELTA P_REM P_MAX pct mps <<<"$row"
    [[ -n ${t:-} ]] || fail "app_params: no application $1"
    P_TYPE=monotonic
    ((t == 2)) && P_TYPE=trend
    ((P_START < 1)) && P_START=1
    ((pct == 0)) && pct=80
    ((mps == 0)) && mps=5000
    ((P_MAX == 0)) && P_MAX=$((60 * mps))
    P_LOW=$((P_MAX * pct / 100))
}

# app_col KEY COLUMN: one column of an application row.
app_col() { sql "SELECT \`$2\` FROM application WHERE entity_key = $(sql_value "$1")"; }

# app KEY PYEXPR: PYEXPR of a = the daemon's /v1/apps/KEY (JSON, from $BASE,
# kept in $DIR/app.json); status 1 when there is no answer. app_true KEY
# PYEXPR: PYEXPR holds.
app() {
    curl -sSf "$BASE/v1/apps/$1" -o "$DIR/app.json" 2>/dev/null || return 1
    python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$DIR/app.json" "$2"
}
app_true() { [[ $(app "$1" "$2") == True ]]; }

# leases KEY: the application's leases from MySQL, "lo hi" lines ([lo, hi)),
# as idpool-check --leases reads them.
leases() { sql "SELECT lo, hi FROM application_lease WHERE application_id = $(app_col "$1" id)"; }

# redis_epoch: the epoch the daemons validated on this Redis process and store
# in meta's epoch field: "run_id:master_replid:nonce" (idpool_validated; empty
# before a daemon validated). A restart, a failover, a reload of the library
# or a restore into the process makes a new one.
redis_epoch() { rcli FCALL_RO idpool_validated 0; }

# redis_server_id [PORT]: "run_id:master_replid" of the Redis process at
# PORT (default REDIS_PORT; INFO), the base of the epochs validated there: a
# restart changes run_id, a promotion or demotion master_replid.
redis_server_id() {
    redis-cli -h 127.0.0.1 -p "${1:-$REDIS_PORT}" INFO server replication | tr -d '\r' |
        awk -F: '$1 == "run_id" { r = $2 } $1 == "master_replid" { m = $2 } END { print r ":" m }'
}

# Restart, stop or crash one server; its port and data are kept.
redis_stop() { "$SERVERS" stop "$DIR" redis; }
redis_kill() { "$SERVERS" kill "$DIR" redis; }
redis_start() { "$SERVERS" start "$DIR" redis >/dev/null; }
mysql_stop() { "$SERVERS" stop "$DIR" mysql; }
mysql_kill() { "$SERVERS" kill "$DIR" mysql; }
mysql_start() { "$SERVERS" start "$DIR" mysql >/dev/null; }

# A Sentinel set (SERVERS_SENTINEL=1 setup). sentinel_named PORT: the
# primary's port as the sentinel at PORT names it. sentinel_promoted: every
# sentinel names one of the replicas, and ROLE there says master.
# sentinel_failover [TIMEOUT_S]: SENTINEL FAILOVER through sentinel 1, sent
# again while it answers -INPROG or -NOGOODSLAVE (default 15 s); any other
# answer, or none accepted in time, fails the test.
sentinel_named() { redis-cli -h 127.0.0.1 -p "$1" SENTINEL get-master-addr-by-name "$SENTINEL_MASTER" | tail -n 1; }
sentinel_failover() {
    wait_until "${1:-15}" sentinel_failover_once || fail "SENTINEL FAILOVER was not accepted within ${1:-15} s"
}
sentinel_failover_once() {
    local out
    out=$(redis-cli -h 127.0.0.1 -p "$SENTINEL1_PORT" SENTINEL FAILOVER "$SENTINEL_MASTER" 2>&1)
    [[ $out == OK ]] && return 0
    [[ $out == *INPROG* || $out == *NOGOODSLAVE* ]] || fail "SENTINEL FAILOVER: $out"
    return 1
}
sentinel_promoted() {
    local s p
    for s in "$SENTINEL1_PORT" "$SENTINEL2_PORT" "$SENTINEL3_PORT"; do
        p=$(sentinel_named "$s")
        [[ $p == "$REPLICA1_PORT" || $p == "$REPLICA2_PORT" ]] || return 1
    done
    [[ $(redis-cli -h 127.0.0.1 -p "$p" ROLE | head -n 1) == master ]]
}

# A Redis Cluster (SERVERS_CLUSTER=1 setup): six nodes, node1..node6 on
# NODE1_PORT..NODE6_PORT (node1..node3 the first primaries; roles move with
# failovers). cluster_cli PORT ARGS...: redis-cli on the node at PORT, not
# following redirections (a key elsewhere answers MOVED). cluster_ports:
# the six ports; cluster_any: the first that answers PING; cluster_node
# PORT: the member's name (node1..node6) for scripts/servers.sh.
# cluster_slot KEY: its slot by CLUSTER KEYSLOT of a live node.
# cluster_primary_of_slot SLOT [PORT]: the port of the primary serving SLOT
# as the node at PORT (default: the first live one) sees it; cluster_owner
# KEY: that of KEY's slot. cluster_replicas_of PORT: the ports of the
# replicas of the primary at PORT, as it sees them. cluster_role PORT:
# master or slave (ROLE). For wait_until (a node that does not answer is
# taken for dead and skipped; at least one must answer): cluster_ok (every
# node says cluster_state:ok), cluster_owned_by SLOT PORT [BY] (every node,
# or the one at BY, names PORT the primary of SLOT), cluster_failed PORT
# [BY] (every other node, or the one at BY, flags the one at PORT fail, not
# only fail?) and cluster_follows PORT PRIMARY (the node at PORT is a
# replica of the one at PRIMARY, its link up). They parse in the shell, one
# redis-cli per node asked: wait_until runs them ten times a second, so
# wait on one node's view (BY), then on all.
cluster_cli() { redis-cli -h 127.0.0.1 -p "$1" "${@:2}"; }
cluster_ports() { echo "$NODE1_PORT $NODE2_PORT $NODE3_PORT $NODE4_PORT $NODE5_PORT $NODE6_PORT"; }
cluster_node() {
    local i var
    for i in 1 2 3 4 5 6; do
        var=NODE${i}_PORT
        if [[ ${!var} == "$1" ]]; then
            echo "node$i"
            return 0
        fi
    done
    fail "cluster_node: no node on port $1"
}
cluster_any() {
    local p
    for p in $(cluster_ports); do
        if [[ $(cluster_cli "$p" PING 2>/dev/null) == PONG ]]; then
            echo "$p"
            return 0
        fi
    done
    fail "no cluster node answers"
}
cluster_slot() { cluster_cli "$(cluster_any)" CLUSTER KEYSLOT "$1"; }
# cluster_nodes_owner SLOT <<<NODES: in a CLUSTER NODES text, the port of
# the node that holds SLOT (slots on the move, "[...]", are not held yet).
cluster_nodes_owner() {
    local _id addr _flags _master _ps _pr _epoch _link slots r
    while read -r _id addr _flags _master _ps _pr _epoch _link slots; do
        for r in $slots; do
            [[ $r != \[* ]] || continue
            if (($1 >= ${r%-*} && $1 <= ${r#*-})); then
                addr=${addr#*:}
                echo "${addr%%@*}"
                return 0
            fi
        done
    done
}
cluster_primary_of_slot() {
    local nodes
    nodes=$(cluster_cli "${2:-$(cluster_any)}" CLUSTER NODES) || return 1
    cluster_nodes_owner "$1" <<<"$nodes"
}
cluster_owner() { cluster_primary_of_slot "$(cluster_slot "$1")"; }
cluster_replicas_of() {
    local id nodes _id addr _flags master _rest
    id=$(cluster_cli "$1" CLUSTER MYID)
    nodes=$(cluster_cli "$1" CLUSTER NODES)
    while read -r _id addr _flags master _rest; do
        if [[ $master == "$id" ]]; then
            addr=${addr#*:}
            echo "${addr%%@*}"
        fi
    done <<<"$nodes"
}
cluster_role() {
    local role
    role=$(cluster_cli "$1" ROLE) && echo "${role%%$'\n'*}"
}
cluster_ok() {
    local p n=0 info
    for p in $(cluster_ports); do
        info=$(cluster_cli "$p" CLUSTER INFO 2>/dev/null) || continue
        [[ $info == *cluster_state:ok* ]] || return 1
        n=$((n + 1))
    done
    ((n > 0))
}
cluster_owned_by() {
    local p n=0 nodes
    for p in ${3:-$(cluster_ports)}; do
        nodes=$(cluster_cli "$p" CLUSTER NODES 2>/dev/null) || continue
        [[ $(cluster_nodes_owner "$1" <<<"$nodes") == "$2" ]] || return 1
        n=$((n + 1))
    done
    ((n > 0))
}
cluster_failed() {
    local p n=0 nodes re
    re="(^|"$'\n'")[0-9a-f]+ 127\.0\.0\.1:$1@[0-9]+(,[^ ]*)? ([a-z?]+,)*fail(,[a-z?,]*)? "
    for p in ${2:-$(cluster_ports)}; do
        [[ $p != "$1" ]] || continue
        nodes=$(cluster_cli "$p" CLUSTER NODES 2>/dev/null) || continue
        [[ $nodes =~ $re ]] || return 1
        n=$((n + 1))
    done
    ((n > 0))
}
# cluster_apps PREFIX: one application per primary, named PREFIX1, PREFIX2 ...
# (the first whose keys' slot each primary serves), into the associative
# array APP_OF (primary port -> application; declare -A APP_OF first); at
# least three primaries must get one.
cluster_apps() {
    local i owner
    for i in $(seq 1 60); do
        owner=$(cluster_owner "$(pool_key "$1$i")")
        [[ -n ${APP_OF[$owner]:-} ]] || APP_OF[$owner]=$1$i
        ((${#APP_OF[@]} < 3)) || break
    done
    assert_eq 3 "${#APP_OF[@]}" "primaries with an application"
}
cluster_follows() {
    local info
    info=$(cluster_cli "$1" INFO replication 2>/dev/null) || return 1
    [[ $info == *role:slave* && $info == *master_port:$2$'\r'* && $info == *master_link_status:up* ]]
}

# A slot moved by hand, as redis-cli --cluster reshard moves it.
# cluster_migrate_keys SLOT SRC DST: SLOT of the primary at SRC goes to
# the one at DST: IMPORTING on DST, MIGRATING on SRC, then every key of the
# slot (up to 100) MIGRATEd to DST in one command; the keys moved, one a
# line, in $DIR/migrated. The slot is still SRC's: SRC answers ASK for the
# keys it no longer has, DST serves them after ASKING. cluster_slot_give
# SLOT SRC DST: SETSLOT SLOT NODE DST on DST, then SRC, then every other
# live primary (a replica refuses SETSLOT; it learns from its primary).
# Any answer but OK fails the test.
cluster_migrate_keys() {
    local slot_keys
    assert_eq OK "$(cluster_cli "$3" CLUSTER SETSLOT "$1" IMPORTING "$(cluster_cli "$2" CLUSTER MYID)")" \
        "SETSLOT $1 IMPORTING on $3"
    assert_eq OK "$(cluster_cli "$2" CLUSTER SETSLOT "$1" MIGRATING "$(cluster_cli "$3" CLUSTER MYID)")" \
        "SETSLOT $1 MIGRATING on $2"
    cluster_cli "$2" CLUSTER GETKEYSINSLOT "$1" 100 >"$DIR/migrated"
    mapfile -t slot_keys <"$DIR/migrated"
    ((${#slot_keys[@]} > 0)) || fail "slot $1 holds no key on $2"
    assert_eq OK "$(cluster_cli "$2" MIGRATE 127.0.0.1 "$3" "" 0 5000 KEYS "${slot_keys[@]}")" "MIGRATE of ${slot_keys[*]}"
}
cluster_slot_give() {
    local p id others=()
    id=$(cluster_cli "$3" CLUSTER MYID)
    for p in $(cluster_ports); do
        if [[ $p != "$2" && $p != "$3" && $(cluster_role "$p" 2>/dev/null) == master ]]; then
            others+=("$p")
        fi
    done
    for p in "$3" "$2" "${others[@]}"; do
        assert_eq OK "$(cluster_cli "$p" CLUSTER SETSLOT "$1" NODE "$id")" "SETSLOT $1 NODE on $p"
    done
}

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

# --------------------------------------------------------- fault tests ---
# The fault tests (t_kill9, t_flushall, t_fence, t_redis_restart,
# t_mysql_outage ...) and the chaos suite: consumer_start/consumer_stop run a
# background client that keeps popping one pool into numbered chunk files,
# so one consumer's IDs can be checked in the order it received them
# (check_increasing) across faults; check_ids checks U, A and L over any set
# of dumps against application_lease.

declare -A CONSUMER_PID=() # name -> pid of a running consumer

# consumer_start NAME KEY [IDS_PER_CHUNK [SLEEP_S]]: pops KEY's pool in the
# background (idpool-load, LPOP batches of 100, at most 400 ms a chunk) into
# the pop logs $DIR/NAME.c/NNNNNN.0.bin, each also as text in NNNNNN.txt
# (idpool-check --dump), until consumer_stop. SLEEP_S between chunks slows
# it down (0: as fast as it can).
# Errors (Redis down, timeouts) only make it retry after a short pause. A
# stopped consumer can be started again: its chunks continue the sequence.
# Bounded: it gives up by itself after CONSUMER_MAX_S (120) seconds.
consumer_start() {
    local name=$1 key=$2 chunk=${3:-1000} pause=${4:-0}
    [[ -z ${CONSUMER_PID[$name]:-} ]] || fail "consumer $name is already running"
    mkdir -p "$DIR/$name.c"
    rm -f "$DIR/$name.stop"
    (
        set +e
        i=$(find "$DIR/$name.c" -name '*.txt' | wc -l)
        end=$(($(now_us) + ${CONSUMER_MAX_S:-120} * 1000000))
        while [[ ! -e $DIR/$name.stop ]] && (($(now_us) < end)); do
            printf -v f '%s/%s.c/%06d' "$DIR" "$name" "$i"
            "$IDPOOL_LOAD" --port "$REDIS_PORT" --mode lpop --key "$(pool_key "$key")" \
                --count "$chunk" --batch 100 --duration 0.4 --timeout-ms 400 \
                --record "$f" >/dev/null 2>>"$DIR/$name.err"
            "$IDPOOL_CHECK" --allow-empty --dump "$f.txt" "$f.0.bin" >/dev/null 2>>"$DIR/$name.err"
            i=$((i + 1))
            if [[ ! -s $f.txt ]]; then
                sleep 0.05 # empty pool or Redis down: do not spin
            elif [[ $pause != 0 ]]; then
                sleep "$pause"
            fi
        done
    ) &
    CONSUMER_PID[$name]=$!
    info "consumer $name started on $key (pid $!)"
}

# consumer_stop NAME: stops the consumer (bounded wait) and writes every ID
# it popped so far, in order, to $DIR/NAME.txt.
consumer_stop() {
    local name=$1 pid
    pid=${CONSUMER_PID[$name]:?no consumer $name}
    touch "$DIR/$name.stop"
    reap "$pid" 5 || info "consumer $name (pid $pid) did not stop; killed it"
    wait "$pid" 2>/dev/null || true
    unset "CONSUMER_PID[$name]"
    consumer_collect "$name"
    info "consumer $name stopped: $(count_ids "$DIR/$name.txt") IDs so far"
}

# consumer_collect NAME: $DIR/NAME.txt = all chunks so far, in order.
consumer_collect() {
    local name=$1
    find "$DIR/$name.c" -name '*.txt' -print0 | sort -z |
        xargs -0 -r cat -- >"$DIR/$name.txt"
}

# consumer_chunks NAME: how many chunk files it has written (a phase mark;
# meaningful while it is stopped).
consumer_chunks() { find "$DIR/$1.c" -name '*.txt' | wc -l | tr -d ' '; }

# consumer_since NAME MARK OUT: the IDs of chunks MARK.. (a phase) to OUT.
consumer_since() {
    local name=$1 mark=$2 out=$3
    find "$DIR/$name.c" -name '*.txt' -print0 | sort -z |
        tail -z -n +"$((mark + 1))" | xargs -0 -r cat -- >"$out"
}

# consumer_count NAME: IDs popped so far (approximate while it runs).
consumer_count() { find "$DIR/$1.c" -name '*.txt' -print0 | xargs -0 -r cat -- | wc -l | tr -d ' '; }

# consumer_ge NAME N: it has popped at least N IDs (for wait_until).
consumer_ge() { (($(consumer_count "$1") >= $2)); }

# pool_dump KEY FILE: the pool's current content, head first.
pool_dump() { rcli LRANGE "$(pool_key "$1")" 0 -1 >"$2"; }

# low_water KEY: the application's low-water mark (app_params' P_LOW).
low_water() {
    app_params "$1"
    echo "$P_LOW"
}

# max_id FILE... / min_id FILE...: largest / smallest ID (empty if none).
max_id() { cat -- "$@" | sort -n | tail -n 1; }
min_id() { cat -- "$@" | sort -n | sed -n 1p; }

# check_increasing FILE [WHAT]: one consumer's IDs are strictly increasing.
check_increasing() {
    local err
    err=$(LC_ALL=C sort -n -u -c -- "$1" 2>&1) ||
        fail "${2:-$1}: not strictly increasing: $err"
}

# check_above LOW_FILES... -- HIGH_FILES...: every ID of the second group is
# above every ID of the first (monotonic across a fault).
check_above() {
    local lo=() hi=() seen=0 a b f
    for f in "$@"; do
        if [[ $f == -- ]]; then
            seen=1
        elif ((seen)); then
            hi+=("$f")
        else
            lo+=("$f")
        fi
    done
    a=$(max_id "${lo[@]}")
    b=$(min_id "${hi[@]}")
    [[ -n $a && -n $b ]] || fail "check_above: an empty group (${lo[*]} -- ${hi[*]})"
    ((b > a)) || fail "IDs went backwards: $b (in ${hi[*]}) is not above $a (in ${lo[*]})"
}

# lease_dump KEY OUT [WHERE]: "lo hi instance" of KEY's leases, by lo.
lease_dump() {
    sql "SELECT l.lo, l.hi, l.instance FROM application_lease l
         JOIN application a ON a.id = l.application_id
         WHERE a.entity_key = $(sql_value "$1") ${3:+AND ($3)} ORDER BY l.lo" >"$2"
}

# check_ids KEY FILE...: idpool-check over all the text dumps together:
#   U  no ID occurs twice;
#   A  max(start_offset, 1) <= ID < 2^63 (never 0) and ID % delta == remainder;
#   L  every ID lies in exactly one range of KEY's application_lease (the
#      ranges must not overlap, and none may be empty).
check_ids() {
    local key=$1 f lists=() empty start
    shift
    lease_dump "$key" "$DIR/leases.$key.txt"
    empty=$(awk -F'\t' '$2 <= $1 { print "[" $1 "," $2 ")" }' "$DIR/leases.$key.txt" | head -n 3)
    [[ -z $empty ]] || fail "$key: L: empty leases $empty"
    for f in "$@"; do lists+=(--list "$f"); done
    start=$(app_col "$key" start_offset)
    check_pops "$DIR/check_ids.$key" --start-offset "$((start > 1 ? start : 1))" \
        --delta "$(app_col "$key" delta)" --remainder "$(app_col "$key" remainder)" \
        --leases "$DIR/leases.$key.txt" "${lists[@]}" || fail "$key: U/A/L"
    info "$key: U/A/L $(tail -n 1 "$DIR/check_ids.$key")"
    check_leases_upward "$key"
}

# check_leases_upward KEY: in the order they were recorded, every lease
# starts at or above the end of every earlier one (reservations only move
# up: a lost compare-and-set retries from a fresh read).
check_leases_upward() {
    local bad
    bad=$(sql "SELECT l.id, l.lo, l.hi FROM application_lease l
               JOIN application a ON a.id = l.application_id
               WHERE a.entity_key = $(sql_value "$1") ORDER BY l.id" |
        python3 -c 'import sys
top = None
for line in sys.stdin:
    i, lo, hi = map(int, line.split())
    if top is not None and lo < top:
        print(f"lease #{i} [{lo},{hi}) starts below {top}, the end of an earlier one")
        break
    top = hi if top is None else max(top, hi)')
    [[ -z $bad ]] || fail "$1: $bad"
}

# ids_in_leases FILE LEASES_FILE: prints the IDs of FILE that lie in one of
# the "lo hi ..." ranges (e.g. a lease_dump restricted to one instance).
ids_in_leases() {
    python3 - "$1" "$2" <<'EOF'
import sys
with open(sys.argv[2]) as f:
    leases = sorted((int(l.split()[0]), int(l.split()[1])) for l in f if l.strip())
with open(sys.argv[1]) as f:
    ids = sorted(int(x) for x in f.read().split())
j = 0
for x in ids:
    while j < len(leases) and leases[j][1] <= x:
        j += 1
    if j < len(leases) and leases[j][0] <= x:
        print(x)
EOF
}

# log_count NAME ERE: how many lines of the daemon's log match.
log_count() { grep -cE -- "$2" "$DIR/$1.log" 2>/dev/null || true; }

# assert_alive NAME...: the daemons are still running.
assert_alive() {
    local n
    for n in "$@"; do
        daemon_alive "$n" || fail "daemon $n died (log: $(tail -n 3 "$DIR/$n.log" | tr '\n' '|'))"
    done
}

# redis_server_pid: pid of the running redis-server.
redis_server_pid() { tr -dc 0-9 <"$DIR/redis.pid"; }

# probe SRC APP TIMEOUT_S WHAT: loads a copy of the Redis dir SRC in a
# throwaway redis-server (WHAT names it if it does not load within
# TIMEOUT_S); APP's pool to $DIR/probe.pool, meta's epoch and next to
# PROBE_EPOCH and PROBE_NEXT.
probe() {
    local port pid app=$2
    rm -rf "$DIR/probe"
    cp -a "$1" "$DIR/probe"
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$DIR/probe" --save '' \
        --appendonly yes --daemonize no --logfile "$DIR/probe.log" </dev/null &
    pid=$!
    wait_until "$3" eval "[[ \$(redis-cli -p $port PING 2>/dev/null) == PONG ]]" ||
        fail "$4 does not load: $(tail -n 5 "$DIR/probe.log")"
    redis-cli -p "$port" LRANGE "$(pool_key "$app")" 0 -1 >"$DIR/probe.pool"
    # shellcheck disable=SC2034 # read by the callers
    PROBE_EPOCH=$(redis-cli -p "$port" HGET "$(meta_key "$app")" epoch)
    # shellcheck disable=SC2034 # read by the callers
    PROBE_NEXT=$(redis-cli -p "$port" HGET "$(meta_key "$app")" next)
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    reap "$pid" 5 || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$DIR/probe"
}

# --------------------------------------------------------------- ID API ---
# tls_cert: a self-signed certificate for 127.0.0.1, $DIR/tls.crt, and its
# key, $DIR/tls.key (the issuer's TLS tests).
tls_cert() {
    openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
        -days 1 -keyout "$DIR/tls.key" -out "$DIR/tls.crt" >"$DIR/openssl.out" 2>&1 ||
        fail "openssl req: $(cat "$DIR/openssl.out")"
}
# The ID API tests (t_api, t_apiedge): tokens, and requests with curl.

# ctl ARGS...: idpoolctl against the test's servers.
ctl() { "$IDPOOLCTL" --mysql "$IDPOOL_MYSQL_URL" --redis "$IDPOOL_REDIS_URL" "$@"; }
# new_token NAME APPS: tokens add, prints the token.
new_token() {
    ctl --json tokens add "$1" --apps "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])'
}
# req [curl options] URL-PATH: against $BASE; body in $DIR/body, headers in
# $DIR/headers, status in $CODE.
BASE=''
redact() { sed -E 's/idp_[A-Za-z0-9_-]+/idp_.../g' <<<"$1"; } # no token in the test's output
req() {
    local path=${*: -1} st=0
    CODE=$(curl -sS --max-time 10 -o "$DIR/body" -D "$DIR/headers" -w '%{http_code}' \
        "${@:1:$#-1}" "$BASE$path") || st=$?
    ((st == 0)) || fail "curl $(redact "${*:1:$#-1}") $BASE$path: no answer (curl status $st)"
}
# as TOKEN [curl options] PATH: req with Authorization: Bearer TOKEN.
as() {
    local tok=$1
    shift
    req -H "Authorization: Bearer $tok" "$@"
}
# answers STATUS TOKEN [curl options] PATH: as TOKEN, answered STATUS (for wait_until).
answers() {
    local st=$1
    shift
    as "$@"
    [[ $CODE == "$st" ]]
}
# refused ERROR TOKEN [curl options] PATH: as TOKEN, answered with error ERROR.
refused() {
    local err=$1
    shift
    as "$@"
    grep -qF "\"error\":\"$err\"" "$DIR/body"
}
header() { tr -d '\r' <"$DIR/headers" | sed -n "s/^$1: //Ip" | tail -n 1; }
what() { printf '%s: %s %s' "$CODE" "$(tr -d '\r' <"$DIR/headers" | tr '\n' '|' | head -c 600)" "$(head -c 600 "$DIR/body")"; }

# is_error STATUS ERROR [retry]: the last answer is STATUS with the JSON body
# {"error": ERROR, "message": "..."} (nothing else), Content-Type JSON, and
# Retry-After (whole seconds >= 1) exactly when "retry" is given.
is_error() {
    local st=$1 err=$2 retry=${3:-} ra
    [[ $CODE == "$st" ]] || fail "expected $st $err, got $(what)"
    [[ $(header Content-Type) == application/json* ]] || fail "$st $err: Content-Type '$(header Content-Type)'"
    python3 - "$DIR/body" "$err" <<'EOF' || fail "$st $err: body $(head -c 600 "$DIR/body")"
import json, sys
from harness import check
d = json.load(open(sys.argv[1]))
check(isinstance(d, dict) and set(d) == {"error", "message"}, d)
check(d["error"] == sys.argv[2], d)
check(isinstance(d["message"], str) and d["message"], d)
EOF
    ra=$(header Retry-After)
    if [[ -n $retry ]]; then
        [[ $ra =~ ^[1-9][0-9]*$ ]] || fail "$st $err: Retry-After '$ra', expected whole seconds >= 1"
    else
        [[ -z $ra ]] || fail "$st $err: unexpected Retry-After '$ra'"
    fi
}
# ids_ok N APP [exact]: the last answer is 200 JSON {"app": APP, "ids": [...]}
# with N IDs as decimal strings (exactly N, or 1..N with "upto"), kept in
# $DIR/ids.APP; prints how many.
ids_ok() {
    local n=$1 app=$2 mode=${3:-exact}
    [[ $CODE == 200 ]] || fail "expected 200 with $n IDs of $app, got $(what)"
    [[ $(header Content-Type) == application/json* ]] || fail "200: Content-Type '$(header Content-Type)'"
    python3 - "$DIR/body" "$n" "$app" "$mode" "$DIR/ids.$app" <<'EOF' || fail "200 $app: body $(head -c 600 "$DIR/body")"
import json, re, sys
from harness import check
d = json.load(open(sys.argv[1]))
n, app, mode = int(sys.argv[2]), sys.argv[3], sys.argv[4]
check(isinstance(d, dict) and set(d) == {"app", "ids"} and d["app"] == app, d)
ids = d["ids"]
check(isinstance(ids, list) and all(isinstance(i, str) and re.match(r"^(0|[1-9][0-9]*)$", i) for i in ids), ids)
check(len(ids) == n if mode == "exact" else 1 <= len(ids) <= n, "%d IDs, asked %d" % (len(ids), n))
check(all(int(i) < 2**63 for i in ids), ids)
with open(sys.argv[5], "a") as f:
    f.write("".join(i + "\n" for i in ids))
print(len(ids))
EOF
}

# ------------------------------------------------------------ idpoolctl ---
# The idpoolctl tests (t_ctl, t_tokens, t_creds): one run's output in files,
# then checks of its exit status, stderr and stdout.

# ctl_run ARGS...: runs idpoolctl; stdout in $DIR/out, stderr in $DIR/err and
# $ERR, exit status in $RC.
ctl_run() {
    RC=0
    "$IDPOOLCTL" "$@" >"$DIR/out" 2>"$DIR/err" || RC=$?
    ERR=$(<"$DIR/err")
}
# ctl_expect CODE ARGS...: runs idpoolctl, which must exit with CODE.
ctl_expect() {
    local code=$1
    shift
    ctl_run "$@"
    [[ $RC == "$code" ]] || fail "idpoolctl $*: exit status $RC, expected $code; stderr: $ERR; stdout: $(head -c 2000 "$DIR/out")"
}
# ctl_helps "CMD [SUB]"...: `idpoolctl CMD [SUB] --help` and `idpoolctl help
# CMD [SUB]` both exit 0 with the command's usage line.
ctl_helps() {
    local cmd
    for cmd in "$@"; do
        # shellcheck disable=SC2086 # word splitting wanted
        ctl_expect 0 $cmd --help
        out_has "^Usage: idpoolctl \\[global options\\] $cmd"
        # shellcheck disable=SC2086
        ctl_expect 0 help $cmd
        out_has "^Usage: idpoolctl \\[global options\\] $cmd"
    done
}
# err_has ERE / err_lacks ERE / out_has ERE / out_lacks ERE: the last run's
# stderr / stdout matches (does not match).
err_has() { grep -qE -- "$1" "$DIR/err" || fail "stderr does not match '$1': $ERR"; }
err_lacks() { ! grep -qE -- "$1" "$DIR/err" || fail "stderr matches '$1': $ERR"; }
out_has() { grep -qE -- "$1" "$DIR/out" || fail "stdout does not match '$1': $(head -c 3000 "$DIR/out")"; }
out_lacks() { ! grep -qE -- "$1" "$DIR/out" || fail "stdout matches '$1'"; }
# jget PYEXPR: evaluates a Python expression on the JSON document d on stdout.
jget() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))' "$DIR/out" "$1"
}
