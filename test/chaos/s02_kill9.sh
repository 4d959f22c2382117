#!/usr/bin/env bash
# Chaos 02, kill9: a refiller dies by SIGKILL at each stage of a refill and
# is restarted:
#   locked    lock taken, before the MySQL reservation (the lock is left
#             behind and must expire by its TTL);
#   reserved  a lease committed in MySQL, nothing of it pushed (a gap);
#   pushing   the first idpool_push chunk on the wire, the rest never sent.
# The victim x<stage> runs with IDPOOL_FAULT=<stage>:kill and is the only
# daemon that knows the stage's fresh application at first; the healthy
# daemons b and c (long --reload-ms) learn about it by SIGHUP after the
# kill. Then the victim is restarted without the fault (it too learns about
# later stages' applications by SIGHUP). After the stages,
# b and c are killed -9 at random moments under load and restarted, one at a
# time and both at once. Consumers pop all along.
#
# What it proves: a crash at any point loses at most IDs (gaps), never
# hands one out twice or out of order, never pushes outside a lease
# (U, M, A, L), and the survivors or the restarted daemons serve the pools
# again within about a lock TTL (R).
#
# Evidence that the fault landed: each victim logged the fault and died of
# SIGKILL (status 137); at `reserved` its lease is in application_lease
# although none of it was pushed; each random kill -9 ended a daemon with
# status 137.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

TTL=500
CHAOS_DAEMON_ARGS+=(--lock-ttl-ms "$TTL")

add_app main step=200 max_pool_size=$CHAOS_POOL min_size_percent=50 increment_max=4 \
    delta=3 remainder=2 start_offset=1000
APPS=(main)
chaos_daemon b --reload-ms 600000
chaos_daemon c --reload-ms 600000
wait_until 10 pool_ge main $((CHAOS_POOL / 2)) || fail "main never filled"
sampler_start main
consumers_start main 2

STAGES=()
for ((i = 0; i < CHAOS_ROUNDS; i++)); do STAGES+=(locked reserved pushing); done
r=0
died=0
for stage in "${STAGES[@]}"; do
    r=$((r + 1))
    key=$stage$r
    type=2
    ((r % 2)) || type=1
    add_app "$key" increasing_type=$type step=200 max_pool_size=4000 min_size_percent=50 \
        increment_max=2
    APPS+=("$key")
    x=x$r
    IDPOOL_FAULT=$stage:kill chaos_daemon "$x"
    if ! wait_daemon_exit "$x" 15; then
        failure "$stage: $x never killed itself"
        daemons_stop "$x"
        continue
    fi
    t0=$(now_ns)
    st=${DAEMON_STATUS[$x]}
    if [[ $st == 137 ]] && log_has "$x" "fault injection: IDPOOL_FAULT=$stage:kill fires now"; then
        died=$((died + 1))
    else
        failure "$stage: $x exited with status $st, not by its fault hook"
    fi
    if [[ $stage == reserved ]]; then
        n=$(sql "SELECT COUNT(*) FROM application_lease WHERE instance = '$x.1'")
        fault_landed "reserved:leases_of_dead=$n" "((n >= 1))"
    fi
    consumers_start "$key" 1 --rate 50
    for n in "${!DAEMON_PID[@]}"; do signal_daemon "$n" HUP; done
    recovered "$key" "$t0"
    # Restarted without the fault, and like b and c it learns about the next
    # stage's application only by SIGHUP (after that stage's victim).
    chaos_daemon "$x" --reload-ms 600000
    sleep 1
done
fault_landed "stage_kills=$died/${#STAGES[@]}" "((died == ${#STAGES[@]}))"

# Random kill -9 of b or c under load, restart; then both at once.
kills=0
for ((i = 0; i < 2 * CHAOS_ROUNDS; i++)); do
    sleep "0.$((RANDOM % 8 + 2))"
    v=b
    ((RANDOM % 2)) && v=c
    crash_daemon "$v"
    [[ ${DAEMON_STATUS[$v]} == 137 ]] && kills=$((kills + 1))
    chaos_daemon "$v"
done
sleep "0.$((RANDOM % 8 + 2))"
for x in "${!DAEMON_PID[@]}"; do
    crash_daemon "$x"
    [[ ${DAEMON_STATUS[$x]} == 137 ]] && kills=$((kills + 1))
done
sleep 0.3
t0=$(now_ns)
chaos_daemon b
chaos_daemon c
recovered main "$t0"
fault_landed "random_kills=$kills" "((kills >= 2 * CHAOS_ROUNDS + 2))"

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
finish_apps
