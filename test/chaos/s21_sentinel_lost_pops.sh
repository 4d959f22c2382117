#!/usr/bin/env bash
# Chaos 21 sentinel_lost_pops: a promotion that loses the last pops (issue
# 20): the replica the sentinels promote lacks pops the old primary had
# acknowledged, so it holds IDs already handed out.
#
# As chaos 19 (test/chaos/lib.sh sentinel_scenario: two refilling daemons
# and an issuer on the Sentinel URL; consumers of every take client kind
# and LPOP, all following the sentinels). Each round, while they pop:
#   1. replica R2 gets replica-priority 0, so that R1 is the one promoted;
#   2. R1 is stopped (SIGSTOP) and the primary drops its replicas' links
#      (CLIENT KILL TYPE replica): R2 reconnects, R1 cannot;
#   3. the consumers pop on (at least POPS_WHILE_STOPPED IDs): acknowledged
#      by the primary, never replicated to R1;
#   4. the primary is killed (-9) and R1 resumed at once; its pool is read
#      (its link is down: nothing changes it until the daemons' sweep) -
#      the probe; the sentinels promote R1 (R1 was stopped for less than
#      their down-after-milliseconds of 1000 ms plus the harness' latency,
#      so it is a good replica again when they choose);
#   5. the old primary comes back a replica; R2's priority is restored.
# Checked: as chaos 19; here the take consumers must also have been refused
# (IDPOOL_EPOCH) inside the window: R1's pools hold IDs handed out before
# the kill, and only the epoch keeps them from the takes until the sweep.
# So that they meet them, the two refillers are stopped (SIGSTOP) from the
# kill until a take was refused on R1 (else a daemon may sweep R1 before
# any consumer arrives: nothing exposed, nothing proved); budget_ms is then
# reported, not bounded.
# Evidence: R1 promoted, its pool held IDs consumers had popped before the
# kill (stale=N > 0), validated under its own server id, pool discarded.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
sentinel_setup
POPS_WHILE_STOPPED=${POPS_WHILE_STOPPED:-2000}

# R1 and R2: the two replicas of primary $1.
replicas_of() {
    local p
    for p in "$REDIS_PORT_0" "$REPLICA1_PORT" "$REPLICA2_PORT"; do
        [[ $p == "$1" ]] || printf '%s ' "$p"
    done
}
REDIS_PORT_0=$REDIS_PORT

sentinel_prepare() {
    local old=$1 app=$3 n0
    read -r R1 R2 <<<"$(replicas_of "$old")"
    redis-cli -p "$R2" CONFIG SET replica-priority 0 >/dev/null
    R1_PID=$(redis_info "$R1" server process_id)
    kill -STOP "$R1_PID"
    T_STOPPED=$(now_ns)
    redis-cli -p "$old" CLIENT KILL TYPE replica >/dev/null
    n0=$(popped "$app")
    wait_until 10 popped_ge "$app" $((n0 + POPS_WHILE_STOPPED)) ||
        failure "$app: the consumers popped nothing while R1 was stopped"
}
sentinel_probe() {
    PROBE_EPOCH=$(redis-cli -p "$1" HGET "$(meta_key "$2")" epoch)
}
# refused_since APP T: a take consumer of APP was refused IDPOOL_EPOCH by a
# request sent at or after T (their .refused logs, flushed every second).
refused_since() {
    cat "$DIR/$1".c*.refused 2>/dev/null | awk -v t="$2" '$1 >= t && $3 == "IDPOOL_EPOCH"' | grep -q .
}
sentinel_fault() {
    local old=$1 member=$2 app=$3 pid
    pid=$(redis_info "$old" server process_id)
    T_FROM=$(now_ns)
    kill -KILL "$pid" || fail "could not kill $member (pid $pid)"
    # The refillers wait until takes met R1's stale pool: else they may
    # sweep it before any consumer came (then nothing was exposed to prove).
    signal_daemon a STOP
    signal_daemon b STOP
    kill -CONT "$R1_PID"
    info "R1 ($R1) was stopped for $(ms_since "$T_STOPPED") ms"
    wait_until 5 proc_gone "$pid" || fail "$member (pid $pid) survived kill -9"
    redis-cli -p "$R1" LRANGE "$(pool_key "$app")" 0 -1 >"$DIR/probe.pool" ||
        fail "could not read R1's pool"
    FAULT_NOTE="lost_pops:$member,r1=${MEMBER_OF[$R1]}"
    wait_until 20 refused_since "$app" "$T_FROM" ||
        failure "$app: no take was refused on R1 within 20 s of the kill"
    signal_daemon a CONT
    signal_daemon b CONT
}
sentinel_after() {
    "$SERVERS" start "$DIR" "$2" >/dev/null || fail "could not start $2 again"
    wait_until 30 eval "[[ \$(redis-cli -p $1 ROLE | head -n 1) == slave ]]" ||
        failure "$2 ($1) was not turned into a replica"
    redis-cli -p "$R2" CONFIG SET replica-priority 100 >/dev/null
    expect "[[ $W_NEW == $R1 ]]" "the sentinels promoted $W_NEW, not R1 ($R1)"
}
SENTINEL_STALE_REQUIRED=1 # R1's pool held IDs popped before the kill
# The refillers are held until takes met the stale pool: the first take
# after the fault says nothing about the daemons' speed (chaos 19 does).
SENTINEL_BUDGET=0
sentinel_scenario sl required
