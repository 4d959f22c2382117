#!/usr/bin/env bash
# Chaos 07 redis_rollback: Redis comes back with an OLDER data set, whose
# pools still hold IDs that consumers already popped (design brief §9,
# README "Guarantees / Not guaranteed").
#
# Two daemons, one monotonic application per round (rb1, rb2, ...), popped
# all along by two kinds of recorded consumers: two with LPOP and two with
# idpool_take. Both retry at once (every millisecond) and catch up on the
# requests they missed, so they pop the moment the restored Redis accepts
# connections. Each round, while the consumers pop:
#   odd rounds  (rdb): BGSAVE, keep the snapshot, let the consumers pop on,
#               kill -9 Redis and restart it from the snapshot (put in place
#               as the base of its AOF, so servers.sh's AOF settings stay);
#   even rounds (aof): copy Redis' AOF directory (the "disk"), let the
#               consumers pop on, kill -9 Redis and restart it from the copy:
#               the AOF lost its tail, as after a machine crash with
#               appendfsync everysec.
# The restored pool holds IDs already handed out. The daemons must detect the
# new Redis (run_id) and discard pool and meta (idpool_epoch) before
# refilling from a fresh lease. Between Redis accepting connections again and
# that discard, LPOP consumers can get those IDs again: the documented
# exposure window. idpool_take consumers cannot: the library refuses a pool
# until the daemon has re-validated it in this Redis process (IDPOOL_EPOCH),
# so their exposure must be 0. A watcher measures the window: it connects every millisecond until the new
# Redis answers (t_accept), then polls meta's run_id until it is gone or
# changed (t_discard). Then:
#   * duplicates whose later pop was sent in [t_restart, t_discard] are
#     reported as exposed= (idpool-check --exposure), split by client kind:
#     exposed_lpop= is measured, exposed_take= must be 0; any other
#     duplicate is a violation; the row shows window_ms = t_discard -
#     t_accept (the worst round);
#   * M: the stale IDs of the window are lower than IDs seen before it
#     (README: "lower than ones they saw before"), so order is checked over
#     the logs without the records sent inside the window (how many were
#     left out is logged); U, A and L are checked over everything;
#   * the window closes by itself, within the daemon's reconnect backoff;
#   * R: the pool is back above low water after the restart.
# Evidence that the fault landed: the restored pool held IDs already popped
# (stale=N > 0, counted from a throwaway Redis loaded with the same files)
# and a daemon logged "redis restart or failover detected".
# One application per round because idpool-check takes one exposure window.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

ROUNDS=$((CHAOS_ROUNDS < 2 ? 2 : CHAOS_ROUNDS))
PER_ROUND=$((CHAOS_IDS / ROUNDS))
WINDOW_LIMIT_MS=${CHAOS_WINDOW_LIMIT_MS:-7000}
PY=$DIR/rollback.py
cat >"$PY" <<'EOF'
"""Helpers of chaos 07 (Python 3, no modules beyond the standard library).

watch PORT META OLD_RUN_ID DEAD_RUN_ID OUT TIMEOUT_S
    connects to 127.0.0.1:PORT every ms until a Redis other than DEAD_RUN_ID
    answers (t_accept), then polls HGET META run_id until it is no longer
    OLD_RUN_ID (t_discard). Writes "state t_accept_ns t_discard_ns polls".
filter FROM_NS TO_NS IN OUT
    copies a pop log without the records sent inside [FROM, TO]; prints how
    many records it left out.
stale POOL_FILE BEFORE_NS LOG...
    how many IDs of POOL_FILE (one per line) were popped by a request sent
    before BEFORE_NS.
"""
import os
import socket
import struct
import sys
import time


def resp(*args):
    out = b'*%d\r\n' % len(args)
    for a in args:
        a = a.encode()
        out += b'$%d\r\n%s\r\n' % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError('closed')
    kind, rest = line[:1], line[1:-2]
    if kind == b'$':
        n = int(rest)
        if n < 0:
            return None
        return f.read(n + 2)[:-2].decode()
    if kind == b'-':
        raise RuntimeError(rest.decode())
    return rest.decode()


def watch(port, meta, old, dead, out, timeout):
    deadline = time.monotonic() + float(timeout)
    state, t_accept, t_end, polls = 'timeout', 0, 0, 0
    while time.monotonic() < deadline and state == 'timeout':
        try:
            s = socket.create_connection(('127.0.0.1', int(port)), timeout=1)
        except OSError:
            time.sleep(0.001)
            continue
        t_conn = time.monotonic_ns()
        f = s.makefile('rb')
        try:
            s.sendall(resp('INFO', 'server'))
            info = read_reply(f)
            if 'run_id:' + dead in info:  # the old process, not dead yet
                s.close()
                time.sleep(0.001)
                continue
            while time.monotonic() < deadline:
                s.sendall(resp('HGET', meta, 'run_id'))
                try:
                    v = read_reply(f)
                except RuntimeError:  # -LOADING
                    time.sleep(0.001)
                    continue
                t = time.monotonic_ns()
                if not t_accept:
                    t_accept = t_conn
                polls += 1
                if v != old:
                    state, t_end = ('discarded' if v is None else 'replaced'), t
                    break
                time.sleep(0.001)
        except (OSError, ConnectionError, RuntimeError):
            time.sleep(0.001)
        finally:
            s.close()
    if state == 'timeout':
        t_end = time.monotonic_ns()
    with open(out + '.tmp', 'w') as o:
        o.write('%s %d %d %d\n' % (state, t_accept, t_end, polls))
    os.rename(out + '.tmp', out)


def records(path):
    with open(path, 'rb') as f:
        data = f.read()
    yield data[:32]
    off = 32
    while off + 24 <= len(data):
        t_send, t_recv, count, flags = struct.unpack_from('<QQII', data, off)
        end = off + 24 + 8 * count
        if end > len(data):
            break
        yield (t_send, data[off:end], data[off + 24:end], count)
        off = end


def filter_log(lo, hi, src, dst):
    lo, hi, left_out = int(lo), int(hi), 0
    it = records(src)
    with open(dst, 'wb') as o:
        o.write(next(it))
        for t_send, raw, _, _ in it:
            if lo <= t_send <= hi:
                left_out += 1
            else:
                o.write(raw)
    print(left_out)


def stale(pool_file, before, *logs):
    with open(pool_file) as f:
        pool = {int(x) for x in f.read().split()}
    seen, before = set(), int(before)
    for path in logs:
        it = records(path)
        next(it)
        for t_send, _, ids, count in it:
            if t_send < before and count:
                seen.update(struct.unpack('<%dQ' % count, ids))
    print(len(pool & seen))


if __name__ == '__main__':
    {'watch': watch, 'filter': filter_log, 'stale': stale}[sys.argv[1]](*sys.argv[2:])
EOF

run_id() { rcli INFO server | sed -n 's/^run_id:\([0-9a-f]*\).*/\1/p'; }
persistence() { rcli INFO persistence | sed -n "s/^$1:\([^[:space:]]*\).*/\1/p"; }
epochs() { # restart detections for $APP logged by both daemons
    echo $(($(log_count a "app=$APP redis restart or failover detected") +
        $(log_count b "app=$APP redis restart or failover detected")))
}

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
    mkdir -p "$out/appendonlydir"
    mv "$DIR/redis/dump.rdb" "$out/appendonlydir/appendonly.aof.1.base.rdb"
    printf 'file appendonly.aof.1.base.rdb seq 1 type b\n' \
        >"$out/appendonlydir/appendonly.aof.manifest"
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

# probe SRC: loads a copy of the Redis dir SRC in a throwaway redis-server;
# the current round's pool to $DIR/probe.pool, meta's run_id and next to
# PROBE_RUN_ID and PROBE_NEXT.
probe() {
    local port pid
    rm -rf "$DIR/probe"
    cp -a "$1" "$DIR/probe"
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$DIR/probe" --save '' \
        --appendonly yes --daemonize no --logfile "$DIR/probe.log" </dev/null &
    pid=$!
    wait_until 10 eval "[[ \$(redis-cli -p $port PING 2>/dev/null) == PONG ]]" ||
        fail "the old data set does not load: $(tail -n 5 "$DIR/probe.log")"
    redis-cli -p "$port" LRANGE "$(pool_key "$APP")" 0 -1 >"$DIR/probe.pool"
    PROBE_RUN_ID=$(redis-cli -p "$port" HGET "$(meta_key "$APP")" run_id)
    PROBE_NEXT=$(redis-cli -p "$port" HGET "$(meta_key "$APP")" next)
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait_until 5 eval "! proc_alive $pid" || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    rm -rf "$DIR/probe"
}

# check_rollback APP FROM TO: U, A, L over all logs with the exposure window
# [FROM, TO] (as check_app does, but --type trend: the order is judged next);
# M over the logs without the records sent inside the window.
check_rollback() {
    local app=$1 from=$2 to=$3 f n left=0 line st=0 kv logs=() mlogs=()
    app_params "$app"
    sql "SELECT l.lo, l.hi FROM application_lease l JOIN application a
         ON a.id = l.application_id WHERE a.entity_key = $(sql_value "$app")
         ORDER BY l.lo" | tr '\t' ' ' >"$DIR/$app.leases"
    mkdir -p "$DIR/m.$app"
    for f in "$DIR/$app".c*.bin; do
        [[ -e $f ]] || continue
        logs+=("$f")
        n=$(python3 "$PY" filter "$from" "$to" "$f" "$DIR/m.$app/${f##*/}") ||
            fail "filtering $f failed"
        left=$((left + n))
        mlogs+=("$DIR/m.$app/${f##*/}")
    done
    ((${#logs[@]})) || fail "$app: no consumer logs"
    local common=(--start-offset "$P_START" --delta "$P_DELTA" --remainder "$P_REM"
        --leases "$DIR/$app.leases")
    # U A L, exposure
    "$IDPOOL_CHECK" --type trend "${common[@]}" --exposure "$from:$to" "${logs[@]}" \
        >"$DIR/$app.check" 2>&1 || st=$?
    line=$(grep '^check: ' "$DIR/$app.check" | tail -n 1)
    info "$app: U A L: $line (status $st)"
    for kv in ${line#check: }; do
        case ${kv%%=*} in
        ids | duplicates | arith | unleased | lease_overlaps | gaps | empty_pops | exposed | exposed_lpop | exposed_take)
            CHECK_SUM[${kv%%=*}]=$((${CHECK_SUM[${kv%%=*}]:-0} + ${kv#*=}))
            ;;
        esac
    done
    case $st in
    0) ;;
    1) failure "$app: idpool-check found violations: $line" ;;
    *) failure "$app: idpool-check failed (status $st): $(tail -n 3 "$DIR/$app.check" | tr '\n' ' ')" ;;
    esac
    [[ -n $line ]] || failure "$app: idpool-check printed no summary"
    # M, outside the window
    st=0
    info "$app: M checked without the $left records sent inside the window"
    "$IDPOOL_CHECK" --type monotonic "${common[@]}" "${mlogs[@]}" >"$DIR/$app.mcheck" 2>&1 ||
        st=$?
    line=$(grep '^check: ' "$DIR/$app.mcheck" | tail -n 1)
    info "$app: M outside the window: $line (status $st)"
    for kv in ${line#check: }; do
        case ${kv%%=*} in
        order | cross_order)
            CHECK_SUM[${kv%%=*}]=$((${CHECK_SUM[${kv%%=*}]:-0} + ${kv#*=}))
            ((${kv#*=} == 0)) || failure "$app: M violated outside the exposure window: $line"
            ;;
        esac
    done
    ((st <= 1)) || failure "$app: idpool-check (M) failed, status $st: $(tail -n 2 "$DIR/$app.mcheck")"
    [[ -n $line ]] || failure "$app: idpool-check (M) printed no summary"
}

# Automatic AOF rewrites would swap the files under save_aof.
rcli CONFIG SET auto-aof-rewrite-percentage 0 >/dev/null
for ((r = 1; r <= ROUNDS; r++)); do
    add_app "rb$r" step=1000 max_pool_size=30000 min_size_percent=50 increment_max=3 \
        max_size_per_second=1000000
done
chaos_daemon a
chaos_daemon b
for ((r = 1; r <= ROUNDS; r++)); do
    app_params "rb$r"
    wait_until 20 pool_ge "rb$r" "$P_LOW" || fail "rb$r never filled"
done

WINDOW_MAX=0 STALE_SUM=0 WINDOWS=() ROUND_WINDOW=()
for ((r = 1; r <= ROUNDS; r++)); do
    APP=rb$r
    kind=rdb
    ((r % 2)) || kind=aof
    info "round $r ($kind) on $APP"
    app_params "$APP"
    consumers_start "$APP" 2 --backoff-ms 1:2
    consumers_start "$APP" 2 --mode take --backoff-ms 1:2
    popped_wait "$APP" $((PER_ROUND / 4)) "$APP: consumers starved"
    [[ $kind == aof ]] && {
        rcli BGREWRITEAOF >/dev/null
        wait_until 20 eval '[[ $(persistence aof_rewrite_in_progress) == 0 &&
            $(persistence aof_rewrite_scheduled) == 0 ]]' || fail "AOF rewrite did not finish"
    }
    n0=$(popped "$APP")
    dead=$(run_id)
    rm -rf "$DIR/old"
    if [[ $kind == rdb ]]; then save_rdb "$DIR/old"; else save_aof "$DIR/old"; fi
    probe "$DIR/old"
    info "$APP: the old data set: meta next $PROBE_NEXT, epoch $PROBE_RUN_ID," \
        "pool of $(grep -c . "$DIR/probe.pool") IDs"
    # Let the consumers pop what the old data set still holds.
    wait_until 20 popped_ge "$APP" $((n0 + P_MAX / 3)) || failure "$APP: consumers starved"
    e0=$(epochs)
    redis_kill
    rm -f "$DIR/watch"
    python3 "$PY" watch "$REDIS_PORT" "$(meta_key "$APP")" "$PROBE_RUN_ID" "$dead" \
        "$DIR/watch" 20 &
    watcher=$!
    rm -rf "$DIR/redis"
    mv "$DIR/old" "$DIR/redis"
    t_from=$(now_ns)
    redis_start
    wait_until 25 test -s "$DIR/watch" || failure "$APP: the window watcher did not report"
    wait "$watcher" 2>/dev/null || true
    read -r state t_accept t_to polls <"$DIR/watch" || state=missing
    expect "[[ $state == discarded || $state == replaced ]]" \
        "$APP: the restored pool was not discarded within 20 s (watcher: $state)"
    ((t_accept > 0)) || t_accept=$t_from
    window=$(((t_to - t_accept) / 1000000))
    # README: the window is the daemon's reconnect backoff (<= 5 s) plus a round trip.
    expect "((window <= WINDOW_LIMIT_MS))" \
        "$APP: exposure window $window ms, above the documented bound ($WINDOW_LIMIT_MS ms)"
    info "$APP: window $window ms: Redis accepted $(((t_accept - t_from) / 1000000)) ms after" \
        "the restart, restored meta $state after $polls polls"
    ((window > WINDOW_MAX)) && WINDOW_MAX=$window
    WINDOWS+=("$window")
    recovered "$APP" "$t_accept"
    wait_until 10 eval '((e0 < $(epochs)))' || true
    consumers_wait "$APP" "$((PER_ROUND > n0 + P_MAX ? PER_ROUND : n0 + P_MAX))"
    consumers_stop "$APP"
    stale=$(python3 "$PY" stale "$DIR/probe.pool" "$t_from" "$DIR/$APP".c*.bin)
    STALE_SUM=$((STALE_SUM + stale))
    fault_landed "$kind:stale=$stale,epochs=$(($(epochs) - e0))" \
        "((stale > 0 && $(epochs) > e0)) && [[ -n '$PROBE_RUN_ID' && '$PROBE_RUN_ID' != \$(run_id)* ]]"
    ROUND_WINDOW[$r]="$t_from:$t_to"
done

daemons_stop
for ((r = 1; r <= ROUNDS; r++)); do
    drain "rb$r"
    check_rollback "rb$r" "${ROUND_WINDOW[$r]%%:*}" "${ROUND_WINDOW[$r]#*:}"
done
row window_ms="$WINDOW_MAX" windows_ms="$(
    IFS=/
    echo "${WINDOWS[*]}"
)" stale="$STALE_SUM"
