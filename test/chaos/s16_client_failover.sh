#!/usr/bin/env bash
# Chaos 16 client_failover: libidpool's failover and fail-back between
# environments under faults of the preferred one's Redis (issue 12's fault
# matrix; include/idpool.h, src/lib/client.c).
#
# Two environments, each its own Redis + MariaDB + idpoold: A (preferred,
# the scenario's main servers, daemon a) and B ($DIR/b, daemon b), the same
# application with delta 2, remainder 0 in A and 1 in B (their IDs never
# collide). Three client processes (idpool-clientload, two threads each,
# environments "A B", default failover_ms 500 and failback_ms 1000) take
# IDs all along, recorded, each with a --timeline of its environment. Their
# takes are capped at 5 IDs (--max-batch): the pace (~70,000 IDs/s in all)
# is set by round trips, not by a dry pool or a rate limit, either of which
# would move clients between environments by itself or delay them. Should
# the clients near their end before a fault is through (a fast machine),
# that fault waits for them to end and starts a new generation. In turn,
# each round (CHAOS_ROUNDS), faults of A's Redis, each longer than
# failover_ms, each healed and the clients back on A before the next:
#   kill      kill -9, restarted 1.5 s later (from its AOF);
#   rollback  BGSAVE, the clients take on from A (more than the snapshot's
#             pool: every ID in it is handed out), kill -9, restart 1 s later
#             from the snapshot with daemon a held (SIGSTOP) 2 s longer, so
#             that the clients' fail-back attempts surely meet the restored
#             pool, which holds IDs already handed out: idpool_take must
#             refuse it (IDPOOL_EPOCH) until daemon a re-validates and
#             discards it, so no ID may come twice. Healed: daemon a goes on;
#   partition every packet to or from A's Redis port dropped by nftables for
#             3 s (the scenario runs in a network namespace of its own,
#             created and deleted here, as chaos 08: loopback only);
#   stop      A's redis-server SIGSTOPped for 2 s, then SIGCONT.
# Measured per fault from the timelines (CLOCK_MONOTONIC, sampled every
# 5 ms): failover = just before the fault -> the client's environment is B;
# fail-back = just before the heal -> back on A (a take blocked on a stopped
# or cut-off Redis is answered the moment it heals: stop's fail-back is
# immediate); the worst client of the worst round, in the row as
# failover_ms=kill/rollback/partition/stop and failback_ms=... (each
# measurement is in the log).
# Evidence that each fault landed: A's PING failed during it; kill and
# rollback: A's run_id changed; rollback: the restored Redis refused takes
# (refused_epoch, read from its meta before daemon a goes on) and the
# snapshot's pool held IDs popped before the restore (stale=N, rollback.py);
# partition: nftables dropped packets; stop: the process was in state T;
# every fault: the clients' failover counters rose. Asserted: each fault
# made every client fail over and fail back (within 20 s of the heal); no
# duplicate (idpool-check) over all the clients' pops and what is left in
# both pools at the end; IDs from both remainders; every thread got all its
# IDs with no call timed out; at least CHAOS_IDS IDs, and at least
# 2,400,000 (the quick profile's 300,000 would be taken before the faults
# are through); both daemons exit 0 on SIGTERM.
# shellcheck source-path=SCRIPTDIR
# shellcheck disable=SC2317 # functions called through wait_until, eval and traps

# Outside a namespace: run this script inside one of its own (netns.sh).
# shellcheck source=netns.sh
source "$(dirname "$0")/netns.sh"
chaos_netns 16 client_failover "$0" "$@"

# ---- inside the namespace.
source "$(dirname "$0")/lib.sh"
IDPOOL_CLIENTLOAD=${IDPOOL_CLIENTLOAD:-$CHAOS_BUILD/test/idpool-clientload}
[[ -x $IDPOOL_CLIENTLOAD ]] || {
    printf 'chaos: %s is not built (chaos.sh --build DIR)\n' "$IDPOOL_CLIENTLOAD" >&2
    exit 2
}
chaos_setup
rpid=''
# A Redis or daemon left stopped by an abort would hold up the shutdown.
s16_exit() {
    local rc=$?
    set +e # (exit 1) below must not end the trap
    [[ -z $rpid ]] || kill -CONT "$rpid" 2>/dev/null
    (exit "$rc")
    chaos_exit
}
trap s16_exit EXIT
info "network namespace $CHAOS_NETNS"

APP=cf
PROCS=3 THREADS=2
TOTAL=$((CHAOS_IDS > 2400000 ? CHAOS_IDS : 2400000))
PER_THREAD=$(((TOTAL + PROCS * THREADS - 1) / (PROCS * THREADS)))
MAX_BATCH=5 # IDs per take at most: the clients' pace (~70,000 IDs/s in all)
ROOM_S=10   # a fault needs a generation of clients with this much work left
KINDS=(kill rollback partition stop)
HOLD_S=2 # daemon a held after a rollback: fail-back attempts meet the stale pool
CLIENT_WAIT_S=180 # bound on the end of a generation of clients
[[ $PROFILE == long ]] && CLIENT_WAIT_S=900

# ------------------------------------------------------- environments ---
env_b
rcli_b() { redis-cli -h 127.0.0.1 -p "$B_REDIS_PORT" "$@"; }
add_app $APP step=5000 max_pool_size=40000 min_size_percent=50 max_size_per_times=1000 \
    max_size_per_second=50000000 delta=2 remainder=0
sql_b "INSERT INTO application (entity_key, step, max_pool_size, min_size_percent,
    max_size_per_times, max_size_per_second, delta, remainder)
    VALUES ('$APP', 5000, 40000, 50, 1000, 50000000, 2, 1)" || fail "row $APP in environment B"
chaos_daemon a
chaos_daemon b --redis "$B_REDIS" --mysql "$B_MYSQL"
b_pool_ge() { (($(rcli_b LLEN "$(pool_key "$APP")") >= $1)); }
wait_until 20 pool_ge $APP 20000 || fail "A's pool never filled"
wait_until 20 b_pool_ge 20000 || fail "B's pool never filled"
info "environments: A $IDPOOL_REDIS_URL, B $B_REDIS; $PROCS x $THREADS threads x $PER_THREAD IDs"

# --------------------------------------------------------------- clients ---
# A generation of clients: PROCS idpool-clientload processes (client.<g>.<p>,
# output client.<g>.<p>.out, pop logs c.<g>.<p>.<thread>.bin, timeline
# tl.<g>.<p>) that take TOTAL IDs in all. Usually one generation sees every
# fault; when one would run out of work before a fault is through (a fast
# machine), the next fault waits for it to end and starts another.
GEN=-1 GEN_T0=0
gen_start() {
    local p
    GEN=$((GEN + 1))
    GEN_T0=$(now_ns)
    for ((p = 0; p < PROCS; p++)); do
        bg_run "client.$GEN.$p" "$IDPOOL_CLIENTLOAD" --threads "$THREADS" --ids "$PER_THREAD" \
            --max-batch "$MAX_BATCH" --mod 2 --timeout-ms 5000 --record "$DIR/c.$GEN.$p" \
            --timeline "$DIR/tl.$GEN.$p" $APP "$IDPOOL_REDIS_URL" "$B_REDIS"
    done
    wait_until 15 on_env 0 || fail "generation $GEN wrote no timeline on A: $(tail -n 3 "$DIR/client.$GEN.0.out")"
}
# gen_end: waits (bounded) until the generation's clients exit; each must
# exit 0 (every thread got all its IDs).
gen_end() {
    local p pid
    for ((p = 0; p < PROCS; p++)); do
        pid=${BG_PID[client.$GEN.$p]:-}
        [[ -n $pid ]] || continue
        wait_until "$CLIENT_WAIT_S" eval "! proc_alive $pid" ||
            failure "client $GEN.$p still running after ${CLIENT_WAIT_S}s"
        bg_stop "client.$GEN.$p"
        expect "[[ $BG_STATUS == 0 ]]" "client $GEN.$p exited with status $BG_STATUS: $(tail -n 2 "$DIR/client.$GEN.$p.out" | tr '\n' ' ')"
    done
}
# gen_taken: about how many IDs the generation recorded so far (8 bytes an ID).
gen_taken() {
    local f b=0
    for f in "$DIR/c.$GEN".*.bin; do
        [[ -e $f ]] && b=$((b + $(stat -c %s "$f")))
    done
    echo $((b / 8))
}
# gen_room: every client of the generation runs and, at its pace so far,
# has at least ROOM_S s of work left.
gen_room() {
    local p taken ms
    ((GEN >= 0)) || return 1
    for ((p = 0; p < PROCS; p++)); do
        proc_alive "${BG_PID[client.$GEN.$p]}" || return 1
    done
    taken=$(gen_taken)
    ms=$(ms_since "$GEN_T0")
    ((taken > 0 && (TOTAL - taken) * ms / taken >= ROOM_S * 1000))
}
# on_env E: every client's latest timeline line says environment E.
on_env() {
    local p last
    for ((p = 0; p < PROCS; p++)); do
        last=$(tail -n 1 "$DIR/tl.$GEN.$p" 2>/dev/null) || return 1
        [[ $last == *" env=$1 "* ]] || return 1
    done
}
# counter FIELD [GEN]: FIELD (failovers, failbacks) summed over the latest
# timeline lines of the generation's clients.
counter() {
    local p s=0 v
    for ((p = 0; p < PROCS; p++)); do
        v=$(tail -n 1 "$DIR/tl.${2:-$GEN}.$p" 2>/dev/null | sed -n "s/.* $1=\([0-9]*\).*/\1/p")
        s=$((s + ${v:-0}))
    done
    echo "$s"
}
# switch_ms T_NS E: over the clients, the worst time (ms) from T_NS to the
# first timeline line at or after it with environment E; "none" (status 1)
# when a client has no such line.
switch_ms() {
    local t=$(($1 / 1000000)) p d worst=0
    for ((p = 0; p < PROCS; p++)); do
        d=$(awk -v t="$t" -v e="env=$2" \
            '{ v = substr($1, 6) + 0 } v >= t && $2 == e { print v - t; exit }' "$DIR/tl.$GEN.$p")
        if [[ -z $d ]]; then
            echo none
            return 1
        fi
        ((d > worst)) && worst=$d
    done
    echo "$worst"
}
taken_a() { rcli HGET "$(meta_key "$APP")" taken 2>/dev/null | tr -dc 0-9; }
taken_a_ge() {
    local n
    n=$(taken_a) && ((${n:-0} >= $1))
}
ping_fails() { [[ $(timeout 1 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" PING 2>/dev/null) != PONG ]]; }
netns_nft # partition PORT, heal, dropped (netns.sh)

# ---------------------------------------------------------------- faults ---
# Each fault_KIND injects its fault and heals it: T_F (ns) just before the
# fault is injected, T_H just before it is healed (a take blocked on a
# stopped or cut-off Redis is answered the moment it is healed); EV and COND
# are its evidence (the clients' failover counters are added by fault).

fault_kill() {
    local dead down=0
    dead=$(run_id)
    T_F=$(now_ns)
    redis_kill
    ping_fails && down=1
    sleep_until "$T_F" 1500
    T_H=$(now_ns)
    redis_start
    EV="ping=$( ((down)) && echo down || echo up),run_id=$([[ $(run_id) != "$dead" ]] && echo new || echo same)"
    COND="(($down)) && [[ \$(run_id) != $dead ]]"
}

ROLLBACKS=0 STALE=0 REFUSED=0
fault_rollback() {
    local dead down=0 n0 r0 r1 refused
    ROLLBACKS=$((ROLLBACKS + 1))
    dead=$(run_id)
    r0=$(rcli HGET "$(meta_key "$APP")" refused_epoch | tr -dc 0-9)
    rm -rf "$DIR/old"
    save_rdb "$DIR/old"
    probe "$DIR/old" "$APP" 10 "the snapshot"
    cp "$DIR/probe.pool" "$DIR/probe.$ROLLBACKS.pool"
    info "rollback: the snapshot's pool holds $(grep -c . "$DIR/probe.pool") IDs"
    n0=$(taken_a)
    # Every ID in the snapshot's pool is handed out before the rollback.
    wait_until 10 taken_a_ge $((${n0:-0} + $(grep -c . "$DIR/probe.pool") + 1000)) ||
        failure "rollback: the clients did not take the snapshot's pool from A"
    T_F=$(now_ns)
    redis_kill
    ping_fails && down=1
    rm -rf "$DIR/redis"
    mv "$DIR/old" "$DIR/redis"
    signal_daemon a STOP
    sleep_until "$T_F" 1000
    redis_start
    sleep "$HOLD_S"
    r1=$(rcli HGET "$(meta_key "$APP")" refused_epoch | tr -dc 0-9)
    T_H=$(now_ns)
    signal_daemon a CONT
    refused=$((${r1:-0} - ${r0:-0}))
    REFUSED=$((REFUSED + refused))
    ROLLBACK_T[$ROLLBACKS]=$T_F
    EV="ping=$( ((down)) && echo down || echo up),run_id=$([[ $(run_id) != "$dead" ]] && echo new || echo same),refused_epoch=$refused"
    COND="(($down && $refused > 0)) && [[ \$(run_id) != $dead ]]"
}

fault_partition() {
    local d0 n down=0
    d0=$(dropped)
    T_F=$(now_ns)
    partition "$REDIS_PORT"
    ping_fails && down=1
    sleep_until "$T_F" 3000
    n=$(($(dropped) - d0))
    T_H=$(now_ns)
    heal
    EV="ping=$( ((down)) && echo down || echo up),dropped=$n"
    COND="(($down && $n > 0))"
}

fault_stop() {
    local down=0 stopped=0
    rpid=$(redis_server_pid)
    T_F=$(now_ns)
    kill -STOP "$rpid"
    proc_stopped "$rpid" && stopped=1
    ping_fails && down=1
    sleep_until "$T_F" 2000
    T_H=$(now_ns)
    kill -CONT "$rpid"
    rpid=''
    EV="ping=$( ((down)) && echo down || echo up),state=$( ((stopped)) && echo T || echo run)"
    COND="(($down && $stopped))"
}

declare -A FO_MS=() FB_MS=() ROLLBACK_T=()
ALL=()
# fault ROUND KIND: one fault with the clients on A; failover and fail-back
# measured, evidence recorded.
fault() {
    local r=$1 kind=$2 fo0 fo fb0 fb fo_ms fb_ms
    wait_until 15 on_env 0 || failure "round $r $kind: the clients were not on A before the fault"
    # A steady A: its pool refilled (after a restart, the clients may be
    # back before the daemon's sweep and refill).
    wait_until 15 pool_ge "$APP" 20000 || failure "round $r $kind: A's pool not refilled before the fault"
    fo0=$(counter failovers)
    fb0=$(counter failbacks)
    info "round $r: $kind"
    "fault_$kind"
    wait_until 20 on_env 0 || failure "round $r $kind: the clients not back on A 20 s after the heal"
    fo=$(($(counter failovers) - fo0))
    fb=$(($(counter failbacks) - fb0))
    fo_ms=$(switch_ms "$T_F" 1) || failure "round $r $kind: a client did not fail over"
    fb_ms=$(switch_ms "$T_H" 0) || failure "round $r $kind: a client did not fail back"
    info "round $r $kind: failover $fo_ms ms, fail-back $fb_ms ms (after $(((T_H - T_F) / 1000000)) ms of fault); failovers +$fo, failbacks +$fb; $EV"
    fault_landed "$kind:$EV,failovers=+$fo" "$COND && ((fo >= PROCS && fb >= PROCS))"
    ALL+=("$r.$kind:$fo_ms/$fb_ms")
    if [[ $fo_ms == none || ${FO_MS[$kind]:-0} == none ]]; then
        FO_MS[$kind]=none
    elif ((fo_ms > ${FO_MS[$kind]:-0})); then FO_MS[$kind]=$fo_ms; fi
    if [[ $fb_ms == none || ${FB_MS[$kind]:-0} == none ]]; then
        FB_MS[$kind]=none
    elif ((fb_ms > ${FB_MS[$kind]:-0})); then FB_MS[$kind]=$fb_ms; fi
}

for ((round = 1; round <= CHAOS_ROUNDS; round++)); do
    for kind in "${KINDS[@]}"; do
        if ! gen_room; then
            ((GEN < 0)) || info "generation $GEN has less than ${ROOM_S}s of work left"
            ((GEN < 0)) || gen_end
            gen_start
        fi
        fault "$round" "$kind"
    done
done
info "faults done $(ms_since "$CHAOS_T0") ms into the scenario (failover/fail-back ms): ${ALL[*]}"
gen_end

# ------------------------------------------------------------------ check ---
daemons_stop a b
# What is left in the pools: no ID there may have been handed out.
for env in a b; do
    port=$REDIS_PORT
    [[ $env == b ]] && port=$B_REDIS_PORT
    n=$(redis-cli -h 127.0.0.1 -p "$port" LLEN "$(pool_key $APP)")
    ((n > 0)) || continue
    "$IDPOOL_LOAD" --port "$port" --mode lpop --key "$(pool_key $APP)" --conns 1 --pipeline 1 \
        --batch 1000 --count "$n" --duration 30 --record "$DIR/drain.$env" --timeout-ms 5000 \
        >"$DIR/drain.$env.out" 2>&1 || failure "draining $env's pool ($n IDs) failed"
done

st=0
shopt -s nullglob
"$IDPOOL_CHECK" "$DIR"/c.*.bin "$DIR"/drain.*.bin >"$DIR/check" 2>&1 || st=$?
line=$(grep '^check: ' "$DIR/check" | tail -n 1)
info "U over the clients and the pools: $line (status $st)"
for kv in ${line#check: }; do
    [[ ${kv#*=} =~ ^[0-9]+$ ]] && CHECK_SUM[${kv%%=*}]=$((${CHECK_SUM[${kv%%=*}]:-0} + ${kv#*=}))
done
((st == 0)) || failure "idpool-check: status $st: $line $(grep -E '^    |^idpool-check: ' "$DIR/check" | head -n 5 | tr '\n' ' ')"
[[ -n $line ]] || failure "idpool-check printed no summary"

ids=0 r0=0 r1=0 timeouts=0 failovers=0 failbacks=0
for ((g = 0; g <= GEN; g++)); do
    failovers=$((failovers + $(counter failovers "$g")))
    failbacks=$((failbacks + $(counter failbacks "$g")))
    for ((p = 0; p < PROCS; p++)); do
        out=$DIR/client.$g.$p.out
        grep -E 'ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:' "$out" >/dev/null &&
            failure "sanitizer report in client $g.$p's output"
        stats=$(grep '^clientload: ids=' "$out") || {
            failure "client $g.$p printed no stats"
            continue
        }
        info "client $g.$p: $stats"
        ids=$((ids + $(sed -n 's/.* ids=\([0-9]*\) .*/\1/p' <<<"$stats")))
        timeouts=$((timeouts + $(sed -n 's/.* timeouts=\([0-9]*\) .*/\1/p' <<<"$stats")))
        r0=$((r0 + $(sed -n 's/.* r0=\([0-9]*\).*/\1/p' "$out")))
        r1=$((r1 + $(sed -n 's/.* r1=\([0-9]*\).*/\1/p' "$out")))
    done
done
expect "((ids == (GEN + 1) * PROCS * THREADS * PER_THREAD && ids >= TOTAL))" \
    "the clients got $ids IDs, expected $(((GEN + 1) * PROCS * THREADS * PER_THREAD))"
expect "((${CHECK_SUM[ids]:-0} >= ids))" "idpool-check saw ${CHECK_SUM[ids]:-0} IDs, the clients took $ids"
expect "((timeouts == 0))" "$timeouts client calls timed out"
expect "((r0 > 0 && r1 > 0))" "IDs from one environment only (r0=$r0 r1=$r1)"

# The rollbacks: IDs of each snapshot's pool popped before its restore.
for ((k = 1; k <= ROLLBACKS; k++)); do
    n=$(python3 "$ROLLBACK_PY" stale "$DIR/probe.$k.pool" "${ROLLBACK_T[$k]}" "$DIR"/c.*.bin)
    STALE=$((STALE + n))
    fault_landed "rollback$k:stale=$n" "((n > 0))"
done

fo_row='' fb_row=''
for kind in "${KINDS[@]}"; do
    fo_row+=${fo_row:+/}${FO_MS[$kind]:--}
    fb_row+=${fb_row:+/}${FB_MS[$kind]:--}
done
row failover_ms="$fo_row" failback_ms="$fb_row" r0="$r0" r1="$r1" timeouts="$timeouts" \
    refused_epoch="$REFUSED" stale="$STALE" \
    failovers="$failovers" failbacks="$failbacks" generations=$((GEN + 1))
