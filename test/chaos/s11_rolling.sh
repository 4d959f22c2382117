#!/usr/bin/env bash
# Chaos 11 rolling: rolling restarts under load (design brief §5 Signals:
# "SIGTERM/SIGINT stop refilling, finish in-flight work, release locks and
# exit 0 within a couple of seconds"; §1: several instances for
# availability).
#
# Three daemons, a monotonic and a trend application with pools of ~3 s of
# consumption, two recorded consumers on each all along. First, SIGTERM in
# the middle of a refill: a fourth daemon, started alone with
# IDPOOL_FAULT=pushing:stop, freezes itself with its first push on the wire;
# the others start and fill the pools past it; then SIGTERM and SIGCONT: it
# must finish that refill (the rest of it is fenced off), release its lock
# and exit 0. Then each round:
#   rolling   every daemon in turn gets SIGTERM (SIGINT every other time),
#             must exit 0 within 3 s, logging that its locks were released,
#             and is started again (a new --instance) once the others have
#             refilled; the two others keep the pools filled meanwhile;
#   all       all three are stopped one after the other; right after the
#             last exit no lock key may be left in Redis (their lock TTL is
#             5 s, so a lock not released would still be there); then all
#             three start again.
# Empty pops are allowed only while no daemon runs and until the pools are
# back above low water after the restart (the pools' own buffer); any empty
# pop sent outside those windows is a failure. R: pools back above low water
# after each restart. U M A L over everything popped.
# Evidence that the fault landed: the frozen refiller exited 0, having
# finished the refill it froze in (the log line of its fenced push says
# how many IDs of it were appended: appended=N > 0) with the rest fenced
# off (fenced=N > 0) (midrefill),
# the daemons stopped (stops=N, each exit 0,
# each "locks released" logged), how long the slowest stop took
# (stop_ms=N), and how many IDs the last restart had to serve from the
# buffer alone.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

MONO=roll
TREND=roll_t
APPS=("$MONO" "$TREND")
NAMES=(a b c)
add_app $MONO step=1000 max_pool_size=100000 min_size_percent=50 increment_max=3
add_app $TREND increasing_type=2 step=1000 max_pool_size=100000 min_size_percent=50
# SIGTERM mid-refill: daemon d, alone at first, stops itself
# (IDPOOL_FAULT=pushing:stop) right after sending its first push, before
# reading the reply. The three others start and fill the pools past it (its
# lock expires). Then SIGTERM and SIGCONT: it must finish that refill (its
# later pushes are fenced off), release its lock and exit 0.
IDPOOL_FAULT=pushing:stop chaos_daemon d
midrefill=0
wait_daemon_stopped d 20 && midrefill=1
# A lock TTL far longer than a refill: a lock a stopping daemon failed to
# release would stay visible (and block its application's refills).
CHAOS_DAEMON_ARGS+=(--lock-ttl-ms 5000)
for n in "${NAMES[@]}"; do chaos_daemon "$n"; done
for app in "${APPS[@]}"; do
    app_params "$app"
    # A frozen d must not keep the others from filling the pools. (If d froze
    # inside a lease transaction, its row lock blocks every other daemon's
    # reservation for that application: see the open transactions.)
    wait_until 20 pool_ge "$app" "$P_LOW" ||
        fail "$app never filled while d was frozen; open InnoDB transactions: $(
            sql 'SELECT trx_mysql_thread_id, trx_state, trx_started, trx_rows_locked
                 FROM information_schema.INNODB_TRX' | tr '\t\n' ' ;')"
done
consumers_start $MONO 2
consumers_start $TREND 2
popped_wait "$MONO,$TREND" $((CHAOS_IDS / 10)) "consumers starved"

cat >"$DIR/empties.py" <<'EOF'
"""empties.py WINDOWS LOG...: empty pops (count 0) whose request was sent
outside every window of WINDOWS ("from_ns to_ns" lines); prints
"outside=N inside=N first_outside_ns=T"."""
import struct
import sys

windows = []
with open(sys.argv[1]) as f:
    for line in f:
        if line.strip():
            a, b = line.split()
            windows.append((int(a), int(b)))
outside = inside = 0
first = 0
for path in sys.argv[2:]:
    with open(path, 'rb') as f:
        data = f.read()
    off = 32
    while off + 24 <= len(data):
        t_send, _, count, _ = struct.unpack_from('<QQII', data, off)
        off += 24 + 8 * count
        if count:
            continue
        if any(a <= t_send <= b for a, b in windows):
            inside += 1
        else:
            outside += 1
            first = first or t_send
print('outside=%d inside=%d first_outside_ns=%d' % (outside, inside, first))
EOF
: >"$DIR/windows"

STOPS=0 STOP_MS=0 SIG=TERM
# stop NAME: SIGTERM/SIGINT (alternating); exit 0 within 3 s, locks released.
stop() {
    local name=$1 t
    t=$(now_ns)
    kill_daemon "$name" "$SIG" 10
    t=$(ms_since "$t")
    STOPS=$((STOPS + 1))
    ((t > STOP_MS)) && STOP_MS=$t
    expect "[[ ${DAEMON_STATUS[$name]} == 0 ]]" \
        "daemon $name exited with status ${DAEMON_STATUS[$name]} on SIG$SIG"
    expect "((t <= 3000))" "daemon $name took $t ms to stop on SIG$SIG"
    expect "(($(log_count "$name" 'locks released') >= ${DAEMON_GEN[$name]}))" \
        "daemon $name did not log that it released its locks (SIG$SIG)"
    if [[ $SIG == TERM ]]; then SIG=INT; else SIG=TERM; fi
}
# healthy NAME: the daemon answers /healthz with status ok.
healthy() { [[ $(http_get "$1" /healthz | json_field status) == ok ]]; }
locks_left() { rcli --scan --pattern "$IDPOOL_KEY_PREFIX:*:lock" | grep -c . || true; }

if ((midrefill)); then
    stop d
    fenced=$(log_count d 'push fenced off')
    # "app=K push fenced off: ...; N of M IDs appended (pool now P), the rest ..."
    appended=$(sed -n 's/.* push fenced off: .*; \([0-9]*\) of [0-9]* IDs appended.*/\1/p' "$DIR/d.log" |
        awk '{ s += $1 } END { print s + 0 }')
    fault_landed "midrefill:status=${DAEMON_STATUS[d]},fenced=$fenced,appended=$appended" \
        "[[ ${DAEMON_STATUS[d]} == 0 ]] && ((fenced > 0 && appended > 0))"
else
    fault_landed "midrefill:never_stopped" false
    kill_daemon d KILL
fi

for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    # ------------------------------------------------------- rolling ---
    for n in "${NAMES[@]}"; do
        stop "$n"
        # The others keep the pools filled while it is away.
        sleep 1
        t0=$(now_ns)
        for app in "${APPS[@]}"; do recovered "$app" "$t0"; done
        chaos_daemon "$n"
        wait_until 10 healthy "$n" || failure "daemon $n not healthy 10 s after its restart"
    done

    # ----------------------------------------------- all of them ------
    t_down=$(now_ns)
    buffered=$(($(llen $MONO) + $(llen $TREND)))
    for n in "${NAMES[@]}"; do stop "$n"; done
    left=$(locks_left)
    expect "((left == 0))" "$left lock key(s) left in Redis after every daemon stopped: $(
        rcli --scan --pattern "$IDPOOL_KEY_PREFIX:*:lock" | tr '\n' ' ')"
    sleep 0.5
    for n in "${NAMES[@]}"; do chaos_daemon "$n"; done
    t0=$(now_ns)
    for app in "${APPS[@]}"; do recovered "$app" "$t0"; done
    echo "$t_down $(now_ns)" >>"$DIR/windows"
    for n in "${NAMES[@]}"; do
        wait_until 10 healthy "$n" || failure "daemon $n not healthy 10 s after the restart of all"
    done
    fault_landed "round$round:stops=$STOPS,locks_left=$left,buffered=$buffered" "((STOPS > 0))"
done

consumers_wait "$MONO,$TREND" "$CHAOS_IDS"
consumers_stop $MONO
consumers_stop $TREND
read -r outside inside first < <(python3 "$DIR/empties.py" "$DIR/windows" "$DIR"/roll*.c*.bin)
info "empty pops: ${outside#*=} while a daemon ran, ${inside#*=} while none did (or just after)"
expect "((${outside#*=} == 0))" \
    "${outside#*=} empty pops while daemons were running (first sent at ${first#*=} ns)"
daemons_stop
expect "(($(locks_left) == 0))" "lock keys left in Redis after the final stop"
for app in "${APPS[@]}"; do
    drain "$app"
    check_app "$app"
done
row stops="$STOPS" stop_ms="$STOP_MS"
