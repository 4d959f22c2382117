#!/usr/bin/env bash
# Chaos 01, sigstop: a refiller is frozen (SIGSTOP) past its lock TTL at each
# stage of a refill, then continued (SIGCONT):
#   locked    lock taken, before the MySQL reservation;
#   reserved  a lease committed in MySQL, before any of it is pushed;
#   pushing   the first idpool_push chunk on the wire, the rest not yet sent.
# The victim x<stage> is started with IDPOOL_FAULT=<stage>:stop, so it stops
# itself exactly there. Two healthy daemons b and c (started with a long
# --reload-ms) serve a monotonic application `main` that two consumers pop
# all along; each stage adds a fresh application that only x sees at first
# (its first refill needs the lock, a lease and a multi-chunk push), then b
# and c are told about it (SIGHUP) and take over once x's lock expired.
#
# What it proves: a refiller that wakes up after its lock expired cannot
# push anything: its pushes are fenced off, its lease becomes a gap, and no
# ID is handed out twice or out of order (U, M, A, L); the pools are served
# again within a lock TTL or so (R).
#
# Evidence that the fault landed, per stage: x logged that the fault fired,
# was seen stopped, and after SIGCONT its status server counted a fenced-off
# push (GET /v1/apps/<key> "fenced").
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

TTL=500
STOPPED_S=1.5 # > 2 x TTL: the lock is gone and b or c pushed meanwhile
CHAOS_DAEMON_ARGS+=(--lock-ttl-ms "$TTL")

# fenced_all NAME: pushes daemon NAME saw fenced off, over every application.
fenced_all() {
    local k t=0 n
    for k in "${APPS[@]}"; do
        n=$(app_stat "$1" "$k" fenced)
        [[ $n =~ ^[0-9]+$ ]] && t=$((t + n))
    done
    echo "$t"
}
fenced_ge() { (($(fenced_all "$1") >= $2)); }

add_app main step=200 max_pool_size=$CHAOS_POOL min_size_percent=50 increment_max=5 \
    delta=7 remainder=3 start_offset=1000000
APPS=(main)
chaos_daemon b --reload-ms 600000
chaos_daemon c --reload-ms 600000
wait_until 10 pool_ge main $((CHAOS_POOL / 2)) || fail "main never filled"
sampler_start main
consumers_start main 2

STAGES=()
for ((i = 0; i < CHAOS_ROUNDS; i++)); do STAGES+=(locked reserved pushing); done
r=0
for stage in "${STAGES[@]}"; do
    r=$((r + 1))
    key=$stage$r
    type=1
    ((r % 2)) || type=2
    add_app "$key" increasing_type=$type step=200 max_pool_size=4000 min_size_percent=50 \
        increment_max=3
    APPS+=("$key")
    x=x$r
    IDPOOL_FAULT=$stage:stop chaos_daemon "$x"
    if ! wait_daemon_stopped "$x" 15; then
        failure "$stage: $x never stopped itself"
        daemons_stop "$x"
        continue
    fi
    t0=$(now_ns)
    log_has "$x" "fault injection: IDPOOL_FAULT=$stage:stop fires now" ||
        failure "$stage: $x stopped but did not log the fault"
    consumers_start "$key" 1 --rate 50
    signal_daemon b HUP
    signal_daemon c HUP
    recovered "$key" "$t0"
    sleep "$STOPPED_S"
    signal_daemon "$x" CONT
    if wait_until 10 fenced_ge "$x" 1; then
        fault_landed "$stage:fenced=$(fenced_all "$x")"
    else
        failure "$stage: $x was not fenced off after SIGCONT (fenced=$(fenced_all "$x"))"
    fi
    sleep 0.5
    daemons_stop "$x"
done

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
finish_apps
