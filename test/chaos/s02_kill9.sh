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

serve_main increment_max=4 delta=3 remainder=2 start_offset=1000

# on_stage STAGE KEY X T0_NS: X died of its fault hook at STAGE; the others
# take KEY over; X is restarted without the fault.
died=0
on_stage() {
    local stage=$1 key=$2 x=$3 t0=$4 st n
    st=${DAEMON_STATUS[$x]}
    if [[ $st == 137 ]] && fault_fired "$x" "$stage:kill"; then
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
}
each_stage kill 2 2 on_stage
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
