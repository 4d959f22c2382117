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

serve_main increment_max=5 delta=7 remainder=3 start_offset=1000000

# on_stage STAGE KEY X T0_NS: X froze itself at STAGE; b and c take KEY over
# while it is stopped; once continued, its pushes are fenced off.
on_stage() {
    local stage=$1 key=$2 x=$3 t0=$4
    fault_fired "$x" "$stage:stop" || failure "$stage: $x stopped but did not log the fault"
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
}
each_stage stop 1 3 on_stage

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
finish_apps
