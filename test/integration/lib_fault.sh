# shellcheck shell=bash
# Helpers shared by the fault tests (t_kill9, t_flushall, t_fence,
# t_redis_restart, t_mysql_outage). Source it after lib.sh:
#
#   source "$(dirname "$0")/lib.sh"
#   source "$(dirname "$0")/lib_fault.sh"
#
# consumer_start/consumer_stop run a background client that keeps popping
# one pool into numbered chunk files, so one consumer's IDs can be checked
# in the order it received them (check_increasing) across faults; check_ids
# checks U, A and L over any set of dumps against application_lease.

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
    if ! wait_until 5 eval "! proc_alive $pid" 2>/dev/null; then
        info "consumer $name (pid $pid) did not stop; killing it"
        kill -KILL "$pid" 2>/dev/null || true
    fi
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

# low_water KEY: the application's low-water mark (explicit columns only).
low_water() {
    local pool pct
    pool=$(app_col "$1" max_pool_size)
    pct=$(app_col "$1" min_size_percent)
    ((pct == 0)) && pct=80
    echo $((pool * pct / 100))
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
    wait_until 5 eval "! proc_alive $pid" || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    rm -rf "$DIR/probe"
}
