#!/usr/bin/env bash
# Chaos 05, mysql_down: MySQL is down for longer than a lease lasts. Two
# daemons serve a monotonic application `main` (popped all along, its lease
# in meta carries every outage) and, per round, a fresh
# application out<r> (monotonic and trend in turn) whose pool and leases in
# meta hold only a few thousand IDs. MySQL goes down (kill -9 and clean stop
# in turn), consumers start popping out<r>, its leases run out, its pool runs
# dry: the `stalled` alert must fire. Then MySQL comes back.
#
# What it proves: an outage never crashes a daemon and nothing is served
# that was not reserved (U, M, A, L, with main refilled from its lease all
# through the outage); after MySQL is back, without any restart, the
# daemons reconnect, reserve, the pools are back above low water and every
# alert that fired for out<r> (stalled, and underflow / low) resolves (R).
#
# Evidence that the fault landed, per round: out<r>'s pool empty with no
# lease left in meta while MySQL was down, and the `stalled` alert firing
# (then resolved) on the alert channel.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
chaos_setup

CHAOS_DAEMON_ARGS+=(--stall-ms 1000 --alert-resolve-ms 1000 --mysql-timeout-ms 1000)
ROUNDS=$((2 * CHAOS_ROUNDS))

# lease_left KEY: ID space left in the leases recorded in meta.
lease_left() {
    local next hi nlo nhi
    read -r next hi nlo nhi < <(rcli HMGET "$(meta_key "$1")" next hi nlo nhi | tr '\n' ' ')
    echo $((${hi:-0} - ${next:-0} + (${nhi:-0} > ${nlo:-0} ? ${nhi:-0} - ${nlo:-0} : 0)))
}
lease_ge() { (($(lease_left "$1") >= $2)); }
# exhausted KEY: the pool is empty and meta's leases cannot supply a step
# (a trend block must fit in one lease; the rest of a lease is a gap).
exhausted() { [[ $(llen "$1") == 0 ]] && (($(lease_left "$1") < 200)); }
# resolved_all KEY: every alert that fired for KEY has resolved since.
resolved_all() {
    local a
    for a in stalled underflow low; do
        (($(alert_count "$1" $a firing) == $(alert_count "$1" $a resolved))) || return 1
    done
}

# alert_events KEY: KEY's alert events so far, "alert:state" in order.
alert_events() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        e = json.loads(line.split(" ", 1)[1])
    except Exception:
        continue
    if e.get("app") == sys.argv[2]:
        print("%s:%s" % (e.get("alert"), e.get("state")), end=" ")' "$DIR/alerts.txt" "$1"
}

add_app main step=200 max_pool_size=4000 min_size_percent=50 increment_max=2 \
    delta=4 remainder=3 start_offset=123456
chaos_daemon a
chaos_daemon b
wait_until 10 pool_ge main 2000 || fail "main never filled"
alerts_start
sampler_start main
consumers_start main 2
# The lease in meta adapts to the consumption (about a minute's worth): wait
# until main's covers 20 s of it, so that it carries every outage.
warm=$((CHAOS_RATE * CHAOS_BATCH * 20))
wait_until 20 lease_ge main "$warm" ||
    failure "main's lease did not grow with its consumption ($(lease_left main) < $warm)"

APPS=(main)
dry=0 stalled=0 resolved=0
for ((r = 1; r <= ROUNDS; r++)); do
    key=out$r
    type=1
    ((r % 2)) || type=2
    add_app "$key" increasing_type=$type step=200 max_pool_size=4000 min_size_percent=50
    APPS+=("$key")
    wait_until 10 pool_ge "$key" 4000 || fail "$key never filled"
    sleep 0.5 # its prefetched lease lands in meta
    how="stop"
    ((r % 2 == 0)) || how="kill"
    "mysql_$how"
    info "round $r: MySQL down (mysql_$how), $key holds $(llen "$key") IDs +" \
        "$(lease_left "$key") of lease"
    consumers_start "$key" 2
    if wait_until 20 exhausted "$key"; then
        dry=$((dry + 1))
    else
        failure "round $r: $key never ran dry (lease left $(lease_left "$key"))"
    fi
    if wait_until 10 alert_seen "$key" stalled firing; then
        stalled=$((stalled + 1))
    else
        failure "round $r: no stalled alert for $key"
    fi
    expect "daemon_alive a && daemon_alive b" "round $r: a daemon died while MySQL was down"
    sleep 1
    # From now on out<r> is popped at a rate its pool can sustain, so that
    # `low` can resolve on a loaded machine.
    consumers_stop "$key"
    consumers_start "$key" 1 --rate 50
    mysql_start
    t0=$(now_ns)
    info "round $r: MySQL back"
    recovered "$key" "$t0" 20
    if wait_until 15 resolved_all "$key"; then
        resolved=$((resolved + 1))
    else
        failure "round $r: alerts of $key not resolved: $(alert_events "$key")"
    fi
done
fault_landed "dry=$dry/$ROUNDS" "((dry == ROUNDS))"
fault_landed "stalled=$stalled" "((stalled == ROUNDS))"
expect "((resolved == ROUNDS))" "alerts resolved in $resolved of $ROUNDS rounds"
expect "! alert_seen main stalled firing" "main stalled although its lease should carry the outages"

consumers_wait "$(apps_csv)" "$CHAOS_IDS"
finish_apps
